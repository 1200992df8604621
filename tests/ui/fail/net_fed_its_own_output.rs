// A layer fed its own output: its handle does not exist before the layer
// is added.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Image = _, 3, 32, 32);

fn main() {
    let mut n = NetSpec::<f32>::new("loop");
    let _x = n.input::<Image>("x");
    let conv = n.add("conv", &conv, Conv::<16, 3>::new());
}
