// VGG's pool5 through Flatten in a typed net: 512 x 7 x 7 = 25088 is beyond
// compile-time arithmetic, and the note says what to write instead.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Pool5 = _, 512, 7, 7);

fn main() {
    let mut n = NetSpec::<f32>::new("n");
    let x = n.input::<Pool5>("pool5");
    let _ = n.add("flatten", &x, Flatten);
}
