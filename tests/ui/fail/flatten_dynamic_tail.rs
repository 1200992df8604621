use blobflow::blob;

fn main() {
    let a = <blob!(f32; 2, _)>::with_dynamic(3).unwrap();
    let _ = a.flatten();
}
