// A generic layer whose scale must have one value per channel, given 16
// scales for a 32-channel blob.
use blobflow::blob;
use blobflow::typed::Dim;

fn scale<N: Dim, C: Dim, H: Dim, W: Dim>(x: &blob!(f32; N, C, H, W), gamma: &blob!(f32; C)) {
    let _ = (x, gamma);
}

fn main() {
    let x = <blob!(f32; _, 32, 8, 8)>::with_dynamic(2).unwrap();
    let gamma = <blob!(f32; 16)>::new().unwrap();
    scale(&x, &gamma);
}
