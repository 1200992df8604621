//! Caffe's `InfogainLoss`: SoftmaxWithLoss generalised by an
//! "information gain" matrix `H` that weighs every (label, class) pair
//! (the identity gives SoftmaxWithLoss), from a third bottom or a
//! `.binaryproto` file.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::{Normalization, loss_settings};
use crate::dyn_layer::{Arity, DynLayer, TopShape, axis_of, bad_param, sub_param};
use crate::layer::Result;

/// Caffe's `kLOG_THRESHOLD`.
const LOG_THRESHOLD: f64 = 1e-20;

/// Caffe `InfogainLoss`: scores, labels and (optionally) `H` of `K x K`;
/// `p = softmax(scores)` over `axis`, and the loss
/// `-sum over positions of sum_k H[label, k] log max(p_k, 1e-20)`,
/// normalized as `loss_param` says (VALID by default). A second top
/// receives `p`.
pub(crate) struct InfogainLossLayer<T: MathElement> {
    axis: i64,
    settings: (Normalization, Option<i64>),
    /// `infogain_loss_param.source`, read when no third bottom gives H.
    source: Option<String>,
    /// H from `source`, once read.
    from_file: Option<Vec<f64>>,
    prob: Blob<T>,
}

impl<T: MathElement> InfogainLossLayer<T> {
    /// Reads `infogain_loss_param` and `loss_param`; the older
    /// `normalize` is refused, as Caffe refuses it here.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        if sub_param(layer, "loss_param").has("normalize") {
            return Err(bad_param(
                "set up InfogainLoss",
                "normalize is deprecated. use \"normalization\"",
            ));
        }
        let p = sub_param(layer, "infogain_loss_param");
        Ok(Self {
            axis: p.int("axis"),
            settings: loss_settings(layer, Normalization::Valid),
            source: p.has("source").then(|| p.string("source").to_string()),
            from_file: None,
            prob: Blob::default(),
        })
    }

    /// `(outer, classes, inner)` of the scores split at `axis`.
    fn dims(&self, x: &Blob<T>) -> Result<(usize, usize, usize)> {
        let a = axis_of(x, self.axis, "InfogainLoss")?;
        let s = x.shape();
        Ok((s[..a].iter().product(), s[a], s[a + 1..].iter().product()))
    }

    /// H, `classes x classes`, from the third bottom or the file.
    fn infogain(&mut self, bottoms: &[&Blob<T>], classes: usize) -> Result<Vec<f64>> {
        let h = match bottoms.get(2) {
            Some(b) => b.cpu_data()?.iter().map(|v| v.to_f64()).collect(),
            None => {
                if self.from_file.is_none() {
                    let Some(source) = &self.source else {
                        return Err(bad_param(
                            "InfogainLoss",
                            "Infogain matrix source must be specified (infogain_loss_param.source), or H given as a third bottom",
                        ));
                    };
                    let blob = blob_runtime::read_blob_file::<f64>(source)?;
                    self.from_file = Some(blob.to_vec()?);
                }
                self.from_file.clone().unwrap_or_default()
            }
        };
        if h.len() != classes * classes {
            return Err(bad_param(
                "InfogainLoss",
                format!(
                    "H must be {classes}x{classes} for {classes} classes, not {} values",
                    h.len()
                ),
            ));
        }
        Ok(h)
    }

    /// Each position's label, `None` where it is the ignored one;
    /// checked against `classes`.
    fn labels(&self, labels: &Blob<T>, classes: usize) -> Result<Vec<Option<usize>>> {
        let ignore = self.settings.1;
        labels
            .cpu_data()?
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                // Caffe's static_cast<int>.
                let c = v.to_f64().trunc();
                if ignore.is_some_and(|ig| c == ig as f64) {
                    Ok(None)
                } else if c >= 0.0 && (c as usize) < classes {
                    Ok(Some(c as usize))
                } else {
                    Err(bad_param(
                        "InfogainLoss",
                        format!("label {i} is {c}, not a class index below {classes}"),
                    ))
                }
            })
            .collect()
    }

    /// The probabilities' blob: the second top where given.
    fn prob_of<'a>(&'a self, tops: &[&'a Blob<T>]) -> &'a Blob<T> {
        tops.get(1).copied().unwrap_or(&self.prob)
    }
}

impl<T: MathElement> DynLayer<T> for InfogainLossLayer<T> {
    fn type_name(&self) -> &str {
        "InfogainLoss"
    }

    fn bottoms(&self) -> Arity {
        Arity::range(2, 3)
    }

    fn tops(&self) -> Arity {
        Arity::range(1, 2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let (outer, classes, inner) = self.dims(bottoms[0])?;
        if bottoms[1].count() != outer * inner {
            return Err(bad_param(
                "InfogainLoss",
                format!(
                    "Number of labels must match number of predictions: scores {}, labels {}",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string()
                ),
            ));
        }
        if let Some(h) = bottoms.get(2)
            && h.count() != classes * classes
        {
            return Err(bad_param(
                "InfogainLoss",
                format!("H {} must be {classes}x{classes}", h.shape_string()),
            ));
        }
        let mut shapes = vec![TopShape::new(Vec::new())];
        if tops.len() == 2 {
            shapes.push(TopShape::new(bottoms[0].shape().to_vec()));
        }
        Ok(shapes)
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let dims @ (outer, classes, inner) = self.dims(bottoms[0])?;
        if tops.len() < 2 {
            crate::softmax::place_with(&mut self.prob, bottoms[0], bottoms[0].shape())?;
        }
        crate::softmax::forward(bottoms[0], self.prob_of(tops), dims)?;
        let h = self.infogain(bottoms, classes)?;
        let labels = self.labels(bottoms[1], classes)?;
        let p = self.prob_of(tops).cpu_data()?;
        let (mut loss, mut valid) = (0.0, 0);
        for (at, label) in labels.iter().enumerate() {
            let Some(label) = *label else { continue };
            let (o, i) = (at / inner, at % inner);
            for k in 0..classes {
                let pk = p[(o * classes + k) * inner + i].to_f64().max(LOG_THRESHOLD);
                loss -= h[label * classes + k] * pk.ln();
            }
            valid += 1;
        }
        drop(p);
        let divisor = self.settings.0.divisor(outer, inner, valid);
        tops[0].mutable_cpu_data()?[0] = T::from_f64(loss / divisor);
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        for (bottom, what) in [(1, "label"), (2, "infogain")] {
            if propagate_down.get(bottom) == Some(&true) {
                return Err(bad_param(
                    "loss backward",
                    format!("InfogainLoss Layer cannot backpropagate to {what} inputs."),
                ));
            }
        }
        if !propagate_down[0] {
            return Ok(());
        }
        let (outer, classes, inner) = self.dims(bottoms[0])?;
        let h = self.infogain(bottoms, classes)?;
        let row_sums: Vec<f64> = h.chunks(classes.max(1)).map(|r| r.iter().sum()).collect();
        let labels = self.labels(bottoms[1], classes)?;
        let p: Vec<f64> = self
            .prob_of(tops)
            .cpu_data()?
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let mut grads = vec![0.0; p.len()];
        let mut valid = 0;
        for (at, label) in labels.iter().enumerate() {
            let Some(label) = *label else { continue };
            let (o, i) = (at / inner, at % inner);
            for k in 0..classes {
                let j = (o * classes + k) * inner + i;
                grads[j] = p[j] * row_sums[label] - h[label * classes + k];
            }
            valid += 1;
        }
        let scale = tops[0].cpu_diff()?[0].to_f64() / self.settings.0.divisor(outer, inner, valid);
        for (d, g) in bottoms[0].mutable_cpu_diff()?.iter_mut().zip(grads) {
            *d = T::from_f64(g * scale);
        }
        Ok(())
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom == 0
    }

    fn is_loss(&self) -> bool {
        true
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
