use blobflow::blob;

const OFF: usize = <blob!(f32; 2, 3)>::static_offset(&[2, 0]);

fn main() {
    println!("{OFF}");
}
