// Height and width swapped in a function argument.
use blobflow::blob;

fn show(image: &blob!(f32; 1, 28, 32)) {
    let _ = image;
}

fn main() {
    let x = <blob!(f32; 1, 32, 28)>::new().unwrap();
    show(&x);
}
