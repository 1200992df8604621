// A Slice at channel 8 of a blob of 8 channels: nothing would be left.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Maps = _, 8, 4, 4);

fn main() {
    let mut n = NetSpec::<f32>::new("slice");
    let x = n.input::<Maps>("x");
    let _ = n.slice::<8, _>("split", &x, ["a", "b"]);
}
