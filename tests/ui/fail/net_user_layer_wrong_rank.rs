// A user's own layer that takes (N, C), declared on an image batch: its
// LayerSpec's bound speaks for it.
use blobflow::layers::typed_net::*;
use blobflow::typed::{Rank2, Shape};

blobflow::blob!(pub shape Maps = _, 8, 4, 4);

struct Scaled;

impl LayerFields for Scaled {
    fn type_name(&self) -> &str {
        "ChannelScale"
    }
    fn write_fields(&self, _text: &mut String) {}
}

impl<X: Shape> LayerSpec<One<X>> for Scaled
where
    X::Dims: Rank2,
{
    type Out = X;
}

fn main() {
    let mut n = NetSpec::<f32>::new("n");
    let x = n.input::<Maps>("x");
    let _ = n.add("scale", &x, Scaled);
}
