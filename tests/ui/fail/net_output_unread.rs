// A layer whose output no later layer reads: Caffe makes it an output of
// the net, and the compiler says so (a warning, an error under deny).
#![deny(unused_must_use)]
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Features = _, 16);

fn main() {
    let mut n = NetSpec::<f32>::new("n");
    let x = n.input::<Features>("x");
    let h = n.add("ip1", &x, Fc::<8>::new());
    n.add("ip2", &h, Fc::<4>::new());
}
