use blobflow::blob;

fn main() {
    let a = <blob!(f32; 2, 3, 4)>::new().unwrap();
    let _ = a.data_at2::<0, 0>();
}
