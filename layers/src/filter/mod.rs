//! Caffe's Filter: the items whose selector is non-zero, of every data
//! bottom; the selector is the last bottom.

use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

/// Caffe `Filter`: bottoms `data_1..data_K` of `N` items and a selector
/// of `N` values; top `k` holds the items of `data_k` whose selector is
/// non-zero, in order (their number read at each reshape). Backward
/// gives the kept items their top's gradient and the others zero; the
/// selector takes none.
pub(crate) struct FilterLayer {
    /// How many bottoms the prototxt gives it: the last is the selector.
    bottoms: usize,
}

impl FilterLayer {
    /// Counts the layer's bottoms, to know its selector.
    pub(crate) fn from_param(layer: &blob_proto::ParamMessage) -> Self {
        Self {
            bottoms: layer.strings("bottom").count(),
        }
    }
}

/// The kept items' indices, from the selector (the last bottom).
fn kept<T: MathElement>(bottoms: &[&Blob<T>]) -> Result<Vec<usize>> {
    let selector = bottoms[bottoms.len() - 1];
    Ok(selector
        .cpu_data()?
        .iter()
        .enumerate()
        .filter(|(_, v)| v.to_f64() != 0.0)
        .map(|(i, _)| i)
        .collect())
}

/// The values of one item of `b`.
fn item_size<T: MathElement>(b: &Blob<T>) -> usize {
    b.count() / b.shape().first().copied().unwrap_or(1).max(1)
}

/// The GPU the layer runs on (its first data bottom's, where every other
/// blob is there too) and the kept items' numbers uploaded to it, for
/// BatchReindex's gathers.
#[cfg(feature = "cuda")]
fn on_gpu<T: MathElement>(
    bottoms: &[&Blob<T>],
    tops: &[&Blob<T>],
    keep: &[usize],
) -> Result<
    Option<(
        std::sync::Arc<blob_kernels::cuda::Gpu>,
        blob_kernels::cuda::cudarc::driver::CudaSlice<f32>,
    )>,
> {
    let others: Vec<(&str, &Blob<T>)> = bottoms[1..]
        .iter()
        .map(|b| ("bottom", *b))
        .chain(tops.iter().map(|t| ("output", *t)))
        .collect();
    let Some(gpu) = crate::gpu::gpu_for("Filter", bottoms[0], &others)? else {
        return Ok(None);
    };
    // BatchReindex's kernels read item numbers as f32, exact below 2^24:
    // a larger batch stays on the host, as does a pass that keeps no item
    // (nothing to upload, nothing to move).
    if keep.is_empty() || bottoms[0].shape().first().is_some_and(|&n| n > 1 << 24) {
        return Ok(None);
    }
    let index: Vec<f32> = keep.iter().map(|&i| i as f32).collect();
    let index = gpu.stream().clone_htod(&index).map_err(|e| {
        crate::gpu::cuda(
            "Filter on the GPU",
            blob_kernels::cuda::CudaError::driver("upload the kept items")(e),
        )
    })?;
    Ok(Some((gpu, index)))
}

impl<T: MathElement> DynLayer<T> for FilterLayer {
    fn type_name(&self) -> &str {
        "Filter"
    }

    fn bottoms(&self) -> Arity {
        Arity::range(2, usize::MAX)
    }

    fn tops(&self) -> Arity {
        Arity::range(1, usize::MAX)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let selector = bottoms[bottoms.len() - 1];
        let n = selector.shape().first().copied().unwrap_or(0);
        if tops.len() != bottoms.len() - 1 || item_size(selector) != 1 {
            return Err(bad_param(
                "Filter",
                format!(
                    "one top per data bottom ({} tops for {} data bottoms), and a selector of one value per item (it is {})",
                    tops.len(),
                    bottoms.len() - 1,
                    selector.shape_string()
                ),
            ));
        }
        let keep = kept(bottoms)?.len();
        bottoms[..bottoms.len() - 1]
            .iter()
            .map(|b| {
                if b.shape().first() != Some(&n) {
                    return Err(bad_param(
                        "Filter",
                        format!(
                            "a data bottom {} has another number of items than the selector {}",
                            b.shape_string(),
                            selector.shape_string()
                        ),
                    ));
                }
                let mut dims = b.shape().to_vec();
                dims[0] = keep;
                Ok(TopShape::new(dims))
            })
            .collect()
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let keep = kept(bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some((gpu, index)) = on_gpu(bottoms, tops, &keep)? {
            use crate::gpu::{as_f32, read, write};
            let index = index.as_view();
            for (b, t) in bottoms.iter().zip(tops) {
                let size = item_size(b);
                let (x, mut y) = (as_f32(*b).gpu_data()?, as_f32(*t).mutable_gpu_data()?);
                let views = (&index, &read(&x, b.count())?);
                let mut y = write(&mut y, keep.len() * size)?;
                crate::batch_reindex::cuda::forward(&gpu, (keep.len(), size), views, &mut y)?;
            }
            return Ok(());
        }
        for (b, t) in bottoms.iter().zip(tops) {
            let size = item_size(b);
            let x = b.cpu_data()?;
            let mut y = t.mutable_cpu_data()?;
            for (out, &item) in y.chunks_mut(size.max(1)).zip(&keep) {
                out.copy_from_slice(&x[item * size..][..size]);
            }
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if propagate_down.last() == Some(&true) {
            return Err(bad_param(
                "Filter backward",
                "Layer cannot backpropagate to filter index inputs",
            ));
        }
        let keep = kept(bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some((gpu, index)) = on_gpu(bottoms, tops, &keep)? {
            use crate::gpu::{as_f32, read, write};
            let index = index.as_view();
            for ((b, t), &down) in bottoms.iter().zip(tops).zip(propagate_down) {
                if !down {
                    continue;
                }
                let size = item_size(b);
                let (dy, mut dx) = (as_f32(*t).gpu_diff()?, as_f32(*b).mutable_gpu_diff()?);
                let sizes = (b.count() / size.max(1), keep.len(), size);
                let views = (&index, &read(&dy, keep.len() * size)?);
                let mut dx = write(&mut dx, b.count())?;
                crate::batch_reindex::cuda::backward(&gpu, sizes, views, &mut dx)?;
            }
            return Ok(());
        }
        for ((b, t), &down) in bottoms.iter().zip(tops).zip(propagate_down) {
            if !down {
                continue;
            }
            let size = item_size(b);
            let dy = t.cpu_diff()?;
            let mut dx = b.mutable_cpu_diff()?;
            dx.fill(T::ZERO);
            for (g, &item) in dy.chunks(size.max(1)).zip(&keep) {
                dx[item * size..][..size].copy_from_slice(g);
            }
        }
        Ok(())
    }

    /// The data bottoms may be forced; the selector may not.
    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom + 1 < self.bottoms
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
