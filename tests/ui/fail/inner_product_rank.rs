use blobflow::blob;

fn main() {
    let x = <blob!(f32; 8, 50, 4, 4)>::new().unwrap();
    let w = <blob!(f32; 500, 800)>::new().unwrap();
    // The input must be flattened first.
    let _y = x.inner_product(&w).unwrap();
}
