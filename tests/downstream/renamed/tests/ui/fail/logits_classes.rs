// Logits of 11 classes where the crate has 10.
use bf::blob;

fn main() {
    let wrong = <blob!(f32; _, 11)>::with_dynamic(2).unwrap();
    let _l: downstream_renamed::Logits = wrong;
}
