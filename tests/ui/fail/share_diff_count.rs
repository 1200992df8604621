use blobflow::blob;

fn main() {
    let mut a = <blob!(f64; 2, 2)>::new().unwrap();
    let b = <blob!(f64; 2, 3)>::new().unwrap();
    a.share_diff(&b).unwrap();
}
