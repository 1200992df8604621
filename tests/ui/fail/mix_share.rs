use blobflow::blob;

fn main() {
    let mut a = <blob!(f32; 4)>::new().unwrap();
    let b = <blob!(i32; 4)>::new().unwrap();
    a.share_data(&b).unwrap();
}
