use blobflow::{blob, typed::TypedBlob};

blob!(shape Pool1Out = 64, 20, 12, 12);
blob!(shape Conv2In = 64, 20, 12, 13);

fn main() {
    let mut a = TypedBlob::<f32, Conv2In>::new().unwrap();
    let b = TypedBlob::<f32, Pool1Out>::new().unwrap();
    a.copy_from(&b, false).unwrap();
}
