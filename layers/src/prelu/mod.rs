//! Caffe's PReLU: `y = max(x, 0) + a_c min(x, 0)` with a learned slope
//! `a` per channel (axis 1), or one shared by all channels.

#[cfg(feature = "cuda")]
mod cuda;

use blob_kernels::cpu;
use blob_proto::{ParamMessage, ParamValue, schema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, sub_param};
use crate::layer::{Result, in_place};
#[cfg(feature = "cuda")]
pub(crate) use cuda::PRELU;

/// Caffe `PReLU` as a run-time layer (in place or not): slope blob `(C)`,
/// or a 0-axis scalar with `channel_shared`, filled with 0.25 unless
/// `prelu_param.filler` says otherwise.
pub(crate) struct PReLULayer<T: MathElement> {
    channel_shared: bool,
    filler: ParamMessage,
    blobs: Vec<Blob<T>>,
    /// The input of an in-place forward pass, which backward needs
    /// (Caffe's `bottom_memory_`).
    saved: Blob<T>,
    /// Whether a backward pass can follow (else nothing is saved).
    keep_input: bool,
}

/// Values from which a PReLU pass is shared across the cores.
const PARALLEL_MIN: usize = 1 << 15;

/// `y = max(x, 0) + a_c min(x, 0)` over planes of `dim` values, plane `k`
/// of channel `k % channels`; with no `x`, in place on `y`. Runs of
/// planes go to the cores.
fn forward_cpu<T: MathElement>(y: &mut [T], x: Option<&[T]>, a: &[T], channels: usize, dim: usize) {
    let dim = dim.max(1);
    let planes = y.len() / dim;
    let per_part = if y.len() < PARALLEL_MIN {
        planes
    } else {
        planes.div_ceil(cpu::cores())
    }
    .max(1);
    let prelu = |v: T, a: T| if v > T::ZERO { v } else { v * a };
    cpu::on_cores(y.chunks_mut(per_part * dim).enumerate(), |(part, y)| {
        cpu::vectorized(
            #[inline(always)]
            || {
                for (k, out) in (part * per_part..).zip(y.chunks_mut(dim)) {
                    let a = a[k % channels];
                    match x {
                        Some(x) => {
                            for (o, &v) in out.iter_mut().zip(&x[k * dim..][..dim]) {
                                *o = prelu(v, a);
                            }
                        }
                        None => cpu::map_whole_in_place(out, |v| prelu(v, a)),
                    }
                }
            },
        )
    });
}

impl<T: MathElement> PReLULayer<T> {
    /// Reads the layer's `prelu_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "prelu_param");
        let filler = p.message("filler").cloned().unwrap_or_else(|| {
            let mut f = ParamMessage::new(&schema::FILLER);
            f.set("value", ParamValue::Float(0.25));
            f
        });
        Ok(Self {
            channel_shared: p.boolean("channel_shared"),
            filler,
            blobs: Vec::new(),
            saved: Blob::default(),
            keep_input: true,
        })
    }

    /// `(channels of the slope, values per channel per item)`.
    fn dims(&self, x: &Blob<T>) -> Result<(usize, usize)> {
        if x.num_axes() < 2 {
            return Err(bad_param(
                "PReLU",
                format!(
                    "the input {} has fewer than 2 axes (N, C, ...)",
                    x.shape_string()
                ),
            ));
        }
        let channels = x.shape()[1];
        let dim: usize = x.shape()[2..].iter().product();
        let want = if self.channel_shared { 1 } else { channels };
        if let Some(slope) = self.blobs.first()
            && slope.count() != want
        {
            return Err(bad_param(
                "PReLU",
                format!(
                    "Negative slope size is inconsistent with prototxt config: the slope has {} values, the input {} needs {want}",
                    slope.count(),
                    x.shape_string()
                ),
            ));
        }
        Ok(if self.channel_shared {
            (1, channels * dim)
        } else {
            (channels, dim)
        })
    }
}

impl<T: MathElement> DynLayer<T> for PReLULayer<T> {
    fn type_name(&self) -> &str {
        "PReLU"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let x = bottoms[0];
        if self.blobs.is_empty() {
            self.dims(x)?;
            let shape: &[usize] = if self.channel_shared {
                &[]
            } else {
                &x.shape()[1..2]
            };
            let slope = Blob::new(shape)?;
            crate::filler::fill(&slope, &self.filler)?;
            self.blobs = vec![slope];
        }
        self.dims(x)?;
        Ok(vec![TopShape::new(x.shape().to_vec())])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (x, y) = (bottoms[0], tops[0]);
        let (channels, dim) = self.dims(x)?;
        #[cfg(feature = "cuda")]
        let gpu = crate::gpu::gpu_for("PReLU", x, &[("output", y), ("slope", &self.blobs[0])])?;
        #[cfg(not(feature = "cuda"))]
        let gpu: Option<std::convert::Infallible> = None;
        // In place, backward reads the input from a copy (Caffe's
        // `bottom_memory_`), made only where a backward pass can run; the
        // GPU kernel reads its input from it too.
        let copy = in_place(x, y) && (self.keep_input || gpu.is_some());
        if copy {
            crate::softmax::place_with(&mut self.saved, x, x.shape())?;
            self.saved.copy_from(x, false)?;
        }
        let input = if copy { &self.saved } else { x };
        let slope = &self.blobs[0];
        #[cfg(feature = "cuda")]
        if let Some(gpu) = gpu {
            use crate::gpu::as_f32;
            return cuda::forward(
                &gpu,
                (channels, dim),
                as_f32(input),
                as_f32(slope),
                as_f32(y),
            );
        }
        let a = slope.cpu_data()?;
        if in_place(input, y) {
            forward_cpu(&mut y.mutable_cpu_data()?, None, &a, channels, dim);
        } else {
            forward_cpu(
                &mut y.mutable_cpu_data()?,
                Some(&input.cpu_data()?),
                &a,
                channels,
                dim,
            );
        }
        Ok(())
    }

    fn backward_will_run(&mut self, will: bool) {
        self.keep_input = will;
    }

    /// `da_c += sum(dy x [x <= 0])`, then `dx = dy ([x > 0] + a_c [x <= 0])`
    /// from the input the forward pass read.
    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        let (x, y) = (bottoms[0], tops[0]);
        let (channels, dim) = self.dims(x)?;
        let input = if in_place(x, y) { &self.saved } else { x };
        let slope = &self.blobs[0];
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("PReLU", x, &[("output", y), ("slope", slope)])? {
            use crate::gpu::as_f32;
            return cuda::backward(
                &gpu,
                (channels, dim),
                as_f32(input),
                as_f32(slope),
                (as_f32(y), as_f32(x)),
                propagate_down[0],
            );
        }
        let xd = input.cpu_data()?;
        {
            let dy = y.cpu_diff()?;
            let mut da = slope.mutable_cpu_diff()?;
            let mut sums = vec![T::ZERO; channels];
            for (k, (x, g)) in xd.chunks(dim.max(1)).zip(dy.chunks(dim.max(1))).enumerate() {
                let sum = &mut sums[k % channels];
                for (&v, &g) in x.iter().zip(g) {
                    if v <= T::ZERO {
                        *sum += g * v;
                    }
                }
            }
            for (d, s) in da.iter_mut().zip(sums) {
                *d += s;
            }
        }
        if !propagate_down[0] {
            return Ok(());
        }
        let a = slope.cpu_data()?;
        let step = dim.max(1);
        if in_place(x, y) {
            let mut d = x.mutable_cpu_diff()?;
            for (k, (d, x)) in d.chunks_mut(step).zip(xd.chunks(step)).enumerate() {
                let a = a[k % channels];
                for (d, &v) in d.iter_mut().zip(x) {
                    if v <= T::ZERO {
                        *d *= a;
                    }
                }
            }
        } else {
            let dy = y.cpu_diff()?;
            let mut dx = x.mutable_cpu_diff()?;
            let planes = dx
                .chunks_mut(step)
                .zip(dy.chunks(step))
                .zip(xd.chunks(step));
            for (k, ((d, g), x)) in planes.enumerate() {
                let a = a[k % channels];
                for ((d, &g), &v) in d.iter_mut().zip(g).zip(x) {
                    *d = if v > T::ZERO { g } else { g * a };
                }
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
}
