// A layer on f64 fed f32 blobs.
use blobflow::layers::{Layer, ReLU};
use blobflow::{blob, typed::TypedBlob};

blob!(pub shape Hidden = _, 8);

fn main() {
    let mut relu = ReLU::<f64, Hidden>::new();
    let h = TypedBlob::<f32, Hidden>::with_dynamic(1).unwrap();
    relu.forward(&h, &h).unwrap();
}
