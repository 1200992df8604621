//! Caffe's Softmax, SoftmaxWithLoss and Accuracy on typed `(B, C)` blobs.

#[cfg(feature = "cuda")]
mod cuda;

use std::marker::PhantomData;

use blob_kernels::cpu;
use blob_runtime::typed::{DimList, Rank2, Shape, TypedBlob};
use blob_runtime::{Blob, BlobError, MathElement};

use crate::layer::{ElementOf, Feeds, Layer, Result, expect_shape, same};
#[cfg(feature = "cuda")]
pub(crate) use cuda::SOFTMAX;
pub(crate) use loss::{AccuracyLayer, SoftmaxLossEngine, SoftmaxWithLossLayer};
pub(crate) use runtime::SoftmaxLayer;

mod loss;
mod runtime;

/// The labels of a `(B, C)` blob: `(B,)`, one class index per item, stored
/// as the element type (Caffe's label blobs).
pub type Labels<S> = (<<S as Shape>::Dims as DimList>::First,);

/// Caffe `Softmax` over the last axis of `S` = `(B, C)`.
///
/// ```
/// use blob_layers::{Layer, Softmax};
/// use blob_runtime::blob;
/// blob!(pub shape Scores = 1, 2);
/// let (x, p) = (<blob!(f32; 1, 2)>::new()?, <blob!(f32; 1, 2)>::new()?);
/// Softmax::<f32, Scores>::new().forward(&x, &p)?;
/// assert_eq!(p.to_vec()?, vec![0.5, 0.5]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct Softmax<T: MathElement, S: Shape>
where
    S::Dims: Rank2,
{
    _types: PhantomData<fn() -> (T, S)>,
}

impl<T: MathElement, S: Shape> Softmax<T, S>
where
    S::Dims: Rank2,
{
    /// The layer (it has no parameters).
    pub fn new() -> Self {
        Self {
            _types: PhantomData,
        }
    }
}

impl<T: MathElement, S: Shape> Default for Softmax<T, S>
where
    S::Dims: Rank2,
{
    fn default() -> Self {
        Self::new()
    }
}

fn softmax_rows<T: MathElement>(x: &[T], prob: &mut [T], classes: usize) {
    for (row, out) in x.chunks_exact(classes).zip(prob.chunks_exact_mut(classes)) {
        let max =
            row.iter().copied().fold(
                T::from_f64(f64::NEG_INFINITY),
                |a, b| if b > a { b } else { a },
            );
        for (o, &v) in out.iter_mut().zip(row) {
            *o = (v - max).exp();
        }
        let sum: T = out.iter().copied().sum();
        cpu::scal(T::ONE / sum, out);
    }
}

fn check_rank2<T: MathElement>(op: &'static str, x: &Blob<T>) -> Result<usize> {
    if x.num_axes() != 2 {
        return Err(BlobError::ShapeMismatch {
            op,
            src: x.shape_string(),
            dst: "(B, C)".into(),
        });
    }
    Ok(x.shape()[1])
}

impl<T: MathElement, S: Shape> Layer for Softmax<T, S>
where
    S::Dims: Rank2,
{
    type Elem = T;
    type Input = S;
    type Output = S;
    const TYPE: &'static str = "Softmax";
    const IN_PLACE: bool = true;

    fn forward_blobs(&mut self, x: &Blob<T>, prob: &Blob<T>) -> Result<()> {
        let classes = check_rank2("softmax", x)?;
        expect_shape("write softmax output", prob, x.shape())?;
        forward(x, prob, (x.shape()[0], classes, 1))
    }

    /// `dx = p * (dp - sum(dp * p))` per row.
    fn backward_blobs(&mut self, x: &Blob<T>, prob: &Blob<T>, propagate_down: bool) -> Result<()> {
        let classes = check_rank2("softmax backward", x)?;
        expect_shape("softmax backward", prob, x.shape())?;
        if !propagate_down {
            return Ok(());
        }
        backward(x, prob, (x.shape()[0], classes, 1))
    }
}

/// `prob = softmax(x)` over the `classes` values of each of `outer x
/// inner` positions (element `(o, c, i)` at `(o * classes + c) * inner +
/// i`), on the device `x` lives on; in place or not. What the typed
/// [`Softmax`] and the run-time [`SoftmaxLayer`] both run.
pub(crate) fn forward<T: MathElement>(
    x: &Blob<T>,
    prob: &Blob<T>,
    (outer, classes, inner): (usize, usize, usize),
) -> Result<()> {
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::gpu::gpu_of_all(&[x, prob]) {
        use crate::gpu::as_f32;
        return cuda::forward(&gpu, (outer, classes, inner), as_f32(x), as_f32(prob));
    }
    debug_assert_eq!(x.count(), outer * classes * inner);
    if std::ptr::eq(x, prob) {
        let input = x.to_vec()?;
        softmax_positions(&input, &mut prob.mutable_cpu_data()?, classes, inner);
    } else {
        softmax_positions(
            &x.cpu_data()?,
            &mut prob.mutable_cpu_data()?,
            classes,
            inner,
        );
    }
    Ok(())
}

/// `dx = p * (dp - sum(dp * p))` per position, as [`forward`].
pub(crate) fn backward<T: MathElement>(
    x: &Blob<T>,
    prob: &Blob<T>,
    (outer, classes, inner): (usize, usize, usize),
) -> Result<()> {
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::gpu::gpu_of_all(&[x, prob]) {
        use crate::gpu::as_f32;
        return cuda::backward(&gpu, (outer, classes, inner), as_f32(x), as_f32(prob));
    }
    debug_assert_eq!(x.count(), outer * classes * inner);
    let p = prob.to_vec()?;
    let dp = prob.diff_to_vec()?;
    let mut dx = x.mutable_cpu_diff()?;
    let block = classes * inner;
    for ((p, dp), dx) in p
        .chunks_exact(block)
        .zip(dp.chunks_exact(block))
        .zip(dx.chunks_exact_mut(block))
    {
        for i in 0..inner {
            let dot =
                (0..classes).fold(T::ZERO, |acc, c| acc + p[c * inner + i] * dp[c * inner + i]);
            for c in 0..classes {
                let at = c * inner + i;
                dx[at] = p[at] * (dp[at] - dot);
            }
        }
    }
    Ok(())
}

/// Softmax over strided classes (`inner` apart); rows when `inner` is 1.
fn softmax_positions<T: MathElement>(x: &[T], prob: &mut [T], classes: usize, inner: usize) {
    if inner == 1 {
        return softmax_rows(x, prob, classes);
    }
    let block = classes * inner;
    for (row, out) in x.chunks_exact(block).zip(prob.chunks_exact_mut(block)) {
        for i in 0..inner {
            let max = (0..classes).fold(T::from_f64(f64::NEG_INFINITY), |a, c| {
                let b = row[c * inner + i];
                if b > a { b } else { a }
            });
            let mut sum = T::ZERO;
            for c in 0..classes {
                let e = (row[c * inner + i] - max).exp();
                out[c * inner + i] = e;
                sum += e;
            }
            let inv = T::ONE / sum;
            for c in 0..classes {
                out[c * inner + i] *= inv;
            }
        }
    }
}

/// Makes `blob` a blob of `shape` on the device `like` lives on (the
/// host, if none), keeping it where it already is.
pub(crate) fn place_with<T: MathElement>(
    blob: &mut Blob<T>,
    like: &Blob<T>,
    shape: &[usize],
) -> Result<()> {
    let same_place = match (blob.device(), like.device()) {
        (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    };
    if !same_place {
        *blob = match like.device() {
            Some(device) => Blob::with_device(shape, device.clone())?,
            None => Blob::new(shape)?,
        };
    }
    // A default blob has no axes and no values; `shape` [] is one value.
    if blob.shape() != shape || blob.count() != shape.iter().product::<usize>() {
        blob.reshape(shape)?;
    }
    Ok(())
}

/// Caffe `SoftmaxWithLoss` (normalization VALID): the mean of
/// `-log(max(prob[label], FLT_MIN))` over the batch; backward writes
/// `(prob - onehot) / B` into the logits' diff.
///
/// ```
/// use blob_layers::SoftmaxWithLoss;
/// use blob_runtime::blob;
/// let x = <blob!(f32; 1, 2)>::new()?;
/// let labels = <blob!(f32; 1)>::new()?;
/// labels.mutable_cpu_data()?[0] = 1.0;
/// blob!(pub shape Scores = 1, 2);
/// let mut loss = SoftmaxWithLoss::<f32, Scores>::new();
/// loss.forward(&x, &labels)?;
/// loss.backward(&x, &labels)?;
/// assert!((loss.value()? - std::f32::consts::LN_2).abs() < 1e-6);
/// assert_eq!(x.to_vec()?.len(), 2);
/// assert_eq!(x.diff_to_vec()?, vec![0.5, -0.5]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct SoftmaxWithLoss<T: MathElement, S: Shape>
where
    S::Dims: Rank2,
{
    _types: PhantomData<fn() -> S>,
    prob: Blob<T>,
    /// The mean loss of the last forward pass, one value (Caffe's top
    /// blob), where the logits live: on a GPU it is read only when asked
    /// for.
    loss: Blob<T>,
    engine: SoftmaxLossEngine,
}

impl<T: MathElement, S: Shape> SoftmaxWithLoss<T, S>
where
    S::Dims: Rank2,
{
    /// The loss layer.
    pub fn new() -> Self {
        Self {
            _types: PhantomData,
            prob: Blob::default(),
            loss: Blob::default(),
            engine: SoftmaxLossEngine::default(),
        }
    }

    /// The class probabilities of the last forward pass.
    pub fn prob(&self) -> &Blob<T> {
        &self.prob
    }

    /// The mean loss of the last forward pass (Caffe: the layer's top
    /// blob, `top[0]->cpu_data()[0]`). On a GPU this is where the host
    /// waits for the device: a training loop that reads it only now and
    /// then runs ahead of the GPU in between.
    ///
    /// ```
    /// use blob_layers::SoftmaxWithLoss;
    /// use blob_runtime::blob;
    /// blob!(pub shape Scores = 2, 4);
    /// let loss = SoftmaxWithLoss::<f32, Scores>::new();
    /// assert_eq!(loss.value()?, 0.0); // no forward pass yet
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn value(&self) -> Result<T> {
        if self.loss.count() == 0 {
            return Ok(T::ZERO);
        }
        Ok(self.loss.cpu_data()?[0])
    }

    /// The loss of `logits` against `labels`, kept for
    /// [`value`](Self::value) (Caffe `Forward`).
    pub fn forward<U, X, L>(
        &mut self,
        logits: &TypedBlob<U, X>,
        labels: &TypedBlob<U, L>,
    ) -> Result<()>
    where
        U: ElementOf<Softmax<T, S>>,
        X: Feeds<Softmax<T, S>>,
        L: Shape<Dims = Labels<S>>,
    {
        let (logits, labels) = (same::<U, T>(logits.as_dyn()), same::<U, T>(labels.as_dyn()));
        // The probabilities and the loss live where the logits do.
        place_with(&mut self.prob, logits, logits.shape())?;
        place_with(&mut self.loss, logits, &[])?;
        expect_shape("softmax loss labels", labels, &[logits.shape()[0]])?;
        let dims = (logits.shape()[0], logits.shape()[1], 1);
        self.engine
            .forward(dims, logits, labels, &self.prob, &self.loss)
    }

    /// `(prob - onehot) / B` into the logits' diff (Caffe `Backward`).
    pub fn backward<U, X, L>(
        &mut self,
        logits: &TypedBlob<U, X>,
        labels: &TypedBlob<U, L>,
    ) -> Result<()>
    where
        U: ElementOf<Softmax<T, S>>,
        X: Feeds<Softmax<T, S>>,
        L: Shape<Dims = Labels<S>>,
    {
        let (logits, labels) = (same::<U, T>(logits.as_dyn()), same::<U, T>(labels.as_dyn()));
        expect_shape("softmax loss backward", &self.prob, logits.shape())?;
        let dims = (logits.shape()[0], logits.shape()[1], 1);
        self.engine
            .backward(dims, logits, labels, &self.prob, T::ONE)
    }
}

impl<T: MathElement, S: Shape> Default for SoftmaxWithLoss<T, S>
where
    S::Dims: Rank2,
{
    fn default() -> Self {
        Self::new()
    }
}

/// Caffe `Accuracy` (`top_k` 1): the share of items whose label's score
/// no other class beats (Caffe counts ties as right).
///
/// ```
/// use blob_layers::accuracy;
/// use blob_runtime::blob;
/// let scores = <blob!(f32; 2, 3)>::new()?;
/// scores.mutable_cpu_data()?.copy_from_slice(&[0.1, 0.7, 0.2, 0.5, 0.3, 0.2]);
/// let labels = <blob!(f32; 2)>::new()?;
/// labels.mutable_cpu_data()?.copy_from_slice(&[1.0, 1.0]);
/// assert_eq!(accuracy(&scores, &labels)?, 0.5);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn accuracy<T, S, L>(scores: &TypedBlob<T, S>, labels: &TypedBlob<T, L>) -> Result<f64>
where
    T: MathElement,
    S: Shape,
    S::Dims: Rank2,
    L: Shape<Dims = Labels<S>>,
{
    let classes = check_rank2("accuracy", scores)?;
    let rows = scores.shape()[0];
    let items = loss::classes_of("accuracy", labels, classes, rows, None)?;
    let s = scores.cpu_data()?;
    let right = items
        .iter()
        .enumerate()
        .filter(|&(i, c)| {
            let row = &s[i * classes..][..classes];
            c.is_some_and(|c| !row.iter().any(|&v| v > row[c]))
        })
        .count();
    Ok(right as f64 / items.len().max(1) as f64)
}
