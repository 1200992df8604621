// SoftmaxWithLoss given one-hot labels (N, 10) instead of class indices.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Digits = _, 1, 28, 28);
blobflow::blob!(pub shape OneHot = _, 10);

fn main() {
    let mut n = NetSpec::<f32>::new("lenet");
    let x = n.input::<Digits>("data");
    let label = n.input::<OneHot>("label");
    let scores = n.add("ip", &x, Fc::<10>::new());
    let _ = n.add("loss", (&scores, &label), SoftmaxLoss::new());
}
