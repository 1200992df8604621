type T = blobflow::blob!(f32; 64, 3.5);

fn main() {}
