// A residual block whose branch ends with 128 channels where the
// shortcut carries 64: the sum cannot be declared.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Features = _, 64, 56, 56);

fn main() {
    let mut n = NetSpec::<f32>::new("res");
    let x = n.input::<Features>("x");
    let branch = n.add("res2a_branch2a", &x, Conv::<64, 1>::new().bias_term(false));
    let branch = n.add("res2a_branch2a_relu", branch, Neuron::relu());
    let branch = n.add("res2a_branch2b", &branch, Conv::<128, 3, 1, 1>::new().bias_term(false));
    let _ = n.add("res2a", (&x, &branch), Eltwise::sum());
}
