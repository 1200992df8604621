//! `AssistedExcitation`: the YOLO fork's assisted excitation of a
//! feature map during training (eric612/MobileNet-YOLO,
//! `assisted_excitation_layer.cpp`, after Derakhshani et al.,
//! "Assisted Excitation of Activations"), in its
//! `models/mobilenetv3_voc/train_AE.prototxt`.
//!
//! Bottoms: the features `(N, C, H, W)`, the labels `(N, 1, 300, 5)`
//! of `AnnotatedData` with `yolo_data_type: 1`, and a map of one value
//! a cell for each image (`N` x `H·W` values: the prototxt's features
//! permuted and averaged over the channels by a `Reduction`). The top
//! is the features with, in every channel, `alpha` times the map added
//! in the cells the true boxes cover. `alpha` falls from 1 to 0 along a
//! quarter cosine over the first three quarters of training
//! (`cos(π/2 · iter / (0.75 · max_iter))`, held in 0 to 1), from the
//! iteration the solver tells each layer before its passes
//! ([`DynLayer::set_iteration`]); outside a solver (`max_iter` 0) it is
//! 1, the excitation of iteration 0. A box covers the cells from its
//! left edge's cell (truncated) to its right edge's (rounded up past
//! 0.05), at least one; its rows end at the first centre x of 0. The
//! gradient passes to the features as it came; the map and the labels
//! take none, as in the fork.
//!
//! On the host, in float. Departure: each image of a batch is excited
//! by its own boxes (the fork adds the first image's excitation alone:
//! the others' masks are written where its sum does not read).

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::truth::{check_labels, rows};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

const OP: &str = "run AssistedExcitation";

/// The YOLO fork's `AssistedExcitation`: see the [module](self)
/// documentation.
pub(crate) struct AssistedExcitationLayer {
    iter: usize,
    max_iter: usize,
}

impl AssistedExcitationLayer {
    pub(crate) fn from_param(_layer: &ParamMessage) -> Result<Self> {
        Ok(Self {
            iter: 0,
            max_iter: 0,
        })
    }

    /// The excitation's weight at this iteration, as the fork computes
    /// it (its float ratio, its double cosine).
    fn alpha(&self) -> f32 {
        if self.max_iter == 0 {
            return 1.0;
        }
        let ratio = self.iter as f32 / (self.max_iter as f64 * 0.75) as f32;
        (f64::from(ratio) * std::f64::consts::PI / 2.0)
            .cos()
            .clamp(0.0, 1.0) as f32
    }

    /// The features' `(N, C, H, W)`, with the labels and the map
    /// checked against them.
    fn sizes<T: MathElement>(bottoms: &[&Blob<T>]) -> Result<[usize; 4]> {
        let shape = bottoms[0].shape();
        let &[n, c, h, w] = shape else {
            return Err(bad_param(
                OP,
                format!("bottom 0 must be the features N x C x H x W, not {shape:?}"),
            ));
        };
        check_labels(OP, bottoms[1], n)?;
        let map = bottoms[2];
        if map.shape().first() != Some(&n) || map.count() != n * h * w {
            return Err(bad_param(
                OP,
                format!(
                    "bottom 2 must hold one value a cell of each image, {n} x {h} x {w}, not \
                     {:?}",
                    map.shape()
                ),
            ));
        }
        Ok([n, c, h, w])
    }
}

/// The cells `[from, to)` a box's side covers on an axis of `cells`:
/// the fork's `BOUND` of its truncated edges.
fn covered(centre: f32, size: f32, cells: usize) -> (usize, usize) {
    let cells_f = cells as f32;
    let from = (((centre - size / 2.0) * cells_f) as i64).clamp(0, cells as i64 - 1);
    let to = (((centre + size / 2.0) * cells_f + 0.95) as i64).clamp(from + 1, cells as i64);
    (from as usize, to as usize)
}

impl<T: MathElement> DynLayer<T> for AssistedExcitationLayer {
    fn type_name(&self) -> &str {
        "AssistedExcitation"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(3)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        Self::sizes(bottoms)?;
        Ok(vec![TopShape::new(bottoms[0].shape().to_vec())])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let [n, c, h, w] = Self::sizes(bottoms)?;
        let alpha = self.alpha();
        let labels: Vec<f32> = bottoms[1]
            .cpu_data()?
            .iter()
            .map(|v| v.to_f64() as f32)
            .collect();
        let map = bottoms[2].cpu_data()?;
        let mut top = tops[0].mutable_cpu_data()?;
        top.copy_from_slice(&bottoms[0].cpu_data()?);
        let plane = h * w;
        let mut mask = vec![T::ZERO; plane];
        for b in 0..n {
            mask.fill(T::ZERO);
            let excite = T::from_f64(f64::from(alpha));
            for r in rows(&labels, b).take_while(|r| r[1] != 0.0) {
                let (x0, x1) = covered(r[1], r[3], w);
                let (y0, y1) = covered(r[2], r[4], h);
                for y in y0..y1 {
                    for x in x0..x1 {
                        mask[y * w + x] = excite * map[b * plane + y * w + x];
                    }
                }
            }
            for channel in top[b * c * plane..][..c * plane].chunks_exact_mut(plane) {
                for (t, &m) in channel.iter_mut().zip(&mask) {
                    *t += m;
                }
            }
        }
        Ok(())
    }

    fn backward(&mut self, tops: &[&Blob<T>], down: &[bool], bottoms: &[&Blob<T>]) -> Result<()> {
        if down[0] {
            bottoms[0]
                .mutable_cpu_diff()?
                .copy_from_slice(&tops[0].cpu_diff()?);
        }
        for (bottom, _) in bottoms.iter().zip(down).skip(1).filter(|(_, d)| **d) {
            bottom.mutable_cpu_diff()?.fill(T::ZERO);
        }
        Ok(())
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom == 0
    }

    fn allows_in_place(&self) -> bool {
        false
    }

    fn set_iteration(&mut self, iter: usize, max_iter: usize) {
        (self.iter, self.max_iter) = (iter, max_iter);
    }
}
