type T = blobflow::blob!(f32; 64, -3);

fn main() {}
