use blobflow::blob;

fn main() {
    let mut a = <blob!(f32; 6)>::new().unwrap();
    let b = <blob!(f32; 5)>::new().unwrap();
    a.share_data(&b).unwrap();
}
