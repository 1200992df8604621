use blobflow::blob;

fn main() {
    let y = <blob!(f64; 4)>::new().unwrap();
    let x = <blob!(f32; 4)>::new().unwrap();
    y.axpy(1.0, &x).unwrap();
}
