// A 5x5 kernel on a 4x4 map: no output position exists.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Small = _, 8, 4, 4);

fn main() {
    let mut n = NetSpec::<f32>::new("n");
    let x = n.input::<Small>("x");
    let _ = n.add("conv", &x, Conv::<16, 5>::new());
}
