blobflow::blob!(shape Weights 500, 800);

fn main() {}
