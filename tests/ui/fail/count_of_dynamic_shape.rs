// COUNT is offered only for a shape whose every dim is static.
use blobflow::blob;

fn main() {
    let _n = <blob!(f32; _, 3, 32, 32)>::COUNT;
}
