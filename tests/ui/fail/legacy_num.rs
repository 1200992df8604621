use blobflow::blob;

fn main() {
    let a = <blob!(f32; 1, 2, 3, 4, 5)>::new().unwrap();
    let _ = a.num();
}
