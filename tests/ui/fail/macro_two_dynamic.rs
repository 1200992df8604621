type Two = blobflow::blob!(f32; _, 3, _);

fn main() {}
