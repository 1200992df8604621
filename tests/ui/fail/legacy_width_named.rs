use blobflow::{blob, typed::TypedBlob};

blob!(shape Video = 2, 3, 8, 16, 16);

fn main() {
    let a = TypedBlob::<f32, Video>::new().unwrap();
    let _ = a.width();
}
