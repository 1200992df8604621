// A batch read at run time written into a blob's type.
use blobflow::blob;

fn main() {
    let batch = std::env::args().count();
    let _x = <blob!(f32; batch, 3, 32, 32)>::with_dynamic(batch);
}
