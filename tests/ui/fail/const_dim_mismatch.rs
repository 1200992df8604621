// A named constant as a dim, and a blob of another size.
use blobflow::blob;

const CLASSES: usize = 10;
type Logits = blob!(f32; _, CLASSES);

fn main() {
    let wrong = <blob!(f32; _, 11)>::with_dynamic(2).unwrap();
    let _l: Logits = wrong;
}
