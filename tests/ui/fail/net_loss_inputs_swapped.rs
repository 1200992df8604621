// SoftmaxWithLoss takes (scores, labels); given (labels, scores).
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Features = _, 16);
blobflow::blob!(pub shape Classes = _);

fn main() {
    let mut n = NetSpec::<f32>::new("n");
    let x = n.input::<Features>("x");
    let label = n.input::<Classes>("label");
    let scores = n.add("ip", &x, Fc::<10>::new());
    let _ = n.add("loss", (&label, &scores), SoftmaxLoss::new());
}
