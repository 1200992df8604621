// A convolution fed a flat (N, 500) blob.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Hidden = _, 500);

fn main() {
    let mut n = NetSpec::<f32>::new("n");
    let x = n.input::<Hidden>("x");
    let _ = n.add("conv", &x, Conv::<16, 3>::new());
}
