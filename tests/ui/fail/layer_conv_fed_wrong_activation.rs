// conv2 fed conv1's output instead of pool1's.
use blobflow::layers::{Convolution, Layer};
use blobflow::{blob, typed::TypedBlob};

blob!(pub shape Conv1Out = _, 20, 24, 24);
blob!(pub shape Pool1Out = _, 20, 12, 12);
blob!(pub shape Conv2Out = _, 50, 8, 8);
type Conv2 = Convolution<f32, Pool1Out, 50, 5>;

fn main() {
    let mut conv2 = Conv2::new().unwrap();
    let conv1_out = TypedBlob::<f32, Conv1Out>::with_dynamic(1).unwrap();
    let conv2_out = TypedBlob::<f32, Conv2Out>::with_dynamic(1).unwrap();
    conv2.forward(&conv1_out, &conv2_out).unwrap();
}
