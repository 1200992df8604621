// A reshape into a shape of another element count.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Pool5 = _, 512, 7, 7);
blobflow::blob!(pub shape Wrong = _, 25000);

fn main() {
    let mut n = NetSpec::<f32>::new("vgg");
    let x = n.input::<Pool5>("pool5");
    let _ = n.add("flatten", &x, ReshapeAs::<Wrong>::new());
}
