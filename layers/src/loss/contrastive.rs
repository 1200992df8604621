//! Caffe's `ContrastiveLoss` (Hadsell, Chopra and LeCun): pairs of
//! features pulled together when similar and pushed at least `margin`
//! apart when not; Caffe's siamese example.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::{Loss, difference, num};
use crate::dyn_layer::{bad_param, sub_param};
use crate::layer::Result;

/// Caffe `ContrastiveLoss`: features `a` and `b` of `(N, C, 1, 1)` and a
/// similarity `y` per pair (non-zero: similar). With `d` the distance of
/// a pair, the loss is `sum(y d^2 + (1 - y) max(margin - d, 0)^2) / 2N`
/// (`legacy_version`: `max(margin - d^2, 0)`, not squared).
pub(crate) struct ContrastiveLoss {
    margin: f64,
    legacy: bool,
}

impl ContrastiveLoss {
    /// Reads `contrastive_loss_param` (margin 1, not legacy).
    pub(crate) fn from_param(layer: &ParamMessage) -> Self {
        let p = sub_param(layer, "contrastive_loss_param");
        Self {
            margin: p.float("margin"),
            legacy: p.boolean("legacy_version"),
        }
    }
}

/// Per pair: `a - b` (all channels) and the squared distance, and
/// whether the pair is similar.
struct Pairs {
    diff: Vec<f64>,
    dist_sq: Vec<f64>,
    similar: Vec<bool>,
    channels: usize,
}

fn pairs<T: MathElement>(bottoms: &[&Blob<T>]) -> Result<Pairs> {
    let n = num(bottoms[0]);
    let channels = bottoms[0].count() / n.max(1);
    let diff = difference(bottoms[0], bottoms[1])?;
    let dist_sq = diff
        .chunks(channels.max(1))
        .map(|d| d.iter().map(|v| v * v).sum())
        .collect();
    // Caffe's static_cast<int>: 0.5 is dissimilar.
    let similar = bottoms[2]
        .cpu_data()?
        .iter()
        .map(|y| y.to_f64().trunc() != 0.0)
        .collect();
    Ok(Pairs {
        diff,
        dist_sq,
        similar,
        channels,
    })
}

impl Loss for ContrastiveLoss {
    const TYPE: &'static str = "ContrastiveLoss";
    const BOTTOMS: usize = 3;
    const LABELS: Option<(usize, &'static str)> = Some((2, "similarity"));

    fn check_shapes<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<()> {
        let (a, b, y) = (bottoms[0], bottoms[1], bottoms[2]);
        let per_item = |x: &Blob<T>| x.count() / num(x).max(1);
        if a.shape() != b.shape()
            || a.shape()
                .get(2..)
                .is_some_and(|s| s.iter().any(|&d| d != 1))
        {
            return Err(bad_param(
                "ContrastiveLoss",
                format!(
                    "the two features must be (N, C, 1, 1) alike: {} and {}",
                    a.shape_string(),
                    b.shape_string()
                ),
            ));
        }
        if num(y) != num(a) || per_item(y) != 1 {
            return Err(bad_param(
                "ContrastiveLoss",
                format!(
                    "the similarity must be one value per pair ({} pairs): {}",
                    num(a),
                    y.shape_string()
                ),
            ));
        }
        Ok(())
    }

    fn loss<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<f64> {
        let p = pairs(bottoms)?;
        let mut loss = 0.0;
        for (&d2, &similar) in p.dist_sq.iter().zip(&p.similar) {
            loss += if similar {
                d2
            } else if self.legacy {
                (self.margin - d2).max(0.0)
            } else {
                let d = (self.margin - d2.sqrt()).max(0.0);
                d * d
            };
        }
        Ok(loss / num(bottoms[0]).max(1) as f64 / 2.0)
    }

    fn gradients<T: MathElement>(
        &self,
        bottoms: &[&Blob<T>],
        weight: f64,
        down: &[bool],
    ) -> Result<()> {
        let p = pairs(bottoms)?;
        for (i, sign) in [(0, 1.0), (1, -1.0)] {
            if !down[i] {
                continue;
            }
            let alpha = sign * weight / num(bottoms[i]).max(1) as f64;
            let mut out = bottoms[i].mutable_cpu_diff()?;
            let rows = out
                .chunks_mut(p.channels.max(1))
                .zip(p.diff.chunks(p.channels.max(1)));
            for (j, (out, diff)) in rows.enumerate() {
                let factor = if p.similar[j] {
                    alpha
                } else {
                    let (mdist, beta) = if self.legacy {
                        (self.margin - p.dist_sq[j], -alpha)
                    } else {
                        let dist = p.dist_sq[j].sqrt();
                        let mdist = self.margin - dist;
                        // Caffe's 1e-4 keeps the division finite at d = 0.
                        (mdist, -alpha * mdist / (dist + 1e-4))
                    };
                    if mdist > 0.0 { beta } else { 0.0 }
                };
                for (o, &d) in out.iter_mut().zip(diff) {
                    *o = T::from_f64(factor * d);
                }
            }
        }
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn loss_on_gpu(
        &self,
        gpu: &blob_kernels::cuda::Gpu,
        scratch: &mut super::cuda::LossScratch,
        bottoms: &[&Blob<f32>],
        top: &Blob<f32>,
    ) -> Option<Result<()>> {
        let terms = super::cuda::Terms::Contrastive(self.pairs_on_gpu(bottoms));
        // Caffe's `loss / num / 2`: halving is exact, so one divisor.
        let divisor = 2.0 * num(bottoms[0]).max(1) as f64;
        Some(super::cuda::loss(gpu, scratch, terms, divisor, top))
    }

    #[cfg(feature = "cuda")]
    fn gradients_on_gpu(
        &self,
        gpu: &blob_kernels::cuda::Gpu,
        _scratch: &super::cuda::LossScratch,
        bottoms: &[&Blob<f32>],
        weight: f64,
        down: &[bool],
    ) -> Option<Result<()>> {
        let pairs = self.pairs_on_gpu(bottoms);
        Some(super::cuda::signed_gradients(
            bottoms,
            weight,
            down,
            |alpha, into| super::cuda::contrastive_backward(gpu, &pairs, alpha, into),
        ))
    }
}

#[cfg(feature = "cuda")]
impl ContrastiveLoss {
    /// The bottoms and settings as the CUDA side takes them.
    fn pairs_on_gpu<'a>(&self, bottoms: &[&'a Blob<f32>]) -> super::cuda::Pairs<'a> {
        super::cuda::Pairs {
            a: bottoms[0],
            b: bottoms[1],
            y: bottoms[2],
            margin: self.margin,
            legacy: self.legacy,
        }
    }
}
