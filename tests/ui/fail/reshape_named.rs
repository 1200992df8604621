use blobflow::{blob, typed::TypedBlob};

blob!(pub shape Conv1Out = 20, 24, 24);
blob!(pub shape FcIn = 11521);

fn main() {
    let a = TypedBlob::<f32, Conv1Out>::new().unwrap();
    let _b: TypedBlob<f32, FcIn> = a.reshape();
}
