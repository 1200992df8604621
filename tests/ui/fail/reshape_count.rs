use blobflow::blob;

fn main() {
    let a = <blob!(f32; 64, 3, 32, 32)>::new().unwrap();
    let _b: blob!(f32; 64, 3071) = a.reshape();
}
