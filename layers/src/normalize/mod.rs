//! The SSD fork's Normalize (`conv4_3_norm` in SSD's VGG): each image, or
//! each pixel across its channels, divided by its L2 norm, then scaled by
//! a learned factor (one, or one per channel). On the host whatever the
//! device.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, like_first_bottom, sub_param};
use crate::layer::{Result, in_place};

/// SSD `Normalize`.
pub(crate) struct NormalizeLayer<T: MathElement> {
    across_spatial: bool,
    channel_shared: bool,
    eps: f64,
    filler: ParamMessage,
    blobs: Vec<Blob<T>>,
    /// Each image's norm (across_spatial) or each pixel's, from the last
    /// forward pass; and its input where it ran in place.
    norms: Vec<f64>,
    input: Vec<f64>,
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
            input: Vec::new(),
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
        let (n, c, p) = Self::dims(bottoms[0])?;
        let x: Vec<f64> = bottoms[0].cpu_data()?.iter().map(|v| v.to_f64()).collect();
        let scale: Vec<f64> = self.blobs[0]
            .cpu_data()?
            .iter()
            .map(|v| v.to_f64())
            .collect();
        self.norms.clear();
        let mut y = tops[0].mutable_cpu_data()?;
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
        self.input = if in_place(bottoms[0], tops[0]) {
            x
        } else {
            Vec::new()
        };
        Ok(())
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
        let (n, c, p) = Self::dims(bottoms[0])?;
        let x: Vec<f64> = if in_place(bottoms[0], tops[0]) {
            std::mem::take(&mut self.input)
        } else {
            bottoms[0].cpu_data()?.iter().map(|v| v.to_f64()).collect()
        };
        let dy: Vec<f64> = tops[0].cpu_diff()?.iter().map(|v| v.to_f64()).collect();
        let scale: Vec<f64> = self.blobs[0]
            .cpu_data()?
            .iter()
            .map(|v| v.to_f64())
            .collect();
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
        let groups: Vec<Vec<usize>> = (0..per_norm)
            .map(|k| {
                if self.across_spatial {
                    (k * c * p..(k + 1) * c * p).collect()
                } else {
                    let (img, q) = (k / p.max(1), k % p.max(1));
                    (0..c).map(|ch| (img * c + ch) * p + q).collect()
                }
            })
            .collect();
        for (k, group) in groups.iter().enumerate() {
            let norm = self.norms[k];
            let channel = |i: usize| (i / p.max(1)) % c;
            let mut dot = 0.0;
            for &i in group {
                let u = x[i] / norm;
                let g = dy[i] * Self::scale_of(&scale, channel(i));
                dot += u * g;
                let slot = if scale.len() == 1 { 0 } else { channel(i) };
                dscale[slot] += u * dy[i];
            }
            for &i in group {
                let u = x[i] / norm;
                let g = dy[i] * Self::scale_of(&scale, channel(i));
                dx[i] = (g - u * dot) / norm;
            }
        }
        for (d, s) in self.blobs[0].mutable_cpu_diff()?.iter_mut().zip(&dscale) {
            *d += T::from_f64(*s);
        }
        if propagate_down[0] {
            for (d, v) in bottoms[0].mutable_cpu_diff()?.iter_mut().zip(&dx) {
                *d = T::from_f64(*v);
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
