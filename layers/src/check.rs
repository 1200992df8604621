//! Caffe's `GradientChecker`: a layer's backward pass held to central
//! differences of its forward pass, for every input value and every
//! parameter, the way to test a layer you write.

use blob_runtime::{Blob, BlobError, MathElement, Result};

use crate::dyn_layer::{DynLayer, Sharing};

/// Checks a [`DynLayer`]'s gradients against central differences of the
/// objective `L = sum_i c_i y_i` over its tops, with fixed non-zero
/// coefficients `c` (Caffe's `GradientChecker` with its default
/// objective): for each input and parameter value `v`, the analytic
/// `dL/dv` from [`DynLayer::backward`] must be within `threshold` of
/// `(L(v + step) - L(v - step)) / (2 step)`, relative to
/// `max(1, |analytic|, |numeric|)`.
///
/// Bottoms the layer says `force_backward` may not reach (a loss's
/// labels) are neither perturbed nor asked for a gradient, nor are the
/// blobs of a layer whose blobs no solver learns (BatchNorm's
/// statistics).
///
/// Choose inputs away from a layer's kinks (ReLU at 0, MAX pooling ties),
/// where the two differ by design. For `f32` layers Caffe uses step
/// `1e-2` and threshold `1e-3` (the defaults); `f64` checks can be far
/// tighter.
///
/// ```
/// use blob_layers::{check::GradientChecker, registry::LayerRegistry};
/// use blob_proto::{ParamMessage, TextMessage, schema};
/// let text = TextMessage::parse(r#"name: "ip" type: "InnerProduct"
///     inner_product_param { num_output: 3 weight_filler { type: "gaussian" } bias_filler { type: "gaussian" } }"#)?;
/// let param = ParamMessage::from_text(&schema::LAYER_PARAMETER, &text)?;
/// let mut layer = LayerRegistry::<f64>::with_caffe_layers().build("InnerProduct", &param)?;
/// let x = blob_runtime::Blob::<f64>::new(&[2, 4])?;
/// blob_kernels::cpu::gaussian(0.0, 1.0, &mut x.mutable_cpu_data()?).unwrap();
/// let checker = GradientChecker { step: 1e-4, threshold: 1e-6 };
/// let report = checker.check(layer.as_mut(), &[x])?;
/// assert_eq!(report.checked, 8 + 12 + 3); // inputs, weights, bias
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradientChecker {
    /// The step of the central differences.
    pub step: f64,
    /// The largest relative difference accepted.
    pub threshold: f64,
}

impl Default for GradientChecker {
    fn default() -> Self {
        Self {
            step: 1e-2,
            threshold: 1e-3,
        }
    }
}

/// What a [`GradientChecker::check`] compared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradientReport {
    /// How many values (inputs and parameters) were checked.
    pub checked: usize,
    /// The largest relative difference seen.
    pub worst: f64,
}

/// The objective's coefficient of top `t`'s value `i`: fixed, non-zero,
/// of either sign.
fn coefficient(t: usize, i: usize) -> f64 {
    let h = (i as u64 * 2_654_435_761 + t as u64 * 40_503) % 1_000;
    let v = 0.25 + h as f64 / 1_000.0;
    if (i + t).is_multiple_of(3) { -v } else { v }
}

impl GradientChecker {
    /// Runs the check on `layer` with inputs `bottoms` (their values are
    /// restored; their diffs hold the analytic gradients afterwards). An
    /// error names the first value whose gradients differ.
    pub fn check<T: MathElement>(
        &self,
        layer: &mut dyn DynLayer<T>,
        bottoms: &[Blob<T>],
    ) -> Result<GradientReport> {
        let tops = layer.tops().min.max(1);
        self.check_with_tops(layer, bottoms, tops)
    }

    /// [`check`](Self::check) for a layer given `top_count` tops (a Split
    /// with three, say).
    pub fn check_with_tops<T: MathElement>(
        &self,
        layer: &mut dyn DynLayer<T>,
        bottoms: &[Blob<T>],
        top_count: usize,
    ) -> Result<GradientReport> {
        let mut tops: Vec<Blob<T>> = Vec::new();
        let bottom_refs: Vec<&Blob<T>> = bottoms.iter().collect();
        tops.resize_with(top_count, Blob::default);
        let shapes = {
            let top_refs: Vec<&Blob<T>> = tops.iter().collect();
            layer.reshape(&bottom_refs, &top_refs)?
        };
        for (top, shape) in tops.iter_mut().zip(&shapes) {
            top.reshape(&shape.dims)?;
            if let Some((b, sharing)) = shape.shares {
                top.share_data(&bottoms[b])?;
                if sharing == Sharing::DataAndDiff {
                    top.share_diff(&bottoms[b])?;
                }
            }
        }
        let top_refs: Vec<&Blob<T>> = tops.iter().collect();
        let objective = |layer: &mut dyn DynLayer<T>| -> Result<f64> {
            layer.forward(&bottom_refs, &top_refs)?;
            let mut sum = 0.0;
            for (t, top) in top_refs.iter().enumerate() {
                for (i, v) in top.cpu_data()?.iter().enumerate() {
                    sum += coefficient(t, i) * v.to_f64();
                }
            }
            Ok(sum)
        };

        objective(layer)?;
        // Diffs cleared before the tops' are set: a top may view its
        // bottom's diff (Flatten, Reshape).
        for b in bottoms {
            b.clear_diff()?;
        }
        for p in layer.blobs() {
            p.clear_diff()?;
        }
        for (t, top) in top_refs.iter().enumerate() {
            for (i, d) in top.mutable_cpu_diff()?.iter_mut().enumerate() {
                *d = T::from_f64(coefficient(t, i));
            }
        }
        // Labels and the like (a bottom that force_backward may not
        // reach) have no gradient: neither asked for nor checked.
        let down: Vec<bool> = (0..bottoms.len())
            .map(|b| layer.allow_force_backward(b))
            .collect();
        layer.backward(&top_refs, &down, &bottom_refs)?;
        let analytic_bottoms: Vec<Vec<T>> = bottoms
            .iter()
            .map(Blob::diff_to_vec)
            .collect::<Result<_>>()?;
        let analytic_params: Vec<Vec<T>> = layer
            .blobs()
            .iter()
            .map(Blob::diff_to_vec)
            .collect::<Result<_>>()?;

        let mut report = GradientReport {
            checked: 0,
            worst: 0.0,
        };
        let step = T::from_f64(self.step);
        let mut compare = |what: String, analytic: f64, plus: f64, minus: f64| -> Result<()> {
            let numeric = (plus - minus) / (2.0 * self.step);
            let scale = analytic.abs().max(numeric.abs()).max(1.0);
            let off = (analytic - numeric).abs() / scale;
            report.checked += 1;
            report.worst = report.worst.max(off);
            if off > self.threshold {
                return Err(BlobError::InvalidParameter {
                    op: "check gradients",
                    detail: format!(
                        "{what}: backward gives {analytic:e}, central differences {numeric:e} (relative difference {off:e} > {:e})",
                        self.threshold
                    ),
                });
            }
            Ok(())
        };
        // Two nudges of one value: L(v + step), L(v - step), v restored.
        let nudge = |layer: &mut dyn DynLayer<T>, blob: &Blob<T>, i: usize| -> Result<(f64, f64)> {
            let v = blob.cpu_data()?[i];
            blob.mutable_cpu_data()?[i] = v + step;
            let plus = objective(layer)?;
            blob.mutable_cpu_data()?[i] = v - step;
            let minus = objective(layer)?;
            blob.mutable_cpu_data()?[i] = v;
            Ok((plus, minus))
        };
        for (b, (blob, analytic)) in bottoms.iter().zip(&analytic_bottoms).enumerate() {
            if !down[b] {
                continue;
            }
            for (i, a) in analytic.iter().enumerate() {
                let (plus, minus) = nudge(layer, blob, i)?;
                compare(format!("bottom {b} value {i}"), a.to_f64(), plus, minus)?;
            }
        }
        // Blobs no solver learns (BatchNorm's statistics) have no
        // gradient to check.
        for (p, analytic) in analytic_params.iter().enumerate() {
            if !layer.learns_param(p) {
                continue;
            }
            for (i, a) in analytic.iter().enumerate() {
                // The layer holds the blob: nudge it through a view.
                let mut view = Blob::<T>::default();
                view.reshape(layer.blobs()[p].shape())?;
                view.share_data(&layer.blobs()[p])?;
                let (plus, minus) = nudge(layer, &view, i)?;
                compare(format!("param {p} value {i}"), a.to_f64(), plus, minus)?;
            }
        }
        Ok(report)
    }
}
