// The error shown in the README.
use blobflow::{blob, typed::TypedBlob};

blob!(pub shape FcIn = 64, 11520);

fn main() {
    let fc = TypedBlob::<f32, FcIn>::new().unwrap();
    let _bad: blob!(f32; 64, 11521) = fc.reshape();
}
