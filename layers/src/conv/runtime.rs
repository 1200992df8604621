//! Caffe's Convolution as a run-time layer: its `convolution_param` read
//! when the net is built, its weights shaped by the first input.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::ConvGeometry;
use super::engine::{ConvEngine, CudnnChoice};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

const OP: &str = "set up Convolution";

/// Caffe `Convolution` (square kernel): bottom `i` to top `i`, all with
/// the same weights `(num_output, C / group, k, k)` and, with
/// `bias_term`, bias `(num_output)`.
pub(crate) struct ConvolutionLayer<T: MathElement> {
    num_output: usize,
    group: usize,
    bias_term: bool,
    /// The zeros a convolution without bias adds, on the input's device.
    zero_bias: Blob<T>,
    kernel: usize,
    stride: usize,
    pad: usize,
    weight_filler: ParamMessage,
    bias_filler: ParamMessage,
    blobs: Vec<Blob<T>>,
    engine: ConvEngine<T>,
    choice: CudnnChoice,
}

/// One value for both spatial axes, from the repeated field `name` or
/// its `_h`/`_w` pair (Caffe's rules for kernel, stride and pad).
fn square(param: &ParamMessage, name: &str, prefix: &str, default: u64) -> Result<usize> {
    let list = param.uints(name);
    let (h, w) = (format!("{prefix}_h"), format!("{prefix}_w"));
    let pair = (param.has(&h), param.has(&w));
    let (vh, vw) = match (list.as_slice(), pair) {
        ([], (false, false)) => (default, default),
        ([v], (false, false)) => (*v, *v),
        ([a, b], (false, false)) => (*a, *b),
        ([], (true, true)) => (param.uint(&h), param.uint(&w)),
        ([], _) => {
            return Err(bad_param(OP, format!("both {h} and {w} are required")));
        }
        (_, (false, false)) => {
            return Err(bad_param(
                OP,
                format!(
                    "{name} must be specified once, or once per spatial dimension ({} given)",
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
    if vh != vw {
        return Err(bad_param(
            OP,
            format!("a rectangular {name} ({vh} x {vw}) is not supported yet"),
        ));
    }
    usize::try_from(vh).map_err(|_| bad_param(OP, format!("{name} {vh} is too large")))
}

impl<T: MathElement> ConvolutionLayer<T> {
    /// Reads the layer's `convolution_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "convolution_param");
        let num_output = p.uint("num_output") as usize;
        if num_output == 0 {
            return Err(bad_param(OP, "num_output must be set and positive"));
        }
        let kernel = square(&p, "kernel_size", "kernel", 0)?;
        let stride = square(&p, "stride", "stride", 1)?;
        let pad = square(&p, "pad", "pad", 0)?;
        if kernel == 0 || stride == 0 {
            return Err(bad_param(
                OP,
                format!("kernel_size ({kernel}) and stride ({stride}) must be positive"),
            ));
        }
        if p.uints("dilation").iter().any(|&d| d != 1) {
            return Err(bad_param(OP, "dilation other than 1 is not supported yet"));
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
            zero_bias: Blob::default(),
            kernel,
            stride,
            pad,
            weight_filler: sub_param(&p, "weight_filler"),
            bias_filler: sub_param(&p, "bias_filler"),
            blobs: Vec::new(),
            engine: ConvEngine::default(),
            choice: CudnnChoice {
                #[cfg(feature = "cudnn")]
                use_cudnn,
                #[cfg(feature = "cudnn")]
                allow_tf32: false,
            },
        })
    }

    fn geometry(&self, x: &Blob<T>) -> Result<ConvGeometry> {
        let s = x.shape();
        let reach = self.kernel.saturating_sub(2 * self.pad);
        if s.len() != 4 || s[2] < reach || s[3] < reach {
            return Err(bad_param(
                "convolve",
                format!(
                    "the input is {}, not (N, C, H, W) with H and W at least {reach}",
                    x.shape_string()
                ),
            ));
        }
        let cin = self
            .blobs
            .first()
            .map_or(s[1], |w| w.shape()[1] * self.group);
        if !s[1].is_multiple_of(self.group) {
            return Err(bad_param(
                "convolve",
                format!(
                    "the input's {} channels are not a multiple of group {}",
                    s[1], self.group
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
        Ok(ConvGeometry {
            batch: s[0],
            channels_in: cin,
            channels_out: self.num_output,
            h: s[2],
            w: s[3],
            oh: ConvGeometry::output_size(s[2], self.kernel, self.stride, self.pad),
            ow: ConvGeometry::output_size(s[3], self.kernel, self.stride, self.pad),
            kernel: self.kernel,
            stride: self.stride,
            pad: self.pad,
        })
    }
}

impl<T: MathElement> ConvolutionLayer<T> {
    /// Without `bias_term`, zeros of `num_output` on `x`'s device (its
    /// gradient, accumulated by the passes, is never read).
    fn place_zero_bias(&mut self, x: &Blob<T>) -> Result<()> {
        if self.bias_term {
            return Ok(());
        }
        let fresh = self.zero_bias.count() != self.num_output;
        crate::softmax::place_with(&mut self.zero_bias, x, &[self.num_output])?;
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
            let k = self.kernel;
            let weight = Blob::new(&[self.num_output, g.channels_in / self.group, k, k])?;
            crate::filler::fill(&weight, &self.weight_filler)?;
            self.blobs = vec![weight];
            if self.bias_term {
                let bias = Blob::new(&[self.num_output])?;
                crate::filler::fill(&bias, &self.bias_filler)?;
                self.blobs.push(bias);
            }
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
            let b = if self.bias_term {
                &self.blobs[1]
            } else {
                &self.zero_bias
            };
            self.engine
                .forward_grouped(&g, self.group, self.choice, x, w, b, y)?;
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
            let b = if self.bias_term {
                &self.blobs[1]
            } else {
                &self.zero_bias
            };
            self.engine
                .backward_grouped(&g, self.group, self.choice, x, w, b, y, down)?;
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
