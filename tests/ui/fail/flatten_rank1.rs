use blobflow::blob;

fn main() {
    let a = <blob!(f32; 6)>::new().unwrap();
    let _ = a.flatten();
}
