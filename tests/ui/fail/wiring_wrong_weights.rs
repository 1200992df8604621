// The wiring mistake shown in examples/typed_layers.rs.
use blobflow::blob;

fn main() {
    let hidden = <blob!(f32; _, 32)>::with_dynamic(60).unwrap();
    let w1 = <blob!(f32; 32, 16)>::new().unwrap();
    let _logits = hidden.inner_product(&w1).unwrap();
}
