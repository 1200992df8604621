// An anonymous shape with a dim above 4096 has no compile-time count.
use blobflow::blob;

fn main() {
    let a = <blob!(f32; 2, 5000)>::new().unwrap();
    let _b: blob!(f32; 10000) = a.reshape();
}
