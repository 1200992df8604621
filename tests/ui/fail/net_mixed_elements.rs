// A handle of an f32 net given to a layer of an f64 net: the element
// type is part of the handle, so the declaration does not compile.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Features = _, 16);

fn main() {
    let mut single = NetSpec::<f32>::new("single");
    let x = single.input::<Features>("x");
    let mut double = NetSpec::<f64>::new("double");
    let _ = double.add("relu", &x, Neuron::relu());
}
