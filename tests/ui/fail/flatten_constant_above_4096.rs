// A named constant above 4096 has no compile-time arithmetic, so a shape
// holding one cannot be flattened at compile time (a literal can).
use blobflow::blob;

const WIDE: usize = 5000;

fn main() {
    let a = <blob!(f32; _, WIDE, 2)>::with_dynamic(2).unwrap();
    let _ = a.flatten();
}
