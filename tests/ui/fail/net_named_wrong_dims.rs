// A name given to a handle whose dims are not the name's: a 5x5
// convolution leaves 28 -> 24, not 15.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Digits = _, 1, 28, 28);
blobflow::blob!(pub shape Conv1Out = _, 32, 15, 15);

fn main() {
    let mut n = NetSpec::<f32>::new("n");
    let x = n.input::<Digits>("x");
    let _: Top<f32, Conv1Out> = n.add("conv1", &x, Conv::<32, 5>::new()).named();
}
