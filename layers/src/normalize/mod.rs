//! The SSD fork's Normalize (`conv4_3_norm` in SSD's VGG): each image, or
//! each pixel across its channels, divided by its L2 norm, then scaled by
//! a learned factor (one, or one per channel). `f32` blobs on a GPU run
//! the CUDA side (`cuda.rs`); the CPU side adds in `f64`.

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, like_first_bottom, sub_param};
use crate::layer::{Result, in_place};
#[cfg(feature = "cuda")]
pub(crate) use cuda::NORMALIZE;

/// SSD `Normalize`.
pub(crate) struct NormalizeLayer<T: MathElement> {
    across_spatial: bool,
    channel_shared: bool,
    eps: f64,
    filler: ParamMessage,
    blobs: Vec<Blob<T>>,
    /// Each image's norm (across_spatial) or each pixel's, from the last
    /// forward pass on the CPU.
    norms: Vec<f64>,
    /// The input of an in-place pass, which backward reads; kept only
    /// where backward will run.
    saved: Blob<T>,
    keep_input: bool,
    /// The input's dims in the last forward pass, and whether it ran on
    /// the GPU (whose norms live there).
    last_pass: Option<((usize, usize, usize), bool)>,
    #[cfg(feature = "cuda")]
    gpu_scratch: cuda::NormScratch,
}

impl<T: MathElement> NormalizeLayer<T> {
    pub(crate) fn from_param(layer: &ParamMessage) -> Self {
        let p = sub_param(layer, "norm_param");
        let mut filler = sub_param(&p, "scale_filler");
        if !p.has("scale_filler") {
            // The fork's default: a constant 1.
            filler.set("type", blob_proto::ParamValue::Str("constant".into()));
            filler.set("value", blob_proto::ParamValue::Float(1.0));
        }
        Self {
            across_spatial: p.boolean("across_spatial"),
            channel_shared: p.boolean("channel_shared"),
            eps: p.float("eps"),
            filler,
            blobs: Vec::new(),
            norms: Vec::new(),
            saved: Blob::default(),
            keep_input: true,
            last_pass: None,
            #[cfg(feature = "cuda")]
            gpu_scratch: Default::default(),
        }
    }

    /// (images, channels, pixels per channel).
    fn dims(x: &Blob<T>) -> Result<(usize, usize, usize)> {
        if x.num_axes() < 2 {
            return Err(bad_param(
                "normalize",
                format!(
                    "the input {} has no channel axis (Normalize needs at least 2)",
                    x.shape_string()
                ),
            ));
        }
        let s = x.shape();
        Ok((s[0], s[1], s[2..].iter().product()))
    }

    /// The scale of channel `c`.
    fn scale_of(scale: &[f64], c: usize) -> f64 {
        scale[if scale.len() == 1 { 0 } else { c }]
    }

    #[cfg(feature = "cuda")]
    fn geometry(&self, (images, channels, plane): (usize, usize, usize)) -> cuda::Geometry {
        cuda::Geometry {
            images,
            channels,
            plane,
            across_spatial: self.across_spatial,
            channel_shared: self.channel_shared,
        }
    }

    /// The scale's values.
    fn scale(&self) -> Result<Vec<f64>> {
        Ok(self.blobs[0]
            .cpu_data()?
            .iter()
            .map(|v| v.to_f64())
            .collect())
    }

    /// The forward pass on the host, `x` and `y` possibly one blob.
    fn forward_cpu(
        &mut self,
        (n, c, p): (usize, usize, usize),
        x: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        let x: Vec<f64> = x.cpu_data()?.iter().map(|v| v.to_f64()).collect();
        let scale = self.scale()?;
        self.norms.clear();
        let mut y = y.mutable_cpu_data()?;
        for img in 0..n {
            let xi = &x[img * c * p..][..c * p];
            let yi = &mut y[img * c * p..][..c * p];
            if self.across_spatial {
                let norm = (xi.iter().map(|v| v * v).sum::<f64>() + self.eps).sqrt();
                self.norms.push(norm);
                for (i, (o, &v)) in yi.iter_mut().zip(xi).enumerate() {
                    *o = T::from_f64(v / norm * Self::scale_of(&scale, i / p.max(1)));
                }
            } else {
                for q in 0..p {
                    let sum: f64 = (0..c).map(|ch| xi[ch * p + q].powi(2)).sum();
                    let norm = (self.eps + sum).sqrt();
                    self.norms.push(norm);
                    for ch in 0..c {
                        yi[ch * p + q] =
                            T::from_f64(xi[ch * p + q] / norm * Self::scale_of(&scale, ch));
                    }
                }
            }
        }
        Ok(())
    }

    /// The backward pass on the host from the forward pass's input `x`:
    /// the scale's gradient added, and `bottom`'s written when given.
    fn backward_cpu(
        &mut self,
        (n, c, p): (usize, usize, usize),
        x: &[f64],
        top: &Blob<T>,
        bottom: Option<&Blob<T>>,
    ) -> Result<()> {
        let dy: Vec<f64> = top.cpu_diff()?.iter().map(|v| v.to_f64()).collect();
        let scale = self.scale()?;
        let per_norm = if self.across_spatial { n } else { n * p };
        if x.len() != n * c * p || self.norms.len() != per_norm {
            return Err(bad_param(
                "normalize",
                "backward before a forward pass of this size",
            ));
        }
        let mut dscale = vec![0.0; scale.len()];
        let mut dx = vec![0.0; x.len()];
        // The values sharing a norm: an image's, or a pixel's channels.
        let group = |k: usize| -> Vec<usize> {
            if self.across_spatial {
                (k * c * p..(k + 1) * c * p).collect()
            } else {
                let (img, q) = (k / p.max(1), k % p.max(1));
                (0..c).map(|ch| (img * c + ch) * p + q).collect()
            }
        };
        let channel = |i: usize| (i / p.max(1)) % c;
        for (k, &norm) in self.norms.iter().enumerate() {
            let group = group(k);
            let mut dot = 0.0;
            for &i in &group {
                let u = x[i] / norm;
                let g = dy[i] * Self::scale_of(&scale, channel(i));
                dot += u * g;
                let slot = if scale.len() == 1 { 0 } else { channel(i) };
                dscale[slot] += u * dy[i];
            }
            for &i in &group {
                let u = x[i] / norm;
                let g = dy[i] * Self::scale_of(&scale, channel(i));
                dx[i] = (g - u * dot) / norm;
            }
        }
        for (d, s) in self.blobs[0].mutable_cpu_diff()?.iter_mut().zip(&dscale) {
            *d += T::from_f64(*s);
        }
        if let Some(bottom) = bottom {
            for (d, v) in bottom.mutable_cpu_diff()?.iter_mut().zip(&dx) {
                *d = T::from_f64(*v);
            }
        }
        Ok(())
    }
}

impl<T: MathElement> DynLayer<T> for NormalizeLayer<T> {
    fn type_name(&self) -> &str {
        "Normalize"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let (_, c, _) = Self::dims(bottoms[0])?;
        if self.blobs.is_empty() {
            let dims: &[usize] = if self.channel_shared { &[] } else { &[c] };
            let scale = Blob::new(dims)?;
            crate::filler::fill(&scale, &self.filler)?;
            self.blobs.push(scale);
        }
        let want = if self.channel_shared { 1 } else { c };
        if self.blobs[0].count() != want {
            return Err(bad_param(
                "normalize",
                format!(
                    "Scale size is inconsistent with prototxt config: {} values for {want}",
                    self.blobs[0].count()
                ),
            ));
        }
        Ok(like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (x, y) = (bottoms[0], tops[0]);
        let dims = Self::dims(x)?;
        if in_place(x, y) && self.keep_input {
            crate::softmax::place_with(&mut self.saved, x, x.shape())?;
            self.saved.copy_from(x, false)?;
        }
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("normalize", x, &[("scale", &self.blobs[0])])? {
            use crate::gpu::as_f32;
            let source = (!in_place(x, y)).then(|| as_f32(x));
            cuda::forward(
                &gpu,
                self.geometry(dims),
                self.eps as f32,
                source,
                as_f32(&self.blobs[0]),
                as_f32(y),
                &mut self.gpu_scratch,
            )?;
            self.last_pass = Some((dims, true));
            return Ok(());
        }
        self.forward_cpu(dims, x, y)?;
        self.last_pass = Some((dims, false));
        Ok(())
    }

    fn backward_will_run(&mut self, will: bool) {
        self.keep_input = will;
    }

    /// With `u = x / norm` the normalized input and `g = dy * scale`:
    /// `dx = (g - u sum(u g)) / norm` over each norm's values, and the
    /// scale's gradient `sum(u dy)` per channel (or in all).
    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        let (x, y) = (bottoms[0], tops[0]);
        let dims = Self::dims(x)?;
        let Some((_, on_gpu)) = self.last_pass.filter(|(last, _)| *last == dims) else {
            return Err(bad_param(
                "normalize",
                "backward before a forward pass of this size",
            ));
        };
        if in_place(x, y) && !self.keep_input {
            return Err(bad_param(
                "normalize",
                "backward of an in-place pass whose input was not kept (the net said no backward would run)",
            ));
        }
        let input = if in_place(x, y) { &self.saved } else { x };
        #[cfg(feature = "cuda")]
        if on_gpu
            && let Some(gpu) = crate::gpu::gpu_for("normalize", x, &[("scale", &self.blobs[0])])?
        {
            use crate::gpu::as_f32;
            return cuda::backward(
                &gpu,
                self.geometry(dims),
                as_f32(input),
                as_f32(&self.blobs[0]),
                (as_f32(x), as_f32(y)),
                propagate_down[0],
                &mut self.gpu_scratch,
            );
        }
        if on_gpu {
            return Err(bad_param(
                "normalize",
                "backward on the host after a forward pass on the GPU: keep the blobs on one device",
            ));
        }
        let x_values: Vec<f64> = input.cpu_data()?.iter().map(|v| v.to_f64()).collect();
        self.backward_cpu(dims, &x_values, y, propagate_down[0].then_some(x))
    }

    fn blobs(&self) -> &[Blob<T>] {
        &self.blobs
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut self.blobs
    }
}
