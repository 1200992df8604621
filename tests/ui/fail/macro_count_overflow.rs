type Huge = blobflow::blob!(f32; 4294967296, 4294967296, 2);

fn main() {}
