// The error shown in the README.
use blobflow::{blob, typed::TypedBlob};

blob!(pub shape FcIn = 64, 11520);
blob!(pub shape FcTooWide = 64, 11521);

fn main() {
    let fc = TypedBlob::<f32, FcIn>::new().unwrap();
    let _bad: TypedBlob<f32, FcTooWide> = fc.reshape();
}
