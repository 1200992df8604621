// A blob type where a layer wants a shape.
use blobflow::blob;
use blobflow::layers::ReLU;

fn main() {
    let _relu = ReLU::<f32, blob!(f32; _, 8)>::new();
}
