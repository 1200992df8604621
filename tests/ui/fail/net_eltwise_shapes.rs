// An Eltwise of two blobs of different shapes.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Wide = _, 8, 4, 4);
blobflow::blob!(pub shape Narrow = _, 4, 4, 4);

fn main() {
    let mut n = NetSpec::<f32>::new("bad");
    let a = n.input::<Wide>("a");
    let b = n.input::<Narrow>("b");
    let _ = n.add("sum", (&a, &b), Eltwise::sum());
}
