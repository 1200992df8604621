use blobflow::blob;

fn main() {
    let _a = <blob!(f32; _, 1, 28, 28)>::new().unwrap();
}
