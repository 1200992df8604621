//! Caffe's `MultinomialLogisticLoss`: `-log p[label]` over probabilities
//! given as input (a Softmax before it), floored at 1e-20.

use blob_runtime::{Blob, MathElement};

use super::{Loss, class_labels, num};
use crate::dyn_layer::bad_param;
use crate::layer::Result;

/// Caffe's `kLOG_THRESHOLD`: the smallest probability taken.
const LOG_THRESHOLD: f64 = 1e-20;

/// Caffe `MultinomialLogisticLoss`: probabilities `(N, K, ...)` and one
/// label per item; `-sum(log max(p[label], 1e-20)) / N`.
pub(crate) struct MultinomialLogisticLoss;

/// Each item's class, and how many values an item has.
fn items<T: MathElement>(bottoms: &[&Blob<T>]) -> Result<(Vec<usize>, usize)> {
    let n = num(bottoms[0]);
    let dim = bottoms[0].count() / n.max(1);
    Ok((
        class_labels(MultinomialLogisticLoss::TYPE, bottoms[1], n, dim)?,
        dim,
    ))
}

impl Loss for MultinomialLogisticLoss {
    const TYPE: &'static str = "MultinomialLogisticLoss";
    const BOTTOMS: usize = 2;
    const LABELS: Option<(usize, &'static str)> = Some((1, "label"));

    /// One label per item (Caffe checks the labels are `(N, 1, 1, 1)`).
    fn check_shapes<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<()> {
        if bottoms[1].count() == num(bottoms[0]) {
            return Ok(());
        }
        Err(bad_param(
            Self::TYPE,
            format!(
                "the labels {} must be one per item of {}",
                bottoms[1].shape_string(),
                bottoms[0].shape_string()
            ),
        ))
    }

    fn loss<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<f64> {
        let (labels, dim) = items(bottoms)?;
        let p = bottoms[0].cpu_data()?;
        let loss: f64 = labels
            .iter()
            .enumerate()
            .map(|(i, &c)| -p[i * dim + c].to_f64().max(LOG_THRESHOLD).ln())
            .sum();
        Ok(loss / labels.len().max(1) as f64)
    }

    fn gradients<T: MathElement>(
        &self,
        bottoms: &[&Blob<T>],
        weight: f64,
        _down: &[bool],
    ) -> Result<()> {
        let (labels, dim) = items(bottoms)?;
        let scale = -weight / labels.len().max(1) as f64;
        let p = bottoms[0].cpu_data()?.to_vec();
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        dx.fill(T::ZERO);
        for (i, &c) in labels.iter().enumerate() {
            let at = i * dim + c;
            dx[at] = T::from_f64(scale / p[at].to_f64().max(LOG_THRESHOLD));
        }
        Ok(())
    }
}
