//! The user's own layer of the `user_layer` example, `ChannelScale<C>`:
//! `y[n, c] = x[n, c] * gamma[c]` with `gamma` learned (Caffe's Scale
//! with one axis and no bias, written from scratch as a user would). A
//! [`TypedLayer`]: its bottom, top and parameter shapes are types built
//! from its const parameter `C`, and its passes get the net's blobs as
//! typed views of those shapes. A CPU side and a CUDA side (feature
//! `cuda`: its kernel in `channel_scale.cu` beside this file, a typed
//! launcher, blobflow's GPU math for the gradient), chosen by where the
//! blobs live.

use blobflow::BlobError;
use blobflow::layers::typed_layer::TypedLayer;
use blobflow::proto::ParamMessage;
use blobflow::typed::{D, Dyn, TypedBlob};

/// The Caffe type name it is written under in the net's prototxt.
pub const TYPE: &str = "ChannelScale";

/// A batch of rows of `C` channels.
pub type Rows<const C: usize> = (Dyn, D<C>);
/// One factor a channel.
pub type Factors<const C: usize> = (D<C>,);

/// The layer on `C` channels; `gamma` starts as ones (the layer starts
/// as the identity).
pub struct ChannelScale<const C: usize>;

type Result<T> = std::result::Result<T, BlobError>;

impl<const C: usize> TypedLayer<f32> for ChannelScale<C> {
    const TYPE: &'static str = TYPE;
    type Bottoms = (Rows<C>,);
    type Tops = (Rows<C>,);
    type Params = (Factors<C>,);

    fn from_param(_param: &ParamMessage) -> Result<Self> {
        Ok(ChannelScale)
    }

    fn init_params(&mut self, (gamma,): (&TypedBlob<f32, Factors<C>>,)) -> Result<()> {
        gamma.mutable_cpu_data()?.fill(1.0);
        Ok(())
    }

    fn forward(
        &mut self,
        (x,): (&TypedBlob<f32, Rows<C>>,),
        (y,): (&TypedBlob<f32, Rows<C>>,),
        (gamma,): (&TypedBlob<f32, Factors<C>>,),
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = cuda::on_gpu(&[x.as_dyn(), gamma.as_dyn(), y.as_dyn()]) {
            return cuda::forward(&gpu, x.as_dyn(), gamma.as_dyn(), y.as_dyn());
        }
        let (xd, g) = (x.cpu_data()?, gamma.cpu_data()?);
        let mut yd = y.mutable_cpu_data()?;
        for n in 0..x.shape()[0] {
            for c in 0..C {
                // `offset` multiplies by the compile-time stride C.
                let at = x.offset([n, c]);
                yd[at] = xd[at] * g[c];
            }
        }
        Ok(())
    }

    /// `dgamma[c] += sum_n dy[n, c] * x[n, c]` (accumulated, as Caffe's
    /// parameter gradients are); `dx = dy * gamma`.
    fn backward(
        &mut self,
        (y,): (&TypedBlob<f32, Rows<C>>,),
        propagate_down: &[bool],
        (x,): (&TypedBlob<f32, Rows<C>>,),
        (gamma,): (&TypedBlob<f32, Factors<C>>,),
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = cuda::on_gpu(&[x.as_dyn(), gamma.as_dyn(), y.as_dyn()]) {
            return cuda::backward(
                &gpu,
                x.as_dyn(),
                gamma.as_dyn(),
                y.as_dyn(),
                propagate_down[0],
            );
        }
        let batch = x.shape()[0];
        let (xd, dy) = (x.to_vec()?, y.diff_to_vec()?);
        {
            let mut dgamma = gamma.mutable_cpu_diff()?;
            for n in 0..batch {
                for c in 0..C {
                    let at = x.offset([n, c]);
                    dgamma[c] += dy[at] * xd[at];
                }
            }
        }
        if propagate_down[0] {
            let g = gamma.cpu_data()?;
            let mut dx = x.mutable_cpu_diff()?;
            for n in 0..batch {
                for c in 0..C {
                    let at = x.offset([n, c]);
                    dx[at] = dy[at] * g[c];
                }
            }
        }
        Ok(())
    }
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
