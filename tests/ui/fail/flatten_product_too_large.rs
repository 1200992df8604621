// A flattened dim above 4096 is beyond compile-time arithmetic.
use blobflow::blob;

fn main() {
    let a = <blob!(f32; _, 20, 24, 24)>::with_dynamic(2).unwrap();
    let _ = a.flatten();
}
