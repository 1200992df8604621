// A reshape that would lose an element, between declared shapes.
use bf::{blob, typed::TypedBlob};

blob!(pub shape Features = 64, 800);
blob!(pub shape Wrong = 64, 801);

fn main() {
    let f = TypedBlob::<f32, Features>::new().unwrap();
    let _w: TypedBlob<f32, Wrong> = f.reshape();
}
