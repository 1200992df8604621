//! Caffe's Deconvolution: the transpose of a convolution (its forward is
//! a convolution's input gradient), with the same `convolution_param`.
//! Upsampling in FCN and segmentation nets. On the host whatever the
//! device: the blobs' heads move the bytes.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::conv::{ConvEngine, ConvGeometry, ConvParam};
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

    /// The convolution this layer transposes: its input is the top, its
    /// output the bottom `x`.
    fn geometry(&self, x: &Blob<T>) -> Result<ConvGeometry> {
        let s = x.shape();
        let p = &self.p;
        if s.len() != 4 || s[2] == 0 || s[3] == 0 {
            return Err(bad_param(
                "deconvolve",
                format!(
                    "the input is {}, not (N, C, H, W) with H and W at least 1",
                    x.shape_string()
                ),
            ));
        }
        let channels = self.blobs.first().map_or(s[1], |w| w.shape()[0]);
        if s[1] != channels || !s[1].is_multiple_of(p.group) {
            return Err(bad_param(
                "deconvolve",
                format!(
                    "Input size incompatible with convolution kernel: the input {} has {} channels, the weights {channels} (group {})",
                    x.shape_string(),
                    s[1],
                    p.group
                ),
            ));
        }
        let out = |a: usize| (p.stride[a] * (s[2 + a] - 1) + p.extent(a)).checked_sub(2 * p.pad[a]);
        let (Some(oh), Some(ow)) = (out(0), out(1)) else {
            return Err(bad_param(
                "deconvolve",
                format!(
                    "padding {:?} is larger than the output of {}",
                    p.pad,
                    x.shape_string()
                ),
            ));
        };
        // The transposed convolution: num_output channels of the output
        // size in, the input's channels and size out.
        let mut g = p.geometry(s[0], p.num_output, [oh, ow]);
        g.channels_out = s[1];
        if (g.oh, g.ow) != (s[2], s[3]) {
            return Err(bad_param(
                "deconvolve",
                format!(
                    "an output of {oh} x {ow} does not convolve back to the input's {} x {}",
                    s[2], s[3]
                ),
            ));
        }
        Ok(g)
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
        let g = self.geometry(bottoms[0])?;
        if self.blobs.is_empty() {
            let [kh, kw] = self.p.kernel;
            let shape = [g.channels_out, self.p.num_output / self.p.group, kh, kw];
            self.blobs = self.p.fresh_blobs(&shape, self.p.num_output)?;
        }
        Ok(bottoms
            .iter()
            .map(|_| TopShape::new(vec![g.batch, self.p.num_output, g.h, g.w]))
            .collect())
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        for (x, y) in bottoms.iter().zip(tops) {
            let g = self.geometry(x)?;
            let bias = self.blobs.get(1);
            self.engine
                .deconv_forward(&g, self.p.group, x, &self.blobs[0], bias, y)?;
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
            let g = self.geometry(x)?;
            let bias = self.blobs.get(1);
            self.engine
                .deconv_backward(&g, self.p.group, x, &self.blobs[0], bias, y, down)?;
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
