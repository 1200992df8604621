// A 3x3 convolution of 28x28 digits makes 26x26, not the declared 24x24.
use blobflow::layers::{Convolution, Layer};
use blobflow::{blob, typed::TypedBlob};

blob!(pub shape Digits = n: _, c: 1, h: 28, w: 28);
blob!(pub shape Conv1Out = _, 20, 24, 24);

fn main() {
    let mut conv = Convolution::<f32, Digits, 20, 3>::new().unwrap();
    let x = TypedBlob::<f32, Digits>::with_dynamic(1).unwrap();
    let y = TypedBlob::<f32, Conv1Out>::with_dynamic(1).unwrap();
    conv.forward(&x, &y).unwrap();
}
