// A blob type where a typed net wants a shape.
use blobflow::blob;
use blobflow::layers::typed_net::*;

fn main() {
    let mut n = NetSpec::<f32>::new("n");
    let _ = n.input::<blob!(f32; _, 8)>("x");
}
