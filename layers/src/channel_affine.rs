//! A layer whose forward pass maps each channel `c` of its one bottom to
//! `mul[c]·x + add[c]`: Caffe's `BatchNorm` with global statistics and a
//! `Scale` learned per channel. A net folds such layers, in place on a
//! Convolution's top, into the convolution's own pass, as ONNX Runtime,
//! OpenVINO, MNN and ncnn fold BatchNorm and Scale at load
//! ([`DynLayer::channel_affine`](crate::DynLayer::channel_affine)).

use blob_runtime::{Blob, MathElement};

use crate::layer::Result;

/// `y = mul[c]·x + add[c]` over the channels (axis 1) of a blob.
///
/// ```
/// use blob_layers::ChannelAffine;
/// // Caffe's BatchNorm of mean 1, variance 4 (eps 0), then Scale 3 + 0.5.
/// let norm = ChannelAffine { mul: vec![0.5], add: vec![-0.5] };
/// let scale = ChannelAffine { mul: vec![3.0], add: vec![0.5] };
/// let both = norm.then(&scale).unwrap();
/// assert_eq!(both, ChannelAffine { mul: vec![1.5], add: vec![-1.0] });
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChannelAffine {
    /// Each channel's factor.
    pub mul: Vec<f64>,
    /// Each channel's term, added after the factor.
    pub add: Vec<f64>,
}

impl ChannelAffine {
    /// The map `next` after this one, or `None` where their channel
    /// counts differ.
    pub fn then(&self, next: &ChannelAffine) -> Option<ChannelAffine> {
        if self.mul.len() != next.mul.len() {
            return None;
        }
        Some(ChannelAffine {
            mul: self.mul.iter().zip(&next.mul).map(|(a, b)| a * b).collect(),
            add: self
                .add
                .iter()
                .zip(next.mul.iter().zip(&next.add))
                .map(|(a, (m, b))| m * a + b)
                .collect(),
        })
    }

    /// The channels it maps.
    pub fn channels(&self) -> usize {
        self.mul.len()
    }

    /// Applies the map to `y` in place, on the host, `y`'s axis 1 its
    /// channels.
    pub fn apply<T: MathElement>(&self, y: &Blob<T>) -> Result<()> {
        let s = y.shape();
        let (c, spatial) = match s {
            [_, c, rest @ ..] if *c == self.channels() => (*c, rest.iter().product::<usize>()),
            _ => {
                return Err(crate::dyn_layer::bad_param(
                    "apply a channel affine map",
                    format!(
                        "{} has no axis 1 of {} channels",
                        y.shape_string(),
                        self.channels()
                    ),
                ));
            }
        };
        let mut values = y.mutable_cpu_data()?;
        for (plane, v) in values.chunks_mut(spatial.max(1)).enumerate() {
            let (m, a) = (self.mul[plane % c], self.add[plane % c]);
            for x in v {
                *x = T::from_f64(m * x.to_f64() + a);
            }
        }
        Ok(())
    }
}
