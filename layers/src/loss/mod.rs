//! Caffe's loss layers besides SoftmaxWithLoss (which lives with
//! Softmax): EuclideanLoss, SigmoidCrossEntropyLoss, HingeLoss,
//! ContrastiveLoss, MultinomialLogisticLoss and InfogainLoss, and what every loss
//! shares: `LossParameter`'s normalization, the scalar top, the loss
//! weight that arrives as the top's diff. EuclideanLoss,
//! SigmoidCrossEntropyLoss and ContrastiveLoss have CUDA sides
//! (`loss.cu`), as in Caffe; the others run on the host, as Caffe runs
//! them, and with their blobs on a GPU the blobs' heads move them.

mod contrastive;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod euclidean;
mod hinge;
mod infogain;
mod multinomial_logistic;
mod sigmoid_cross_entropy;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

pub(crate) use contrastive::ContrastiveLoss;
pub(crate) use euclidean::EuclideanLoss;
pub(crate) use hinge::HingeLoss;
pub(crate) use infogain::InfogainLossLayer;
pub(crate) use multinomial_logistic::MultinomialLogisticLoss;
pub(crate) use sigmoid_cross_entropy::SigmoidCrossEntropyLoss;

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, indices_below, sub_param};
use crate::layer::Result;

/// What one of Caffe's losses computes; [`LossLayer`] gives it the rest
/// of Caffe's `LossLayer`: the scalar top, the check that data and
/// labels agree on the first axis, the loss weight, and the refusal of a
/// gradient to the labels.
pub(crate) trait Loss: Send + 'static {
    /// Caffe's type name.
    const TYPE: &'static str;
    /// How many bottoms it reads.
    const BOTTOMS: usize;
    /// The bottom that takes no gradient, and what Caffe calls it.
    const LABELS: Option<(usize, &'static str)>;

    /// Refuses bottoms whose shapes do not fit, naming them.
    fn check_shapes<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<()>;

    /// The loss.
    fn loss<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<f64>;

    /// The gradients, times `weight`, into the diffs of the bottoms
    /// `down` asks for (never the labels).
    fn gradients<T: MathElement>(
        &self,
        bottoms: &[&Blob<T>],
        weight: f64,
        down: &[bool],
    ) -> Result<()>;

    /// The loss on `gpu` into `top`'s one value, its blobs all there;
    /// `None` for a loss without a CUDA side (the host computes it).
    #[cfg(feature = "cuda")]
    fn loss_on_gpu(
        &self,
        _gpu: &blob_kernels::cuda::Gpu,
        _scratch: &mut cuda::LossScratch,
        _bottoms: &[&Blob<f32>],
        _top: &Blob<f32>,
    ) -> Option<Result<()>> {
        None
    }

    /// [`gradients`](Self::gradients) on `gpu`, after
    /// [`loss_on_gpu`](Self::loss_on_gpu); `None` without a CUDA side.
    #[cfg(feature = "cuda")]
    fn gradients_on_gpu(
        &self,
        _gpu: &blob_kernels::cuda::Gpu,
        _scratch: &cuda::LossScratch,
        _bottoms: &[&Blob<f32>],
        _weight: f64,
        _down: &[bool],
    ) -> Option<Result<()>> {
        None
    }
}

/// A [`Loss`] as a run-time layer.
pub(crate) struct LossLayer<L> {
    loss: L,
    /// The CUDA side's runs and totals, kept from pass to pass.
    #[cfg(feature = "cuda")]
    scratch: cuda::LossScratch,
}

impl<L: Loss> LossLayer<L> {
    pub(crate) fn new(loss: L) -> Self {
        Self {
            loss,
            #[cfg(feature = "cuda")]
            scratch: cuda::LossScratch::default(),
        }
    }

    /// The GPU all of the layer's blobs live on, when they are `f32`
    /// there and the loss has a CUDA side to run.
    #[cfg(feature = "cuda")]
    fn gpu<T: MathElement>(
        bottoms: &[&Blob<T>],
        top: &Blob<T>,
    ) -> Option<std::sync::Arc<blob_kernels::cuda::Gpu>> {
        // The bottoms on one GPU, and the top beside the first: no list
        // built on every pass of a host net.
        crate::gpu::gpu_of_all(bottoms)?;
        crate::gpu::gpu_of_all(&[bottoms[0], top])
    }
}

impl<T: MathElement, L: Loss> DynLayer<T> for LossLayer<L> {
    fn type_name(&self) -> &str {
        L::TYPE
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(L::BOTTOMS)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let shapes = scalar_loss(L::TYPE, bottoms[0], bottoms[1])?;
        self.loss.check_shapes(bottoms)?;
        Ok(shapes)
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = Self::gpu(bottoms, tops[0]) {
            let bottoms: Vec<&Blob<f32>> = bottoms.iter().map(|b| crate::gpu::as_f32(b)).collect();
            let top = crate::gpu::as_f32(tops[0]);
            if let Some(done) = self
                .loss
                .loss_on_gpu(&gpu, &mut self.scratch, &bottoms, top)
            {
                return done;
            }
        }
        tops[0].mutable_cpu_data()?[0] = T::from_f64(self.loss.loss(bottoms)?);
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if let Some((labels, what)) = L::LABELS
            && propagate_down.get(labels) == Some(&true)
        {
            return Err(bad_param(
                "loss backward",
                format!("{} Layer cannot backpropagate to {what} inputs.", L::TYPE),
            ));
        }
        if !propagate_down.iter().any(|&d| d) {
            return Ok(());
        }
        // The net sets the scalar top's diff to the loss weight.
        let weight = tops[0].cpu_diff()?[0].to_f64();
        #[cfg(feature = "cuda")]
        if let Some(gpu) = Self::gpu(bottoms, tops[0]) {
            let bottoms: Vec<&Blob<f32>> = bottoms.iter().map(|b| crate::gpu::as_f32(b)).collect();
            if let Some(done) =
                self.loss
                    .gradients_on_gpu(&gpu, &self.scratch, &bottoms, weight, propagate_down)
            {
                return done;
            }
        }
        self.loss.gradients(bottoms, weight, propagate_down)
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        L::LABELS.is_none_or(|(labels, _)| bottom != labels)
    }

    fn is_loss(&self) -> bool {
        true
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}

/// Refuses two bottoms of different counts with Caffe's `message`.
pub(crate) fn same_count<T: MathElement>(
    kind: &'static str,
    message: &str,
    a: &Blob<T>,
    b: &Blob<T>,
) -> Result<()> {
    if a.count() == b.count() {
        return Ok(());
    }
    Err(bad_param(
        kind,
        format!("{message}: {} and {}", a.shape_string(), b.shape_string()),
    ))
}

/// `a - b`, value by value, in f64.
pub(crate) fn difference<T: MathElement>(a: &Blob<T>, b: &Blob<T>) -> Result<Vec<f64>> {
    let (a, b) = (a.cpu_data()?, b.cpu_data()?);
    Ok(a.iter()
        .zip(b.iter())
        .map(|(&x, &y)| x.to_f64() - y.to_f64())
        .collect())
}

/// How the summed loss is divided (Caffe's `LossParameter.normalization`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Normalization {
    /// By every position, ignored ones included.
    Full,
    /// By the positions whose label is not ignored.
    Valid,
    /// By the outer count (the batch).
    BatchSize,
    /// Not at all.
    None,
}

impl Normalization {
    /// The divisor for `outer` items of `inner` positions, `valid` of
    /// them not ignored; at least 1, as Caffe's `get_normalizer`.
    pub(crate) fn divisor(self, outer: usize, inner: usize, valid: usize) -> f64 {
        let n = match self {
            Self::Full => outer * inner,
            Self::Valid => valid,
            Self::BatchSize => outer,
            Self::None => 1,
        };
        (n as f64).max(1.0)
    }
}

/// `LossParameter`'s normalization and ignored label. Caffe's layers
/// differ in the mode taken when neither `normalization` nor the older
/// `normalize` is given: SoftmaxWithLoss takes the field's default,
/// VALID; SigmoidCrossEntropyLoss BATCH_SIZE.
pub(crate) fn loss_settings(
    layer: &ParamMessage,
    unset: Normalization,
) -> (Normalization, Option<i64>) {
    let p = sub_param(layer, "loss_param");
    let mode = if p.has("normalization") {
        match p.enum_name("normalization") {
            "FULL" => Normalization::Full,
            "BATCH_SIZE" => Normalization::BatchSize,
            "NONE" => Normalization::None,
            _ => Normalization::Valid,
        }
    } else if p.has("normalize") {
        if p.boolean("normalize") {
            Normalization::Valid
        } else {
            Normalization::BatchSize
        }
    } else {
        unset
    };
    (mode, p.has("ignore_label").then(|| p.int("ignore_label")))
}

/// Caffe's `LossLayer::Reshape`: the data and the labels agree on the
/// first axis, and the loss is a scalar.
pub(crate) fn scalar_loss<T: MathElement>(
    op: &'static str,
    data: &Blob<T>,
    labels: &Blob<T>,
) -> Result<Vec<TopShape>> {
    let num = |b: &Blob<T>| b.shape().first().copied().unwrap_or(1);
    if num(data) != num(labels) {
        return Err(bad_param(
            op,
            format!(
                "The data and label should have the same number: {} and {}",
                data.shape_string(),
                labels.shape_string()
            ),
        ));
    }
    Ok(vec![TopShape::new(Vec::new())])
}

/// The first axis of `b` (Caffe's `num()`), at least 1 as a divisor.
pub(crate) fn num<T: MathElement>(b: &Blob<T>) -> usize {
    b.shape().first().copied().unwrap_or(1)
}

/// Each item's class from `labels` (one per item), checked against
/// `classes`; errors name the item and the value.
pub(crate) fn class_labels<T: MathElement>(
    op: &'static str,
    labels: &Blob<T>,
    items: usize,
    classes: usize,
) -> Result<Vec<usize>> {
    if labels.count() != items {
        return Err(bad_param(
            op,
            format!(
                "the labels {} are not one per item ({items})",
                labels.shape_string()
            ),
        ));
    }
    indices_below(op, labels, classes, |i, c| {
        format!("label {i} is {c}, not a class index below {classes}")
    })
}
