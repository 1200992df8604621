// Right shapes through the renamed crate: builds and runs.
use bf::blob;

fn main() {
    let x = <blob!(f32; 2, 3, 4, 4)>::new().unwrap();
    let gamma = <blob!(f32; 3)>::new().unwrap();
    downstream_renamed::scale_channels(&x, &gamma).unwrap();
    let _l: downstream_renamed::Logits = downstream_renamed::logits(2).unwrap();
}
