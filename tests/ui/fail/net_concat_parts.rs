// An inception-style Concat whose second part was pooled at stride 2:
// its height and width differ from the first's.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Features = _, 192, 28, 28);

fn main() {
    let mut n = NetSpec::<f32>::new("inception");
    let x = n.input::<Features>("x");
    let a = n.add("1x1", &x, Conv::<64, 1>::new());
    let b = n.add("pool", &x, Pool::<3, 2>::max());
    let _ = n.add("output", (&a, &b), Concat);
}
