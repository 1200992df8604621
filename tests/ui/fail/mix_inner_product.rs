use blobflow::blob;

fn main() {
    let x = <blob!(f32; 8, 800)>::new().unwrap();
    let w = <blob!(f64; 500, 800)>::new().unwrap();
    let _y = x.inner_product(&w).unwrap();
}
