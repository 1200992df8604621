//! A blob to a candle tensor and back on one GPU: no copy on the way out,
//! candle's kernels and blobflow's cuBLAS on the same stream, the values
//! held at each step. Needs a GPU: without one each test says so and
//! passes, unless `BLOBFLOW_REQUIRE_GPU` is set (as `scripts/gpu-check.sh`
//! sets it).

use std::sync::Arc;

use blobflow::Blob;
use blobflow::runtime::cuda::CudaBackend;
use blobflow::runtime::cuda::cudarc::driver::DevicePtr;
use candle_core::cuda_backend::CudaDevice;
use candle_core::{Storage, Tensor};
use downstream_candle_cuda::{backend_on, blob_into_tensor, tensor_to_blob};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// candle's device and blobflow's backend on its stream, or `None` where
/// there is no GPU and none is required.
fn gpu() -> Result<Option<(CudaDevice, Arc<CudaBackend>)>> {
    match CudaDevice::new_with_stream(0) {
        Ok(device) => {
            let backend = backend_on(&device)?;
            Ok(Some((device, backend)))
        }
        Err(e) if std::env::var_os("BLOBFLOW_REQUIRE_GPU").is_none() => {
            eprintln!("no GPU here ({e}): the round trip runs where one is lent");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// A (2, 3) blob of 2, 4, .. 12 in device memory: 1..6 uploaded on
/// candle's stream, doubled by cuBLAS there.
fn doubled(device: &CudaDevice, backend: &Arc<CudaBackend>) -> Result<Blob<f32>> {
    let slice = device
        .cuda_stream()
        .clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    let blob = Blob::<f32>::from_cuda_slice(&[2, 3], slice, backend)?;
    blob.scale_data(2.0)?;
    Ok(blob)
}

fn address_of_tensor(tensor: &Tensor, device: &CudaDevice) -> Result<u64> {
    let (storage, _) = tensor.storage_and_layout();
    let Storage::Cuda(cuda) = &*storage else {
        return Err("the tensor left the GPU".into());
    };
    Ok(cuda
        .as_cuda_slice::<f32>()?
        .device_ptr(&device.cuda_stream())
        .0)
}

#[test]
fn a_blobs_memory_becomes_a_candle_tensor_without_a_copy() -> Result<()> {
    let Some((device, backend)) = gpu()? else {
        return Ok(());
    };
    let blob = doubled(&device, &backend)?;
    let address = {
        let guard = blob.gpu_data()?;
        let view = blobflow::runtime::cuda::view::<f32>(&guard, 6)?;
        view.device_ptr(&device.cuda_stream()).0
    };
    let tensor = blob_into_tensor(blob, &device)?;
    assert_eq!(address_of_tensor(&tensor, &device)?, address);
    assert_eq!(
        tensor.to_vec2::<f32>()?,
        [[2.0, 4.0, 6.0], [8.0, 10.0, 12.0]]
    );
    Ok(())
}

#[test]
fn candles_kernels_run_on_a_blobs_memory_and_come_back_as_a_blob() -> Result<()> {
    let Some((device, backend)) = gpu()? else {
        return Ok(());
    };
    let tensor = blob_into_tensor(doubled(&device, &backend)?, &device)?;
    let shifted = tensor.affine(0.5, 1.0)?.t()?;
    let back = tensor_to_blob(&shifted, &backend)?;
    assert_eq!(back.shape(), [3, 2]);
    back.scale_data(10.0)?;
    assert_eq!(
        back.to_vec()?,
        [20.0, 50.0, 30.0, 60.0, 40.0, 70.0],
        "transposed, shifted and scaled"
    );
    Ok(())
}
