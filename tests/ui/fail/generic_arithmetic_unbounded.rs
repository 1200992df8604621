// Type-level arithmetic on a generic dim needs its bound.
use blobflow::blob;
use blobflow::typed::Dim;

fn crop<W: Dim>(x: &blob!(f32; W)) -> blob!(f32; W - 4) {
    let _ = x;
    unimplemented!()
}

fn main() {}
