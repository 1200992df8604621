use blobflow::blob;

fn main() {
    let mut a = <blob!(f32; 2, 3)>::new().unwrap();
    let b = <blob!(f32; 3, 2)>::new().unwrap();
    a.copy_from(&b, false).unwrap();
}
