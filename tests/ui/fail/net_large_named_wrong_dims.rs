// VGG's pool5 (512 x 7 x 7 = 25088) flattened in a typed net, named with a
// shape of 25000: the dims above 4096 print in thousands.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Pool5 = _, 512, 7, 7);
blobflow::blob!(pub shape Fc6In = _, 25000);

fn main() {
    let mut n = NetSpec::<f32>::new("n");
    let x = n.input::<Pool5>("pool5");
    let _f = n.add("flatten", &x, Flatten).named::<Fc6In>();
}
