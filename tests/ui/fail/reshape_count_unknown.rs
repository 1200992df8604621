// A named constant above 4096 leaves an anonymous shape's count unknown at
// compile time (the literal 5000 would not).
use blobflow::blob;

const WIDE: usize = 5000;

fn main() {
    let a = <blob!(f32; 2, WIDE)>::new().unwrap();
    let _b: blob!(f32; 10000) = a.reshape();
}
