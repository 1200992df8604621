// A user's own layer, fed the wrong shape: the same check as built-in ones.
use blobflow::layers::Layer;
use blobflow::{Blob, BlobError, blob, typed::TypedBlob};

blob!(pub shape Hidden = _, 32);
blob!(pub shape Logits = _, 3);

struct Double;

impl Layer for Double {
    type Elem = f32;
    type Input = Hidden;
    type Output = Hidden;
    const TYPE: &'static str = "Double";
    fn forward_blobs(&mut self, x: &Blob<f32>, y: &Blob<f32>) -> Result<(), BlobError> {
        let xd = x.cpu_data()?;
        for (o, &v) in y.mutable_cpu_data()?.iter_mut().zip(xd.iter()) {
            *o = 2.0 * v;
        }
        Ok(())
    }
    fn backward_blobs(&mut self, _x: &Blob<f32>, _y: &Blob<f32>, _down: bool) -> Result<(), BlobError> {
        Ok(())
    }
}

fn main() {
    let logits = TypedBlob::<f32, Logits>::with_dynamic(1).unwrap();
    let hidden = TypedBlob::<f32, Hidden>::with_dynamic(1).unwrap();
    Double.forward(&logits, &hidden).unwrap();
}
