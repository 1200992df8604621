blobflow::blob!(shape Image = n: _, c: 3, h: 224, c: 224);

fn main() {}
