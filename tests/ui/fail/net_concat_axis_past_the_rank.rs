// SSD's priors are (1, 2, K): joined on axis 2. Joined on axis 3, which
// they do not have, the declaration does not compile.
use blobflow::layers::typed_net::*;

blobflow::blob!(pub shape Near = 1, 2, 64);
blobflow::blob!(pub shape Far = 1, 2, 16);

fn main() {
    let mut n = NetSpec::<f32>::new("priors");
    let near = n.input::<Near>("near");
    let far = n.input::<Far>("far");
    let _ = n.add("priors", (&near, &far), ConcatAxis::<3>);
}
