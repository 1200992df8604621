type T = blobflow::blob!(f32; 64u8, 3);

fn main() {}
