//! The user's layer: `y[n, c] = x[n, c] * g[c]`, `g` learned, starting
//! at 1.

use blobflow::BlobError;
use blobflow::layers::typed_layer::TypedLayer;
use blobflow::proto::ParamMessage;
use blobflow::typed::{D, Dyn, TypedBlob};

type Rows<const C: usize> = (Dyn, D<C>);

pub struct Gain<const C: usize>;

impl<const C: usize> TypedLayer<f32> for Gain<C> {
    const TYPE: &'static str = "Gain";
    type Bottoms = (Rows<C>,);
    type Tops = (Rows<C>,);
    type Params = ((D<C>,),);

    fn from_param(_: &ParamMessage) -> Result<Self, BlobError> {
        Ok(Gain)
    }

    fn init_params(&mut self, (g,): (&TypedBlob<f32, (D<C>,)>,)) -> Result<(), BlobError> {
        g.mutable_cpu_data()?.fill(1.0);
        Ok(())
    }

    fn forward(
        &mut self,
        (x,): (&TypedBlob<f32, Rows<C>>,),
        (y,): (&TypedBlob<f32, Rows<C>>,),
        (g,): (&TypedBlob<f32, (D<C>,)>,),
    ) -> Result<(), BlobError> {
        let (xd, gd) = (x.cpu_data()?, g.cpu_data()?);
        let mut yd = y.mutable_cpu_data()?;
        for n in 0..x.shape()[0] {
            for (c, &gain) in gd.iter().enumerate() {
                let at = x.offset([n, c]);
                yd[at] = xd[at] * gain;
            }
        }
        Ok(())
    }

    fn backward(
        &mut self,
        (y,): (&TypedBlob<f32, Rows<C>>,),
        down: &[bool],
        (x,): (&TypedBlob<f32, Rows<C>>,),
        (g,): (&TypedBlob<f32, (D<C>,)>,),
    ) -> Result<(), BlobError> {
        let (xd, dy, gd) = (x.to_vec()?, y.diff_to_vec()?, g.to_vec()?);
        let mut dg = g.mutable_cpu_diff()?;
        for (i, (&d, &v)) in dy.iter().zip(&xd).enumerate() {
            dg[i % C] += d * v;
        }
        if down[0] {
            let mut dx = x.mutable_cpu_diff()?;
            for (i, &d) in dy.iter().enumerate() {
                dx[i] = d * gd[i % C];
            }
        }
        Ok(())
    }
}
