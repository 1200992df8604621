use blobflow::blob;

fn main() {
    let y = <blob!(f32; 10)>::new().unwrap();
    let x = <blob!(f32; 11)>::new().unwrap();
    y.axpy(1.0, &x).unwrap();
}
