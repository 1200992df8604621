// Anonymous shapes that differ: 10 and 100.
use blobflow::blob;

fn main() {
    let a = <blob!(f32; 10)>::new().unwrap();
    let _b: blob!(f32; 100) = a;
}
