use blobflow::blob;

fn main() {
    let a = <blob!(f32; _, 3)>::with_dynamic(4).unwrap();
    let _b: blob!(f32; 12) = a.reshape();
}
