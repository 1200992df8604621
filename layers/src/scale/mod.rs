//! Caffe's Scale and Bias: a blob broadcast over a bottom from `axis` on
//! (`y = x * scale[d]`, `y = x + bias[d]`), learned or given as a second
//! bottom; Scale with `bias_term` adds a learned bias after. What follows
//! BatchNorm in ResNet and MobileNet. Both run on the GPU where the blobs
//! live there.

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::{ParamMessage, ParamValue, schema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, axis_of, bad_param, sub_param};
use crate::layer::{Result, in_place};
use crate::planes::{map_planes, per_channel, sum_planes};

#[cfg(feature = "cuda")]
pub(crate) use cuda::SCALE;

/// Where the broadcast blob sits in the bottom: `(outer, dim, inner)`.
#[derive(Clone, Copy, Debug)]
struct Span {
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    outer: usize,
    dim: usize,
    inner: usize,
}

/// The span of a factor of `factor_dims` over `x` from `axis`.
fn span<T: MathElement>(
    x: &Blob<T>,
    axis: usize,
    factor_dims: &[usize],
    op: &'static str,
) -> Result<Span> {
    let s = x.shape();
    let fits =
        axis + factor_dims.len() <= s.len() && s[axis..axis + factor_dims.len()] == *factor_dims;
    if !fits {
        return Err(bad_param(
            op,
            format!(
                "the {} blob's shape extends past, or differs from, the input {} from axis {axis}",
                blob_runtime::shape_string(factor_dims),
                x.shape_string()
            ),
        ));
    }
    Ok(Span {
        outer: s[..axis].iter().product(),
        dim: factor_dims.iter().product(),
        inner: s[axis + factor_dims.len()..].iter().product(),
    })
}

/// How the factor is laid over the bottom: `axis`, `num_axes` as given.
#[derive(Clone, Copy, Debug)]
struct Placement {
    axis: i64,
    num_axes: i64,
}

impl Placement {
    fn read(p: &ParamMessage, op: &'static str) -> Result<Self> {
        let num_axes = p.int("num_axes");
        if num_axes < -1 {
            return Err(bad_param(
                op,
                format!(
                    "num_axes must be non-negative, or -1 to extend to the end of bottom[0]; got {num_axes}"
                ),
            ));
        }
        Ok(Self {
            axis: p.int("axis"),
            num_axes,
        })
    }

    /// The axis and the learned factor's dims for input `x`.
    fn learned_dims<T: MathElement>(
        &self,
        x: &Blob<T>,
        op: &'static str,
    ) -> Result<(usize, Vec<usize>)> {
        let axis = if x.num_axes() == 0 && self.axis == 0 {
            0
        } else {
            axis_of(x, self.axis, op)?
        };
        let end = if self.num_axes == -1 {
            x.num_axes()
        } else {
            axis + self.num_axes as usize
        };
        if end > x.num_axes() {
            return Err(bad_param(
                op,
                format!(
                    "the blob's shape extends past the input's {} (axis {axis}, num_axes {})",
                    x.shape_string(),
                    self.num_axes
                ),
            ));
        }
        Ok((axis, x.shape()[axis..end].to_vec()))
    }
}

/// Per `d`, `sum over o and i of term(a[o, d, i], b[o, d, i])` in f64,
/// each `(o, d)` plane summed on its own (in parallel) and the planes
/// then added in order of `o`.
fn sum_per_d<T: MathElement>(
    a: &[T],
    b: Option<&[T]>,
    sp: Span,
    term: impl Fn(T, T) -> f64 + Sync,
) -> Vec<f64> {
    per_channel(
        &sum_planes(a, b, sp.inner, |_| (), |x, y, ()| term(x, y)),
        sp.dim,
    )
}

/// `out[o, d, i] = op(src[o, d, i], f[d])`, in place over `out` where
/// `src` is `None`.
fn per_d<T: MathElement>(
    src: Option<&[T]>,
    f: &[T],
    sp: Span,
    out: &mut [T],
    op: impl Fn(T, T) -> T + Sync,
) {
    map_planes(src, out, sp.inner, |p| f[p % sp.dim.max(1)], op);
}

/// Where a Scale's factor lies over its input, the factor, and its bias.
type ScaleLayout<'a, T> = (Span, &'a Blob<T>, Option<&'a Blob<T>>);

/// Caffe `Scale`.
pub(crate) struct ScaleLayer<T: MathElement> {
    placement: Placement,
    filler: ParamMessage,
    bias_term: bool,
    bias_filler: ParamMessage,
    /// `[scale, bias]` learned, or `[bias]` with a second bottom.
    blobs: Vec<Blob<T>>,
    /// The input of an in-place pass, which the scale's gradient needs.
    saved: Blob<T>,
    /// Whether a backward pass can follow (else nothing is saved).
    keep_input: bool,
    #[cfg(feature = "cuda")]
    gpu_scratch: crate::gpu::SumScratch,
}

impl<T: MathElement> ScaleLayer<T> {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "scale_param");
        let filler = p.message("filler").cloned().unwrap_or_else(|| {
            let mut f = ParamMessage::new(&schema::FILLER);
            f.set("value", ParamValue::Float(1.0));
            f
        });
        Ok(Self {
            placement: Placement::read(&p, "set up Scale")?,
            filler,
            bias_term: p.boolean("bias_term"),
            bias_filler: sub_param(&p, "bias_filler"),
            blobs: Vec::new(),
            saved: Blob::default(),
            keep_input: true,
            #[cfg(feature = "cuda")]
            gpu_scratch: Default::default(),
        })
    }

    /// The span of the scale over `x`, and the scale blob.
    fn layout<'a>(&'a self, bottoms: &[&'a Blob<T>]) -> Result<ScaleLayout<'a, T>> {
        Self::layout_of(self.placement, &self.blobs, bottoms)
    }

    /// [`layout`](Self::layout) from the fields it reads, so that a pass
    /// may hold it and borrow the others.
    fn layout_of<'a>(
        placement: Placement,
        blobs: &'a [Blob<T>],
        bottoms: &[&'a Blob<T>],
    ) -> Result<ScaleLayout<'a, T>> {
        let x = bottoms[0];
        match bottoms.get(1) {
            Some(&scale) => {
                let axis = if scale.num_axes() == 0 {
                    0
                } else {
                    axis_of(x, placement.axis, "scale")?
                };
                let sp = span(x, axis, scale.shape(), "scale")?;
                Ok((sp, scale, blobs.first()))
            }
            None => {
                let scale = &blobs[0];
                let (axis, _) = placement.learned_dims(x, "scale")?;
                let sp = span(x, axis, scale.shape(), "scale")?;
                Ok((sp, scale, blobs.get(1)))
            }
        }
    }
}

impl<T: MathElement> DynLayer<T> for ScaleLayer<T> {
    fn type_name(&self) -> &str {
        "Scale"
    }

    /// Learned along axis 1 alone (one bottom): `scale·x + bias`.
    fn channel_affine(&self) -> Option<crate::ChannelAffine> {
        let learned = self.blobs.len() == 1 + usize::from(self.bias_term);
        if !learned
            || self.placement.axis != 1
            || self.placement.num_axes != 1
            || self.blobs[0].shape().len() != 1
        {
            return None;
        }
        let read = |b: &Blob<T>| -> Option<Vec<f64>> {
            Some(b.cpu_data().ok()?.iter().map(|v| v.to_f64()).collect())
        };
        let mul = read(&self.blobs[0])?;
        let add = if self.bias_term {
            read(&self.blobs[1])?
        } else {
            vec![0.0; mul.len()]
        };
        Some(crate::ChannelAffine { mul, add })
    }

    fn bottoms(&self) -> Arity {
        Arity::range(1, 2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if self.blobs.is_empty() {
            let factor_dims = match bottoms.get(1) {
                Some(s) => s.shape().to_vec(),
                None => {
                    let (_, dims) = self.placement.learned_dims(bottoms[0], "scale")?;
                    let scale = Blob::new(&dims)?;
                    crate::filler::fill(&scale, &self.filler)?;
                    self.blobs.push(scale);
                    dims
                }
            };
            if self.bias_term {
                let bias = Blob::new(&factor_dims)?;
                crate::filler::fill(&bias, &self.bias_filler)?;
                self.blobs.push(bias);
            }
        }
        self.layout(bottoms)?;
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (x, y) = (bottoms[0], tops[0]);
        let save = in_place(x, y) && self.keep_input;
        if save {
            crate::softmax::place_with(&mut self.saved, x, x.shape())?;
            self.saved.copy_from(x, false)?;
        }
        let (sp, scale, bias) = self.layout(bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("scale", x, &[("output", y), ("scale", scale)])? {
            use crate::gpu::as_f32;
            let source = (!in_place(x, y)).then(|| as_f32(x));
            return cuda::forward(
                &gpu,
                sp,
                source,
                (Some(as_f32(scale)), bias.map(as_f32)),
                as_f32(y),
            );
        }
        let factor = scale.cpu_data()?;
        let shift = bias.map(Blob::cpu_data).transpose()?;
        // y = x * scale (+ bias), one pass over the input or, in place,
        // over the output itself; a plane is `inner` values of one d.
        let factor_of = |plane: usize| factor[plane % sp.dim];
        let source = (!in_place(x, y)).then(|| x.cpu_data()).transpose()?;
        let mut out = y.mutable_cpu_data()?;
        match &shift {
            Some(shift) => {
                let pair = |plane: usize| (factor_of(plane), shift[plane % sp.dim]);
                let scaled = |v: T, (f, b): (T, T)| v * f + b;
                map_planes(source.as_deref(), &mut out, sp.inner, pair, scaled);
            }
            None => map_planes(source.as_deref(), &mut out, sp.inner, factor_of, |v, f| {
                v * f
            }),
        }
        Ok(())
    }

    fn backward_will_run(&mut self, will: bool) {
        self.keep_input = will;
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        let (x, y) = (bottoms[0], tops[0]);
        let input = if in_place(x, y) { &self.saved } else { x };
        let (sp, scale, bias) = Self::layout_of(self.placement, &self.blobs, bottoms)?;
        let learned = bottoms.len() == 1;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("scale", x, &[("output", y), ("scale", scale)])? {
            use crate::gpu::as_f32;
            let wanted = cuda::Wanted {
                learned,
                factor: learned || propagate_down.get(1) == Some(&true),
                input: propagate_down[0],
            };
            return cuda::backward(
                &gpu,
                sp,
                as_f32(input),
                (as_f32(scale), bias.map(as_f32)),
                (as_f32(x), as_f32(y)),
                wanted,
                &mut self.gpu_scratch,
            );
        }
        let through = in_place(x, y);
        {
            let dy = y.cpu_diff()?;
            if let Some(bias) = bias {
                let db = sum_per_d(&dy, None, sp, |g, _| g.to_f64());
                for (d, s) in bias.mutable_cpu_diff()?.iter_mut().zip(db) {
                    *d += T::from_f64(s);
                }
            }
            if learned || propagate_down.get(1) == Some(&true) {
                let v = input.cpu_data()?;
                let ds = sum_per_d(&dy, Some(&v), sp, |g, v| g.to_f64() * v.to_f64());
                let mut d = scale.mutable_cpu_diff()?;
                for (d, s) in d.iter_mut().zip(ds) {
                    let s = T::from_f64(s);
                    *d = if learned { *d + s } else { s };
                }
            }
            if propagate_down[0] && !through {
                per_d(
                    Some(&dy),
                    &scale.cpu_data()?,
                    sp,
                    &mut x.mutable_cpu_diff()?,
                    |g, f| g * f,
                );
            }
        }
        if propagate_down[0] && through {
            // The top's gradient is the bottom's: scaled where it lies.
            let factor = scale.cpu_data()?.to_vec();
            per_d(None, &factor, sp, &mut x.mutable_cpu_diff()?, |g, f| g * f);
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

/// Caffe `Bias`.
pub(crate) struct BiasLayer<T: MathElement> {
    placement: Placement,
    filler: ParamMessage,
    blobs: Vec<Blob<T>>,
    #[cfg(feature = "cuda")]
    gpu_scratch: crate::gpu::SumScratch,
}

impl<T: MathElement> BiasLayer<T> {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "bias_param");
        Ok(Self {
            placement: Placement::read(&p, "set up Bias")?,
            filler: sub_param(&p, "filler"),
            blobs: Vec::new(),
            #[cfg(feature = "cuda")]
            gpu_scratch: Default::default(),
        })
    }

    /// The span and the bias: a second bottom, or the learned blob.
    fn layout<'a>(
        placement: Placement,
        blobs: &'a [Blob<T>],
        bottoms: &[&'a Blob<T>],
    ) -> Result<(Span, &'a Blob<T>)> {
        let x = bottoms[0];
        let Some(bias) = bottoms.get(1).copied().or(blobs.first()) else {
            return Err(bad_param(
                "Bias",
                "no bias: neither a second bottom nor a learned blob",
            ));
        };
        let axis = if bias.num_axes() == 0 {
            0
        } else {
            axis_of(x, placement.axis, "bias")?
        };
        Ok((span(x, axis, bias.shape(), "bias")?, bias))
    }
}

impl<T: MathElement> DynLayer<T> for BiasLayer<T> {
    fn type_name(&self) -> &str {
        "Bias"
    }

    fn bottoms(&self) -> Arity {
        Arity::range(1, 2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if self.blobs.is_empty() && bottoms.len() == 1 {
            let (_, dims) = self.placement.learned_dims(bottoms[0], "bias")?;
            let bias = Blob::new(&dims)?;
            crate::filler::fill(&bias, &self.filler)?;
            self.blobs.push(bias);
        }
        Self::layout(self.placement, &self.blobs, bottoms)?;
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (sp, bias) = Self::layout(self.placement, &self.blobs, bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) =
            crate::gpu::gpu_for("bias", bottoms[0], &[("output", tops[0]), ("bias", bias)])?
        {
            use crate::gpu::as_f32;
            let (x, y) = (bottoms[0], tops[0]);
            let source = (!in_place(x, y)).then(|| as_f32(x));
            return cuda::forward(&gpu, sp, source, (None, Some(as_f32(bias))), as_f32(y));
        }
        let (x, y) = (bottoms[0], tops[0]);
        let shift = bias.cpu_data()?;
        let source = (!in_place(x, y)).then(|| x.cpu_data()).transpose()?;
        per_d(
            source.as_deref(),
            &shift,
            sp,
            &mut y.mutable_cpu_data()?,
            |v, b| v + b,
        );
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        let (sp, bias) = Self::layout(self.placement, &self.blobs, bottoms)?;
        let learned = bottoms.len() == 1;
        #[cfg(feature = "cuda")]
        if let Some(gpu) =
            crate::gpu::gpu_for("bias", bottoms[0], &[("output", tops[0]), ("bias", bias)])?
        {
            use crate::gpu::as_f32;
            let wanted = cuda::Wanted {
                learned,
                factor: learned || propagate_down.get(1) == Some(&true),
                input: propagate_down[0],
            };
            return cuda::bias_backward(
                &gpu,
                sp,
                as_f32(bias),
                (as_f32(bottoms[0]), as_f32(tops[0])),
                wanted,
                &mut self.gpu_scratch,
            );
        }
        let dy = tops[0].cpu_diff()?;
        if propagate_down[0] && !in_place(bottoms[0], tops[0]) {
            bottoms[0].mutable_cpu_diff()?.copy_from_slice(&dy);
        }
        if learned || propagate_down.get(1) == Some(&true) {
            let db = sum_per_d(&dy, None, sp, |g, _| g.to_f64());
            for (d, s) in bias.mutable_cpu_diff()?.iter_mut().zip(db) {
                let s = T::from_f64(s);
                *d = if learned { *d + s } else { s };
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
