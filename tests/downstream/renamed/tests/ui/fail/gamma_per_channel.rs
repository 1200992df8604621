// 16 scales for a 32-channel blob.
use bf::blob;

fn main() {
    let x = <blob!(f32; _, 32, 8, 8)>::with_dynamic(2).unwrap();
    let gamma = <blob!(f32; 16)>::new().unwrap();
    downstream_renamed::scale_channels(&x, &gamma).unwrap();
}
