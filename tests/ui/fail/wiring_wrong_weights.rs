// Weights of another K handed to an inner product of typed blobs.
use blobflow::blob;

fn main() {
    let hidden = <blob!(f32; _, 32)>::with_dynamic(60).unwrap();
    let w1 = <blob!(f32; 32, 16)>::new().unwrap();
    let _logits = hidden.inner_product(&w1).unwrap();
}
