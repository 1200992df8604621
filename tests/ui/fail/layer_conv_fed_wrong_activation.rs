// conv2 fed conv1's output instead of pool1's.
use blobflow::layers::lenet::{Conv1Out, Conv2, Conv2Out};
use blobflow::layers::Layer;
use blobflow::typed::TypedBlob;

fn main() {
    let mut conv2 = Conv2::new().unwrap();
    let conv1_out = TypedBlob::<f32, Conv1Out>::with_dynamic(1).unwrap();
    let conv2_out = TypedBlob::<f32, Conv2Out>::with_dynamic(1).unwrap();
    conv2.forward(&conv1_out, &conv2_out).unwrap();
}
