//! Caffe's Deconvolution: the transpose of a convolution (its forward is
//! a convolution's input gradient), with the same `convolution_param`.
//! Upsampling in FCN and segmentation nets. On the GPU where the blobs
//! live there (one or two spatial axes), the convolution's kernels run
//! the other way.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::conv::{ConvEngine, ConvParam, Plan, VolumeGeometry, planar_size};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

/// Caffe `Deconvolution` over two spatial axes: bottom `i` to top `i`,
/// weights `(C, num_output / group, kh, kw)` and, with `bias_term`, bias
/// `(num_output)`. Output size per axis: `stride (in - 1) + extent - 2
/// pad`.
pub(crate) struct DeconvolutionLayer<T: MathElement> {
    p: ConvParam,
    blobs: Vec<Blob<T>>,
    engine: ConvEngine<T>,
}

impl<T: MathElement> DeconvolutionLayer<T> {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        Ok(Self {
            p: ConvParam::from_layer(layer)?,
            blobs: Vec::new(),
            engine: ConvEngine::default(),
        })
    }

    /// The convolution this layer transposes (its input is the top, its
    /// output the bottom `x`), the top's shape and the weights'.
    fn geometry(&self, x: &Blob<T>) -> Result<(Plan, Vec<usize>, Vec<usize>)> {
        let s = x.shape();
        let p = &self.p;
        let axis = p.channel_axis(x)?;
        let (cin, spatial) = (s[axis], &s[axis + 1..]);
        if spatial.contains(&0) {
            return Err(bad_param(
                "deconvolve",
                format!(
                    "the input is {}: every spatial axis after the channels (axis {axis}) must be at least 1",
                    x.shape_string()
                ),
            ));
        }
        let window = p.window(spatial.len())?;
        let channels = self.blobs.first().map_or(cin, |w| w.shape()[0]);
        if cin != channels || !cin.is_multiple_of(p.group) {
            return Err(bad_param(
                "deconvolve",
                format!(
                    "Input size incompatible with convolution kernel: the input {} has {cin} channels, the weights {channels} (group {})",
                    x.shape_string(),
                    p.group
                ),
            ));
        }
        let mut out = Vec::with_capacity(spatial.len());
        for (a, &size) in spatial.iter().enumerate() {
            let full = window.stride[a]
                .checked_mul(size - 1)
                .and_then(|v| v.checked_add(window.extent(a).ok()?));
            let size_out = full.and_then(|v| v.checked_sub(window.both_pads(a).ok()?));
            let Some(size_out) = size_out.filter(|&v| v > 0) else {
                return Err(bad_param(
                    "deconvolve",
                    format!(
                        "padding {} leaves no output of {} along axis {}",
                        window.pad[a],
                        x.shape_string(),
                        axis + 1 + a
                    ),
                ));
            };
            out.push(size_out);
        }
        let weights = [&[cin, p.num_output / p.group], &window.kernel[..]].concat();
        let batch = s[..axis].iter().product();
        // The transposed convolution: num_output channels of the output
        // size in, the input's channels and size out.
        let plan = if out.len() <= 2 {
            let mut g = p.geometry(batch, p.num_output, planar_size(&out), &window);
            g.channels_out = cin;
            Plan::Planar(g)
        } else {
            Plan::Volume(VolumeGeometry {
                batch,
                groups: p.group,
                channels_in: p.num_output,
                channels_out: cin,
                input: out.clone(),
                output: spatial.to_vec(),
                window,
            })
        };
        let top = [&s[..axis], &[p.num_output], &out[..]].concat();
        Ok((plan, top, weights))
    }
}

impl<T: MathElement> DynLayer<T> for DeconvolutionLayer<T> {
    fn type_name(&self) -> &str {
        "Deconvolution"
    }

    fn bottoms(&self) -> Arity {
        Arity::at_least(1)
    }

    fn tops(&self) -> Arity {
        Arity::at_least(1)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if bottoms.iter().any(|b| b.shape() != bottoms[0].shape()) {
            return Err(bad_param(
                "deconvolve",
                "all inputs must have the same shape",
            ));
        }
        let (_, top, weights) = self.geometry(bottoms[0])?;
        if self.blobs.is_empty() {
            self.blobs = self.p.fresh_blobs(&weights, self.p.num_output)?;
        }
        Ok(bottoms.iter().map(|_| TopShape::new(top.clone())).collect())
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        for (x, y) in bottoms.iter().zip(tops) {
            let (plan, ..) = self.geometry(x)?;
            let (w, bias) = (&self.blobs[0], self.blobs.get(1));
            match plan {
                Plan::Planar(g) => self
                    .engine
                    .deconv_forward(&g, self.p.group, x, w, bias, y)?,
                Plan::Volume(g) => self.engine.deconv_forward_volume(&g, x, w, bias, y)?,
            }
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        for ((x, y), &down) in bottoms.iter().zip(tops).zip(propagate_down) {
            let (plan, ..) = self.geometry(x)?;
            let (w, bias) = (&self.blobs[0], self.blobs.get(1));
            match plan {
                Plan::Planar(g) => {
                    self.engine
                        .deconv_backward(&g, self.p.group, x, w, bias, y, down)?
                }
                Plan::Volume(g) => self
                    .engine
                    .deconv_backward_volume(&g, x, w, bias, y, down)?,
            }
        }
        Ok(())
    }

    fn blobs(&self) -> &[Blob<T>] {
        &self.blobs
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut self.blobs
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
