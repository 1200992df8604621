//! Caffe's SoftmaxWithLoss and Accuracy over any axis, as run-time
//! layers, and the loss's passes the typed [`SoftmaxWithLoss`](super::SoftmaxWithLoss)
//! runs too.

use blob_kernels::cpu;
use blob_proto::ParamMessage;
use blob_runtime::{Blob, BlobError, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, axis_of, bad_param, sub_param};
use crate::layer::Result;
use crate::loss::{Normalization, loss_settings};

/// Each position's class (`None`: its label is `ignore`), checked
/// against `classes`.
pub(super) fn classes_of<T: MathElement>(
    op: &'static str,
    labels: &Blob<T>,
    classes: usize,
    positions: usize,
    ignore: Option<i64>,
) -> Result<Vec<Option<usize>>> {
    if labels.count() != positions {
        return Err(bad_param(
            op,
            format!(
                "the labels {} are not one per position ({positions})",
                labels.shape_string()
            ),
        ));
    }
    let values = labels.cpu_data()?;
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = v.to_f64();
            if ignore.is_some_and(|ig| c == ig as f64) {
                Ok(None)
            } else if c >= 0.0 && c.fract() == 0.0 && (c as usize) < classes {
                Ok(Some(c as usize))
            } else {
                Err(BlobError::InvalidParameter {
                    op,
                    detail: format!("label {i} is {c}, not a class index below {classes}"),
                })
            }
        })
        .collect()
}

/// The loss's passes: softmax, `-log(max(p[label], FLT_MIN))` summed and
/// normalized, and `(p - onehot) weight / normalizer` backward.
#[derive(Default)]
pub(crate) struct SoftmaxLossEngine {
    /// Each position's loss on the GPU, before they are added.
    #[cfg(feature = "cuda")]
    gpu_losses: blob_kernels::cuda::Scratch<f32>,
    /// The class weights on the GPU.
    #[cfg(feature = "cuda")]
    gpu_weights: super::cuda::DeviceClassWeights,
}

/// SegNet's weight of each class (`loss_param { weight_by_label_freqs:
/// true class_weighting: ... }`), as the float the fork keeps.
pub(crate) type ClassWeights<'a> = Option<&'a [f32]>;

/// Class `c`'s weight in `T`, 1 where there are none.
fn weight_of<T: MathElement>(weights: ClassWeights<'_>, c: usize) -> Option<T> {
    weights.map(|w| T::from_f64(f64::from(w[c])))
}

impl SoftmaxLossEngine {
    /// `prob = softmax(logits)` over `(outer, classes, inner)`, and the
    /// loss into `loss`'s one value, with a normalization, an ignored
    /// label and SegNet's class weights (each position's `-log p` times
    /// its label's weight; the normalizer still counts positions).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn forward<T: MathElement>(
        &mut self,
        dims: (usize, usize, usize),
        (mode, ignore): (Normalization, Option<i64>),
        weights: ClassWeights<'_>,
        logits: &Blob<T>,
        labels: &Blob<T>,
        prob: &Blob<T>,
        loss: &Blob<T>,
    ) -> Result<()> {
        let (outer, classes, inner) = dims;
        super::forward(logits, prob, dims)?;
        let items = classes_of("softmax loss", labels, classes, outer * inner, ignore)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_of_all(&[logits, labels, prob, loss]) {
            use crate::gpu::as_f32;
            let valid = items.iter().filter(|c| c.is_some()).count();
            let divisor = mode.divisor(outer, inner, valid) as f32;
            let w = self.gpu_weights.get(&gpu, weights, classes)?;
            let (p, l, out) = (as_f32(prob), as_f32(labels), as_f32(loss));
            let how = (ignore, &w);
            return super::cuda::loss(&gpu, &mut self.gpu_losses, dims, how, divisor, p, l, out);
        }
        let p = prob.cpu_data()?;
        let floor = T::from_f64(f64::from(f32::MIN_POSITIVE));
        let mut sum = T::ZERO;
        let mut valid = 0;
        for (at, c) in items.iter().enumerate() {
            let Some(c) = *c else { continue };
            let (o, i) = (at / inner, at % inner);
            let v = p[(o * classes + c) * inner + i];
            let log = (if v > floor { v } else { floor }).ln();
            sum = sum - weight_of(weights, c).map_or(log, |w| log * w);
            valid += 1;
        }
        loss.mutable_cpu_data()?[0] = sum / T::from_f64(mode.divisor(dims.0, dims.2, valid));
        Ok(())
    }

    /// `(prob - onehot) weight / normalizer` into the logits' diff, zero
    /// at ignored positions, each position's times its label's class
    /// weight where there are some.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn backward<T: MathElement>(
        &mut self,
        dims: (usize, usize, usize),
        (mode, ignore): (Normalization, Option<i64>),
        weights: ClassWeights<'_>,
        logits: &Blob<T>,
        labels: &Blob<T>,
        prob: &Blob<T>,
        weight: T,
    ) -> Result<()> {
        let (outer, classes, inner) = dims;
        let items = classes_of("softmax loss", labels, classes, outer * inner, ignore)?;
        let valid = items.iter().filter(|c| c.is_some()).count();
        let scale = weight / T::from_f64(mode.divisor(dims.0, dims.2, valid));
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_of_all(&[logits, labels, prob]) {
            use crate::gpu::as_f32;
            let w = self.gpu_weights.get(&gpu, weights, classes)?;
            let (p, l, x) = (as_f32(prob), as_f32(labels), as_f32(logits));
            let scale = scale.to_f64() as f32;
            return super::cuda::loss_backward(&gpu, dims, (ignore, &w), scale, p, l, x);
        }
        let mut dx = logits.mutable_cpu_diff()?;
        dx.copy_from_slice(&prob.cpu_data()?);
        for (at, c) in items.iter().enumerate() {
            let (o, i) = (at / inner, at % inner);
            match *c {
                Some(c) => {
                    let at = (o * classes + c) * inner + i;
                    dx[at] = dx[at] - T::ONE;
                    if let Some(w) = weight_of::<T>(weights, c) {
                        (0..classes).for_each(|k| dx[(o * classes + k) * inner + i] *= w);
                    }
                }
                None => (0..classes).for_each(|k| dx[(o * classes + k) * inner + i] = T::ZERO),
            }
        }
        cpu::scal(scale, &mut dx);
        Ok(())
    }
}

/// `(outer, classes, inner)` of scores split at `axis`.
fn split<T: MathElement>(
    x: &Blob<T>,
    axis: i64,
    op: &'static str,
) -> Result<(usize, usize, usize)> {
    let a = axis_of(x, axis, op)?;
    let s = x.shape();
    Ok((s[..a].iter().product(), s[a], s[a + 1..].iter().product()))
}

/// Caffe `SoftmaxWithLoss`: scores and labels in, the loss out (and the
/// probabilities as a second top, where given).
pub(crate) struct SoftmaxWithLossLayer<T: MathElement> {
    axis: i64,
    settings: (Normalization, Option<i64>),
    /// SegNet's `class_weighting`, where `weight_by_label_freqs`.
    class_weights: Option<Vec<f32>>,
    prob: Blob<T>,
    engine: SoftmaxLossEngine,
}

impl<T: MathElement> SoftmaxWithLossLayer<T> {
    /// Reads `softmax_param.axis` and `loss_param` (SegNet's
    /// `weight_by_label_freqs` and `class_weighting` too).
    pub(crate) fn from_param(layer: &ParamMessage) -> Self {
        let loss = sub_param(layer, "loss_param");
        let class_weights = (loss.has("weight_by_label_freqs")
            && loss.boolean("weight_by_label_freqs"))
        .then(|| {
            loss.floats("class_weighting")
                .into_iter()
                .map(|w| w as f32)
                .collect()
        });
        Self {
            axis: sub_param(layer, "softmax_param").int("axis"),
            settings: loss_settings(layer, Normalization::Valid),
            class_weights,
            prob: Blob::default(),
            engine: SoftmaxLossEngine::default(),
        }
    }
}

impl<T: MathElement> DynLayer<T> for SoftmaxWithLossLayer<T> {
    fn type_name(&self) -> &str {
        "SoftmaxWithLoss"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn tops(&self) -> Arity {
        Arity::range(1, 2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let (outer, _, inner) = split(bottoms[0], self.axis, "softmax loss")?;
        if bottoms[1].count() != outer * inner {
            return Err(bad_param(
                "softmax loss",
                format!(
                    "Number of labels must match number of predictions; e.g., if softmax axis == 1 and prediction shape is (N, C, H, W), label count (number of labels) must be N*H*W, with integer values in {{0, 1, ..., C-1}}: scores {}, labels {}",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string()
                ),
            ));
        }
        let classes = bottoms[0].shape()[axis_of(bottoms[0], self.axis, "softmax loss")?];
        if let Some(w) = self.class_weights.as_ref().filter(|w| w.len() != classes) {
            return Err(bad_param(
                "softmax loss",
                format!(
                    "Number of class weight values does not match the number of classes: \
                     loss_param gives {} class_weighting values for the {classes} classes of {}",
                    w.len(),
                    bottoms[0].shape_string()
                ),
            ));
        }
        let mut shapes = vec![TopShape::new(Vec::new())];
        if tops.len() == 2 {
            shapes.push(TopShape::new(bottoms[0].shape().to_vec()));
        }
        Ok(shapes)
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let dims = split(bottoms[0], self.axis, "softmax loss")?;
        let prob = match tops.get(1) {
            Some(p) => p,
            None => {
                super::place_with(&mut self.prob, bottoms[0], bottoms[0].shape())?;
                &self.prob
            }
        };
        let weights = self.class_weights.as_deref();
        let (logits, labels) = (bottoms[0], bottoms[1]);
        self.engine
            .forward(dims, self.settings, weights, logits, labels, prob, tops[0])
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if propagate_down.get(1) == Some(&true) {
            return Err(bad_param(
                "softmax loss backward",
                "SoftmaxWithLoss Layer cannot backpropagate to label inputs.",
            ));
        }
        if !propagate_down[0] {
            return Ok(());
        }
        let dims = split(bottoms[0], self.axis, "softmax loss")?;
        let prob = tops.get(1).copied().unwrap_or(&self.prob);
        let weight = tops[0].cpu_diff()?[0];
        let weights = self.class_weights.as_deref();
        let (logits, labels) = (bottoms[0], bottoms[1]);
        self.engine
            .backward(dims, self.settings, weights, logits, labels, prob, weight)
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom != 1
    }

    fn is_loss(&self) -> bool {
        true
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}

/// Caffe `Accuracy`: the share of positions whose label is among the
/// `top_k` highest scores (ties count as right), on the host; with a
/// second top, each class's share of its own positions (0 for a class
/// no position has), as SegNet's nets ask for. A label that is no class
/// (and not `ignore_label`) counts as a miss.
pub(crate) struct AccuracyLayer {
    axis: i64,
    top_k: usize,
    ignore: Option<i64>,
}

impl AccuracyLayer {
    /// Reads `accuracy_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "accuracy_param");
        let top_k = p.uint("top_k") as usize;
        if top_k == 0 {
            return Err(bad_param("set up Accuracy", "top_k must be at least 1"));
        }
        Ok(Self {
            axis: p.int("axis"),
            top_k,
            ignore: p.has("ignore_label").then(|| p.int("ignore_label")),
        })
    }
}

impl<T: MathElement> DynLayer<T> for AccuracyLayer {
    fn type_name(&self) -> &str {
        "Accuracy"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn tops(&self) -> Arity {
        Arity::range(1, 2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let (outer, classes, inner) = split(bottoms[0], self.axis, "accuracy")?;
        if self.top_k > classes {
            return Err(bad_param(
                "accuracy",
                format!(
                    "top_k {} must be at most the number of classes {classes}",
                    self.top_k
                ),
            ));
        }
        if bottoms[1].count() != outer * inner {
            return Err(bad_param(
                "accuracy",
                format!(
                    "Number of labels must match number of predictions: scores {}, labels {}",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string()
                ),
            ));
        }
        let mut shapes = vec![TopShape::new(Vec::new())];
        if tops.len() == 2 {
            shapes.push(TopShape::new(vec![classes]));
        }
        Ok(shapes)
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (outer, classes, inner) = split(bottoms[0], self.axis, "accuracy")?;
        let labels = bottoms[1].cpu_data()?;
        if labels.len() != outer * inner {
            return Err(bad_param(
                "accuracy",
                format!(
                    "the labels {} are not one per position ({})",
                    bottoms[1].shape_string(),
                    outer * inner
                ),
            ));
        }
        let s = bottoms[0].cpu_data()?;
        let (mut right, mut counted) = (0usize, 0usize);
        // Each class's positions and those right.
        let mut per_class = vec![(0usize, 0usize); classes];
        for (at, &label) in labels.iter().enumerate() {
            let label = label.to_f64();
            if self.ignore.is_some_and(|ig| label == ig as f64) {
                continue;
            }
            // A label no score stands for (SegNet's void class 11 of
            // 11, which its Accuracy layers do not ignore) counts as a
            // miss, as in Caffe's release builds.
            let in_range = label >= 0.0 && label.fract() == 0.0 && label < classes as f64;
            if !in_range {
                counted += 1;
                continue;
            }
            let c = label as usize;
            let (o, i) = (at / inner, at % inner);
            let score = |k: usize| s[(o * classes + k) * inner + i];
            let truth = score(c);
            let better = (0..classes)
                .filter(|&k| score(k) > truth || score(k).to_f64().is_nan())
                .count();
            let hit = usize::from(better < self.top_k);
            right += hit;
            counted += 1;
            per_class[c].0 += 1;
            per_class[c].1 += hit;
        }
        tops[0].mutable_cpu_data()?[0] = T::from_f64(right as f64 / counted.max(1) as f64);
        if let Some(top) = tops.get(1) {
            let mut shares = top.mutable_cpu_data()?;
            for (share, &(seen, hits)) in shares.iter_mut().zip(&per_class) {
                *share = match seen {
                    0 => T::ZERO,
                    n => T::from_f64(hits as f64 / n as f64),
                };
            }
        }
        Ok(())
    }

    /// Accuracy has no gradient (Caffe refuses one).
    fn backward(&mut self, _tops: &[&Blob<T>], down: &[bool], _bottoms: &[&Blob<T>]) -> Result<()> {
        if down.iter().any(|&d| d) {
            return Err(bad_param(
                "accuracy backward",
                "Accuracy has no backward pass",
            ));
        }
        Ok(())
    }

    fn allow_force_backward(&self, _bottom: usize) -> bool {
        false
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
