//! Caffe's BatchReindex: a new batch of the input's items, in the order
//! (and with the repeats) a second bottom of indices gives.

#[cfg(feature = "cuda")]
pub(crate) mod cuda;

#[cfg(feature = "cuda")]
pub(crate) use cuda::BATCH_REINDEX;

use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, indices_below};
use crate::layer::Result;

/// Caffe `BatchReindex`: data `(N, ...)` and `M` indices below `N`
/// in; `(M, ...)` out, item `i` being item `index[i]`. Backward adds each
/// copy's gradient to its item; none to the indices.
pub(crate) struct BatchReindexLayer;

/// The indices, checked against the batch, and an item's size.
fn reindex<T: MathElement>(bottoms: &[&Blob<T>]) -> Result<(Vec<usize>, usize)> {
    let n = bottoms[0].shape().first().copied().unwrap_or(0);
    let inner = bottoms[0].count() / n.max(1);
    let index = indices_below("BatchReindex", bottoms[1], n, |i, v| {
        format!("index {i} is {v}, not an item of the batch of {n}")
    })?;
    Ok((index, inner))
}

/// The GPU the layer runs on: its data's, where its indices and output
/// are there too.
#[cfg(feature = "cuda")]
fn gpu<T: MathElement>(
    bottoms: &[&Blob<T>],
    y: &Blob<T>,
) -> Result<Option<std::sync::Arc<blob_kernels::cuda::Gpu>>> {
    crate::gpu::gpu_for(
        "BatchReindex",
        bottoms[0],
        &[("indices", bottoms[1]), ("output", y)],
    )
}

impl<T: MathElement> DynLayer<T> for BatchReindexLayer {
    fn type_name(&self) -> &str {
        "BatchReindex"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let (x, index) = (bottoms[0], bottoms[1]);
        if x.shape().is_empty() || index.shape().len() != 1 {
            return Err(bad_param(
                "BatchReindex",
                format!(
                    "the data {} must have a batch axis and the indices {} one axis",
                    x.shape_string(),
                    index.shape_string()
                ),
            ));
        }
        let mut dims = x.shape().to_vec();
        dims[0] = index.count();
        Ok(vec![TopShape::new(dims)])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (index, inner) = reindex(bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = gpu(bottoms, tops[0])? {
            use crate::gpu::{as_f32, read, write};
            let picks = index.len();
            let (index, x, mut y) = (
                as_f32(bottoms[1]).gpu_data()?,
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(tops[0]).mutable_gpu_data()?,
            );
            let views = (&read(&index, picks)?, &read(&x, bottoms[0].count())?);
            return cuda::forward(
                &gpu,
                (picks, inner),
                views,
                &mut write(&mut y, picks * inner)?,
            );
        }
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        for (out, &item) in y.chunks_mut(inner.max(1)).zip(&index) {
            out.copy_from_slice(&x[item * inner..][..inner]);
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if propagate_down.get(1) == Some(&true) {
            return Err(bad_param(
                "BatchReindex backward",
                "Cannot backprop to index.",
            ));
        }
        if !propagate_down[0] {
            return Ok(());
        }
        let (index, inner) = reindex(bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = gpu(bottoms, tops[0])? {
            use crate::gpu::{as_f32, read, write};
            let (picks, n) = (index.len(), bottoms[0].count());
            let (index, dy, mut dx) = (
                as_f32(bottoms[1]).gpu_data()?,
                as_f32(tops[0]).gpu_diff()?,
                as_f32(bottoms[0]).mutable_gpu_diff()?,
            );
            let sizes = (n / inner.max(1), picks, inner);
            let views = (&read(&index, picks)?, &read(&dy, picks * inner)?);
            return cuda::backward(&gpu, sizes, views, &mut write(&mut dx, n)?);
        }
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        dx.fill(T::ZERO);
        for (g, &item) in dy.chunks(inner.max(1)).zip(&index) {
            for (d, &v) in dx[item * inner..][..inner].iter_mut().zip(g) {
                *d += v;
            }
        }
        Ok(())
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom == 0
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
