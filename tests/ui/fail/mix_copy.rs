use blobflow::blob;

fn main() {
    let mut a = <blob!(f32; 2)>::new().unwrap();
    let b = <blob!(f64; 2)>::new().unwrap();
    a.copy_from(&b, false).unwrap();
}
