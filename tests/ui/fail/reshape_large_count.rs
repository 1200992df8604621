// A reshape past 4096 with the wrong count: AlexNet's pool5 (256 x 6 x 6 =
// 9216) into 9000.
use blobflow::blob;

fn main() {
    let a = <blob!(f32; 2, 256, 6, 6)>::new().unwrap();
    let _b: blob!(f32; 2, 9000) = a.reshape();
}
