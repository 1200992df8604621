//! The user's own layer of the `user_layer` example, `ChannelScale`:
//! `y[b, c] = x[b, c] * gamma[c]` with `gamma` learned (Caffe's Scale
//! with one axis and no bias, written from scratch as a user would). A
//! run-time layer (`DynLayer`) with a CPU side and a CUDA side (feature
//! `cuda`: its kernel in `channel_scale.cu` beside this file, a typed
//! launcher, blobflow's GPU math for the gradient), registered by type
//! name, and declared for typed nets (`Scaled`).

use blobflow::layers::typed_net::{LayerFields, LayerSpec, One};
use blobflow::layers::{DynLayer, TopShape};
use blobflow::typed::{Rank2, Shape};
use blobflow::{Blob, BlobError};

/// The Caffe type name it is registered and written under.
pub const TYPE: &str = "ChannelScale";

/// The layer; `gamma` is made at the first reshape, once the channels
/// are known, as ones (the layer starts as the identity).
pub struct ChannelScale {
    gamma: Vec<Blob<f32>>,
}

impl ChannelScale {
    pub fn new() -> Self {
        Self { gamma: Vec::new() }
    }
}

fn refused(detail: String) -> BlobError {
    BlobError::InvalidParameter { op: TYPE, detail }
}

impl DynLayer<f32> for ChannelScale {
    fn type_name(&self) -> &str {
        TYPE
    }

    fn reshape(
        &mut self,
        bottoms: &[&Blob<f32>],
        _tops: &[&Blob<f32>],
    ) -> blobflow::runtime::Result<Vec<TopShape>> {
        let x = bottoms[0];
        let &[_, channels] = x.shape() else {
            return Err(refused(format!("takes (N, C), not {}", x.shape_string())));
        };
        match self.gamma.first() {
            None => {
                let gamma = Blob::new(&[channels])?;
                gamma.mutable_cpu_data()?.fill(1.0);
                self.gamma.push(gamma);
            }
            Some(g) if g.count() != channels => {
                return Err(refused(format!(
                    "{} factors, but the input has {channels} channels",
                    g.count()
                )));
            }
            Some(_) => {}
        }
        Ok(vec![TopShape::new(x.shape().to_vec())])
    }

    fn forward(
        &mut self,
        bottoms: &[&Blob<f32>],
        tops: &[&Blob<f32>],
    ) -> blobflow::runtime::Result<()> {
        let (x, gamma, y) = (bottoms[0], &self.gamma[0], tops[0]);
        #[cfg(feature = "cuda")]
        if let Some(gpu) = cuda::on_gpu(&[x, gamma, y]) {
            return cuda::forward(&gpu, x, gamma, y);
        }
        let gamma = gamma.cpu_data()?;
        let xd = x.to_vec()?;
        let mut yd = y.mutable_cpu_data()?;
        for (out, row) in yd
            .chunks_exact_mut(gamma.len())
            .zip(xd.chunks_exact(gamma.len()))
        {
            for ((o, &v), &g) in out.iter_mut().zip(row).zip(gamma.iter()) {
                *o = v * g;
            }
        }
        Ok(())
    }

    /// `dgamma[c] += sum_b dy[b, c] * x[b, c]` (accumulated, as Caffe's
    /// parameter gradients are); `dx = dy * gamma`.
    fn backward(
        &mut self,
        tops: &[&Blob<f32>],
        propagate_down: &[bool],
        bottoms: &[&Blob<f32>],
    ) -> blobflow::runtime::Result<()> {
        let (x, gamma, y) = (bottoms[0], &self.gamma[0], tops[0]);
        #[cfg(feature = "cuda")]
        if let Some(gpu) = cuda::on_gpu(&[x, gamma, y]) {
            return cuda::backward(&gpu, x, gamma, y, propagate_down[0]);
        }
        let channels = gamma.count();
        let (xd, dy) = (x.to_vec()?, y.diff_to_vec()?);
        {
            let mut dgamma = gamma.mutable_cpu_diff()?;
            for (row, grow) in xd.chunks_exact(channels).zip(dy.chunks_exact(channels)) {
                for ((dg, &v), &g) in dgamma.iter_mut().zip(row).zip(grow) {
                    *dg += v * g;
                }
            }
        }
        if propagate_down[0] {
            let gamma = gamma.cpu_data()?;
            let mut dx = x.mutable_cpu_diff()?;
            for (drow, grow) in dx.chunks_exact_mut(channels).zip(dy.chunks_exact(channels)) {
                for ((d, &g), &s) in drow.iter_mut().zip(grow).zip(gamma.iter()) {
                    *d = g * s;
                }
            }
        }
        Ok(())
    }

    fn blobs(&self) -> &[Blob<f32>] {
        &self.gamma
    }

    fn blobs_mut(&mut self) -> &mut [Blob<f32>] {
        &mut self.gamma
    }

    /// `dx` is read after `y` is written: not in place.
    fn allows_in_place(&self) -> bool {
        false
    }
}

/// The layer in a typed net: `(N, C)` in, the same shape out; anything
/// else does not compile.
pub struct Scaled;

impl LayerFields for Scaled {
    fn type_name(&self) -> &str {
        TYPE
    }
    fn write_fields(&self, _text: &mut String) {}
}

impl<X: Shape> LayerSpec<One<X>> for Scaled
where
    X::Dims: Rank2,
{
    type Out = X;
}

/// `ChannelScale`'s CUDA side: its kernel, and blobflow's own GPU math
/// (an element-wise product, strided sums) for `gamma`'s gradient. What a
/// layer of your own needs is all public: the launcher macro, the blob's
/// device memory as cudarc views, and the GPU its blobs live on.
#[cfg(feature = "cuda")]
pub mod cuda {
    use std::sync::Arc;

    use blobflow::kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
    use blobflow::kernels::cuda::{BinaryOp, CudaError, Gpu, launch_config};
    use blobflow::kernels::sums::SumLayout;
    use blobflow::runtime::DeviceError;
    use blobflow::runtime::cuda::{CudaBackend, view, view_mut};
    use blobflow::{Blob, BlobError};

    blobflow::kernels::cuda_kernels! {
        /// `channel_scale.cu`, beside this file.
        static CHANNEL_SCALE = "channel_scale.cu";
        /// `y[b, c] = x[b, c] * gamma[c]`.
        fn scale_channels_f32(
            total: i64, channels: i32, x: &CudaView<'_, f32>, gamma: &CudaView<'_, f32>,
            y: &mut CudaViewMut<'_, f32>
        );
    }

    const OP: &str = "channel scale on the GPU";

    /// Compiles `channel_scale.cu` with NVRTC and holds the launcher's
    /// name and parameter types to the PTX: the check a kernel of your
    /// own can have in CI, where there is NVRTC but no GPU.
    pub fn check_kernels() -> Result<(), BlobError> {
        let ptx = CHANNEL_SCALE.compile().map_err(cuda)?;
        CHANNEL_SCALE.check_ptx(&ptx).map_err(cuda)?;
        println!("{}: the launcher matches the PTX", CHANNEL_SCALE.file);
        Ok(())
    }

    fn cuda(e: CudaError) -> BlobError {
        BlobError::Device {
            op: OP,
            source: DeviceError::with_source("CUDA", e),
        }
    }

    fn device(source: DeviceError) -> BlobError {
        BlobError::Device { op: OP, source }
    }

    /// The GPU the blobs live on, when they all live on one CUDA device;
    /// `None` sends the layer to its CPU side.
    pub fn on_gpu(blobs: &[&Blob<f32>]) -> Option<Arc<Gpu>> {
        let mut gpu: Option<Arc<Gpu>> = None;
        for blob in blobs {
            let here = blob.device().and_then(CudaBackend::of)?.gpu();
            // One GPU for all: a kernel cannot read another GPU's memory.
            match &gpu {
                Some(g) if g.context().ordinal() != here.context().ordinal() => return None,
                Some(_) => {}
                None => gpu = Some(here.clone()),
            }
        }
        gpu
    }

    /// `y = x * gamma` per channel over the views, launched safely: the
    /// lengths the kernel relies on are checked first.
    fn scale(
        gpu: &Gpu,
        x: &CudaView<'_, f32>,
        gamma: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>,
    ) -> Result<(), BlobError> {
        let (n, c) = (y.len(), gamma.len());
        if x.len() != n || c == 0 || n % c != 0 {
            return Err(BlobError::InvalidParameter {
                op: OP,
                detail: format!(
                    "{} inputs, {n} outputs and {c} channels do not fit",
                    x.len()
                ),
            });
        }
        let channels = i32::try_from(c).map_err(|_| BlobError::InvalidParameter {
            op: OP,
            detail: format!("{c} channels do not fit the kernel's int"),
        })?;
        // SAFETY: x and y hold n values and gamma c (checked above); the
        // kernel reads x[i], gamma[i % c] and writes y[i] for i < n.
        unsafe { scale_channels_f32(gpu, launch_config(n), n as i64, channels, x, gamma, y) }
            .map_err(cuda)
    }

    /// `y = x * gamma` per channel.
    pub fn forward(
        gpu: &Gpu,
        x: &Blob<f32>,
        gamma: &Blob<f32>,
        y: &Blob<f32>,
    ) -> Result<(), BlobError> {
        let (n, c) = (x.count(), gamma.count());
        let (xg, gg, mut yg) = (x.gpu_data()?, gamma.gpu_data()?, y.mutable_gpu_data()?);
        scale(
            gpu,
            &view(&xg, n).map_err(device)?,
            &view(&gg, c).map_err(device)?,
            &mut view_mut(&mut yg, n).map_err(device)?,
        )
    }

    /// `dgamma += column sums of dy * x`; `dx = dy * gamma` when asked.
    pub fn backward(
        gpu: &Gpu,
        x: &Blob<f32>,
        gamma: &Blob<f32>,
        y: &Blob<f32>,
        propagate_down: bool,
    ) -> Result<(), BlobError> {
        let (n, c) = (x.count(), gamma.count());
        let (xg, dyg) = (x.gpu_data()?, y.gpu_diff()?);
        let dy = view(&dyg, n).map_err(device)?;
        let mut products = gpu
            .stream()
            .alloc_zeros::<f32>(n.max(1))
            .map_err(|e| cuda(CudaError::driver("allocate products")(e)))?;
        let mut products = products.slice_mut(..n);
        gpu.binary(
            BinaryOp::Mul,
            &dy,
            &view(&xg, n).map_err(device)?,
            &mut products,
        )
        .map_err(cuda)?;
        {
            let mut dg = gamma.mutable_gpu_diff()?;
            let layout = SumLayout::columns_of(n / c.max(1), c);
            gpu.add_sums(
                &layout,
                &products.as_view(),
                &mut view_mut(&mut dg, c).map_err(device)?,
            )
            .map_err(cuda)?;
        }
        if propagate_down {
            let (gg, mut dxg) = (gamma.gpu_data()?, x.mutable_gpu_diff()?);
            scale(
                gpu,
                &dy,
                &view(&gg, c).map_err(device)?,
                &mut view_mut(&mut dxg, n).map_err(device)?,
            )?;
        }
        Ok(())
    }
}
