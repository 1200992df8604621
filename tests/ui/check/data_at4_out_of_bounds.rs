use blobflow::blob;

fn main() {
    let a = <blob!(f32; 1, 2, 3, 3)>::new().unwrap();
    let _ = a.data_at4::<0, 2, 0, 0>();
}
