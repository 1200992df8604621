//! The user's own layer of the `typed_net` example: a leaky rectifier
//! whose negative slope is learned, one per channel (what Caffe's PReLU
//! computes, written here from scratch as a user would): registered by
//! type name for the run-time net, declared for typed nets, and held to
//! central differences with the gradient checker.

use blobflow::layers::typed_net::{LayerFields, LayerSpec, One};
use blobflow::layers::{DynLayer, TopShape};
use blobflow::typed::Shape;
use blobflow::{Blob, BlobError};

/// The Caffe type name it is registered and written under.
pub const TYPE: &str = "ChannelSlope";

/// `y = x` where `x > 0`, `y = a[c] x` elsewhere, `a` learned per channel
/// (axis 1), starting at 0.25.
pub struct ChannelSlope {
    slopes: Vec<Blob<f32>>,
}

impl ChannelSlope {
    /// The layer; its slopes are made at the first reshape, once the
    /// channels are known.
    pub fn new() -> Self {
        Self { slopes: Vec::new() }
    }
}

/// `(outer, channels, inner)` of an `(N, C, ...)` blob.
fn geometry(x: &Blob<f32>) -> (usize, usize, usize) {
    let shape = x.shape();
    let channels = shape.get(1).copied().unwrap_or(1);
    let inner: usize = shape.iter().skip(2).product();
    (shape.first().copied().unwrap_or(1), channels, inner)
}

impl DynLayer<f32> for ChannelSlope {
    fn type_name(&self) -> &str {
        TYPE
    }

    fn reshape(
        &mut self,
        bottoms: &[&Blob<f32>],
        _tops: &[&Blob<f32>],
    ) -> blobflow::runtime::Result<Vec<TopShape>> {
        let x = bottoms[0];
        if x.num_axes() < 2 {
            return Err(BlobError::InvalidParameter {
                op: "ChannelSlope",
                detail: format!("needs a channel axis, the input is {:?}", x.shape()),
            });
        }
        let (_, channels, _) = geometry(x);
        match self.slopes.first() {
            None => {
                let slopes = Blob::new(&[channels])?;
                slopes.mutable_cpu_data()?.fill(0.25);
                self.slopes.push(slopes);
            }
            Some(s) if s.count() != channels => {
                return Err(BlobError::InvalidParameter {
                    op: "ChannelSlope",
                    detail: format!(
                        "{} slopes, but the input has {channels} channels",
                        s.count()
                    ),
                });
            }
            Some(_) => {}
        }
        Ok(vec![TopShape::new(x.shape().to_vec())])
    }

    fn forward(
        &mut self,
        bottoms: &[&Blob<f32>],
        tops: &[&Blob<f32>],
    ) -> blobflow::runtime::Result<()> {
        let (_, channels, inner) = geometry(bottoms[0]);
        let x = bottoms[0].to_vec()?;
        let a = self.slopes[0].to_vec()?;
        let mut y = tops[0].mutable_cpu_data()?;
        for (i, (y, &x)) in y.iter_mut().zip(&x).enumerate() {
            let c = (i / inner) % channels;
            *y = if x > 0.0 { x } else { a[c] * x };
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<f32>],
        propagate_down: &[bool],
        bottoms: &[&Blob<f32>],
    ) -> blobflow::runtime::Result<()> {
        let (_, channels, inner) = geometry(bottoms[0]);
        let x = bottoms[0].to_vec()?;
        let dy = tops[0].diff_to_vec()?;
        let a = self.slopes[0].to_vec()?;
        {
            // Parameter gradients accumulate, as in Caffe.
            let mut da = self.slopes[0].mutable_cpu_diff()?;
            for (i, (&x, &g)) in x.iter().zip(&dy).enumerate() {
                if x <= 0.0 {
                    da[(i / inner) % channels] += g * x;
                }
            }
        }
        if propagate_down[0] {
            let mut dx = bottoms[0].mutable_cpu_diff()?;
            for (i, (d, (&x, &g))) in dx.iter_mut().zip(x.iter().zip(&dy)).enumerate() {
                *d = if x > 0.0 {
                    g
                } else {
                    a[(i / inner) % channels] * g
                };
            }
        }
        Ok(())
    }

    fn blobs(&self) -> &[Blob<f32>] {
        &self.slopes
    }

    fn blobs_mut(&mut self) -> &mut [Blob<f32>] {
        &mut self.slopes
    }
}

/// The layer in a typed net: the shape is kept.
pub struct Slope;

impl LayerFields for Slope {
    fn type_name(&self) -> &str {
        TYPE
    }
    fn write_fields(&self, _text: &mut String) {}
}

impl<X: Shape> LayerSpec<One<X>> for Slope {
    type Out = X;
}
