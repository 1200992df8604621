// A static index out of bounds, reported by `cargo check`.
use blobflow::blob;

fn main() {
    let a = <blob!(f32; 2, 3)>::new().unwrap();
    let _ = a.data_at2::<1, 3>();
}
