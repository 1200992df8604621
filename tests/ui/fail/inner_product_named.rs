use blobflow::{blob, typed::TypedBlob};

blob!(shape Ip1In = 64, 800);
blob!(shape Ip2Weights = 10, 500);

fn main() {
    let x = TypedBlob::<f32, Ip1In>::new().unwrap();
    let w = TypedBlob::<f32, Ip2Weights>::new().unwrap();
    let _y = x.inner_product(&w).unwrap();
}
