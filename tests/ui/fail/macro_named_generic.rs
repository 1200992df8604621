blobflow::blob!(shape Weights = N, 800);

fn main() {}
