//! Caffe's Convolution as a run-time layer: its `convolution_param` read
//! when the net is built, its weights shaped by the first input.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::ConvGeometry;
use super::engine::{ConvEngine, CudnnChoice};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

const OP: &str = "set up Convolution";

/// A `convolution_param` as Convolution and Deconvolution read it (two
/// spatial axes; per axis: height, width).
pub(crate) struct ConvParam {
    pub num_output: usize,
    pub group: usize,
    pub bias_term: bool,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub pad: [usize; 2],
    pub dilation: [usize; 2],
    pub weight_filler: ParamMessage,
    pub bias_filler: ParamMessage,
    pub choice: CudnnChoice,
}

/// Caffe `Convolution` over two spatial axes: bottom `i` to top `i`, all
/// with the same weights `(num_output, C / group, kh, kw)` and, with
/// `bias_term`, bias `(num_output)`.
pub(crate) struct ConvolutionLayer<T: MathElement> {
    p: ConvParam,
    /// The zeros a convolution without bias adds, on the input's device.
    zero_bias: Blob<T>,
    blobs: Vec<Blob<T>>,
    engine: ConvEngine<T>,
}

/// The value for each spatial axis (height, width), from the repeated
/// field `name` (none, once, or once per axis) or, where `prefix` is
/// given, its `_h`/`_w` pair (Caffe's rules for kernel, stride and pad).
fn per_axis(
    param: &ParamMessage,
    name: &str,
    prefix: Option<&str>,
    default: u64,
) -> Result<[usize; 2]> {
    let list = param.uints(name);
    let (h, w) = prefix.map_or((String::new(), String::new()), |p| {
        (format!("{p}_h"), format!("{p}_w"))
    });
    let pair = prefix.map_or((false, false), |_| (param.has(&h), param.has(&w)));
    let (vh, vw) = match (list.as_slice(), pair) {
        ([], (false, false)) => (default, default),
        ([v], (false, false)) => (*v, *v),
        ([a, b], (false, false)) => (*a, *b),
        // One of the pair alone leaves the other at 0, as in Caffe: fine
        // for a pad, refused below for a kernel or stride.
        ([], _) => (param.uint(&h), param.uint(&w)),
        (_, (false, false)) => {
            return Err(bad_param(
                OP,
                format!(
                    "{name} must be specified once, or once per spatial dimension ({} given for 2; N-D convolutions are not supported)",
                    list.len()
                ),
            ));
        }
        _ => {
            return Err(bad_param(
                OP,
                format!("{name} is {name} OR {h} and {w}; not both"),
            ));
        }
    };
    let size =
        |v: u64| usize::try_from(v).map_err(|_| bad_param(OP, format!("{name} {v} is too large")));
    Ok([size(vh)?, size(vw)?])
}

impl ConvParam {
    /// Reads the layer's `convolution_param`; `op` names the layer type
    /// in errors.
    pub(crate) fn from_layer(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "convolution_param");
        let num_output = p.uint("num_output") as usize;
        if num_output == 0 {
            return Err(bad_param(OP, "num_output must be set and positive"));
        }
        let kernel = per_axis(&p, "kernel_size", Some("kernel"), 0)?;
        let stride = per_axis(&p, "stride", Some("stride"), 1)?;
        let pad = per_axis(&p, "pad", Some("pad"), 0)?;
        let dilation = per_axis(&p, "dilation", None, 1)?;
        if kernel.contains(&0) || stride.contains(&0) || dilation.contains(&0) {
            return Err(bad_param(
                OP,
                format!(
                    "kernel ({} x {}), stride ({} x {}) and dilation ({} x {}) must be positive",
                    kernel[0], kernel[1], stride[0], stride[1], dilation[0], dilation[1]
                ),
            ));
        }
        let group = p.uint("group") as usize;
        if group == 0 || !num_output.is_multiple_of(group) {
            return Err(bad_param(
                OP,
                format!("num_output {num_output} is not a multiple of group {group}"),
            ));
        }
        if p.int("axis") != 1 {
            return Err(bad_param(
                OP,
                format!("axis {} is not supported yet (only 1)", p.int("axis")),
            ));
        }
        #[cfg_attr(not(feature = "cudnn"), allow(unused_variables))]
        let use_cudnn = p.enum_name("engine") != "CAFFE";
        Ok(Self {
            num_output,
            group,
            bias_term: p.boolean("bias_term"),
            kernel,
            stride,
            pad,
            dilation,
            weight_filler: sub_param(&p, "weight_filler"),
            bias_filler: sub_param(&p, "bias_filler"),
            choice: CudnnChoice {
                #[cfg(feature = "cudnn")]
                use_cudnn,
                #[cfg(feature = "cudnn")]
                allow_tf32: false,
            },
        })
    }

    /// The convolution of `batch` images of `cin` channels and `size`
    /// (height, width) by these settings.
    pub(crate) fn geometry(&self, batch: usize, cin: usize, size: [usize; 2]) -> ConvGeometry {
        let out = |a: usize| {
            ConvGeometry::output_size(
                size[a],
                self.kernel[a],
                self.stride[a],
                self.pad[a],
                self.dilation[a],
            )
        };
        ConvGeometry {
            batch,
            channels_in: cin,
            channels_out: self.num_output,
            h: size[0],
            w: size[1],
            oh: out(0),
            ow: out(1),
            kernel: self.kernel,
            stride: self.stride,
            pad: self.pad,
            dilation: self.dilation,
        }
    }

    /// The kernel's extent along axis `a`: `dilation (kernel - 1) + 1`.
    pub(crate) fn extent(&self, a: usize) -> usize {
        self.dilation[a] * (self.kernel[a] - 1) + 1
    }

    /// The weights (and, with `bias_term`, the bias of `bias_len`) of
    /// `weight_shape`, drawn from the fillers.
    pub(crate) fn fresh_blobs<T: MathElement>(
        &self,
        weight_shape: &[usize],
        bias_len: usize,
    ) -> Result<Vec<Blob<T>>> {
        let weight = Blob::new(weight_shape)?;
        crate::filler::fill(&weight, &self.weight_filler)?;
        let mut blobs = vec![weight];
        if self.bias_term {
            let bias = Blob::new(&[bias_len])?;
            crate::filler::fill(&bias, &self.bias_filler)?;
            blobs.push(bias);
        }
        Ok(blobs)
    }
}

impl<T: MathElement> ConvolutionLayer<T> {
    /// Reads the layer's `convolution_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        Ok(Self {
            p: ConvParam::from_layer(layer)?,
            zero_bias: Blob::default(),
            blobs: Vec::new(),
            engine: ConvEngine::default(),
        })
    }

    fn geometry(&self, x: &Blob<T>) -> Result<ConvGeometry> {
        let s = x.shape();
        let p = &self.p;
        let reach = |a: usize| p.extent(a).saturating_sub(2 * p.pad[a]);
        if s.len() != 4 || s[2] < reach(0) || s[3] < reach(1) {
            return Err(bad_param(
                "convolve",
                format!(
                    "the input is {}, not (N, C, H, W) with H at least {} and W at least {}",
                    x.shape_string(),
                    reach(0),
                    reach(1)
                ),
            ));
        }
        let cin = self.blobs.first().map_or(s[1], |w| w.shape()[1] * p.group);
        if !s[1].is_multiple_of(p.group) {
            return Err(bad_param(
                "convolve",
                format!(
                    "the input's {} channels are not a multiple of group {}",
                    s[1], p.group
                ),
            ));
        }
        if s[1] != cin {
            return Err(bad_param(
                "convolve",
                format!(
                    "Input size incompatible with convolution kernel: the input {} has {} channels, the weights {}",
                    x.shape_string(),
                    s[1],
                    cin
                ),
            ));
        }
        Ok(p.geometry(s[0], cin, [s[2], s[3]]))
    }
}

impl<T: MathElement> ConvolutionLayer<T> {
    /// Without `bias_term`, zeros of `num_output` on `x`'s device (its
    /// gradient, accumulated by the passes, is never read).
    fn place_zero_bias(&mut self, x: &Blob<T>) -> Result<()> {
        if self.p.bias_term {
            return Ok(());
        }
        let fresh = self.zero_bias.count() != self.p.num_output;
        crate::softmax::place_with(&mut self.zero_bias, x, &[self.p.num_output])?;
        if fresh {
            self.zero_bias.mutable_cpu_data()?.fill(T::ZERO);
        }
        Ok(())
    }
}

impl<T: MathElement> DynLayer<T> for ConvolutionLayer<T> {
    fn type_name(&self) -> &str {
        "Convolution"
    }

    fn bottoms(&self) -> Arity {
        Arity::at_least(1)
    }

    fn tops(&self) -> Arity {
        Arity::at_least(1)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if bottoms.iter().any(|b| b.shape() != bottoms[0].shape()) {
            return Err(bad_param("convolve", "all inputs must have the same shape"));
        }
        let g = self.geometry(bottoms[0])?;
        if self.blobs.is_empty() {
            let [kh, kw] = self.p.kernel;
            let shape = [self.p.num_output, g.channels_in / self.p.group, kh, kw];
            self.blobs = self.p.fresh_blobs(&shape, self.p.num_output)?;
        }
        Ok(bottoms
            .iter()
            .map(|_| TopShape::new(vec![g.batch, g.channels_out, g.oh, g.ow]))
            .collect())
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        self.place_zero_bias(bottoms[0])?;
        for (x, y) in bottoms.iter().zip(tops) {
            let g = self.geometry(x)?;
            let w = &self.blobs[0];
            let b = if self.p.bias_term {
                &self.blobs[1]
            } else {
                &self.zero_bias
            };
            self.engine
                .forward_grouped(&g, self.p.group, self.p.choice, x, w, b, y)?;
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        self.place_zero_bias(bottoms[0])?;
        for ((x, y), &down) in bottoms.iter().zip(tops).zip(propagate_down) {
            let g = self.geometry(x)?;
            let w = &self.blobs[0];
            let b = if self.p.bias_term {
                &self.blobs[1]
            } else {
                &self.zero_bias
            };
            self.engine
                .backward_grouped(&g, self.p.group, self.p.choice, x, w, b, y, down)?;
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
