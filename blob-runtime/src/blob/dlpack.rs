//! DLPack in and out (feature `dlpack`): a blob's memory lent to PyTorch,
//! NumPy, JAX, CuPy or a Rust crate without a copy, and a tensor of theirs
//! adopted as a blob's data without a copy.
//!
//! Caffe has no DLPack; pycaffe copies through NumPy. Here the memory is
//! shared, and the run-time borrow rules of [`SyncedMemory`] keep it
//! safe: while a consumer holds an exported tensor the blob's memory is
//! borrowed (for writing, or with [`DlpackAccess::ReadOnly`] for reading),
//! so a conflicting access from blobflow is an error naming the lease,
//! never a data race.

use std::any::TypeId;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor};
use dlpark::metadata::Dynamic;
use dlpark::{DlpackElement, DlpackFlags, Managed, ManagedTensorBase, TensorRef};

use super::Blob;
use crate::device::DeviceBackend;
use crate::element::Element;
use crate::error::{BlobError, Result};
use crate::host_buffer::HostBuffer;
use crate::synced_memory::{DeviceLease, HostLease, SyncedMemory};

/// What the consumer of an exported blob may do with its memory.
///
/// ```
/// use blob_runtime::{Blob, DlpackAccess};
/// let blob = Blob::<f32>::new(&[2])?;
/// let tensor = blob.to_dlpack_as::<dlpark::ffi::DLManagedTensorVersioned>(DlpackAccess::ReadOnly)?;
/// assert!(tensor.flags().contains(dlpark::DlpackFlags::READ_ONLY));
/// assert_eq!(blob.cpu_data()?[0], 0.0); // blobflow may still read
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DlpackAccess {
    /// The consumer may write: the blob's memory is borrowed for writing
    /// until the consumer deletes the tensor.
    ReadWrite,
    /// The consumer may only read (the versioned ABI's `READ_ONLY` flag):
    /// blobflow may read the blob meanwhile, not write it.
    ReadOnly,
}

fn refused(op: &'static str, detail: impl Into<String>) -> BlobError {
    BlobError::Dlpack {
        op,
        detail: detail.into(),
    }
}

impl<T: Element + DlpackElement> Blob<T> {
    /// The blob's data as a DLPack tensor (the versioned ABI), sharing its
    /// host memory: no copy. The consumer may write into it; the blob's
    /// data is borrowed for writing until the consumer deletes the tensor,
    /// so blobflow reading or writing it meanwhile is a
    /// [`BlobError::Borrowed`] that says where the memory went. Data whose
    /// newest bytes are on the GPU are first brought to the host, as
    /// Caffe's `mutable_cpu_data()` does.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// let blob = Blob::<f32>::from_vec(&[2, 3], (0..6).map(|v| v as f32).collect())?;
    /// let mut tensor = blob.to_dlpack()?;
    /// let view = tensor.validate().unwrap();
    /// assert_eq!(view.shape(), &[2, 3]);
    /// // What a consumer (PyTorch, NumPy...) writes, the blob holds.
    /// // SAFETY: the tensor is a live, writable, compact f32 CPU tensor.
    /// unsafe { tensor.validate_mut().unwrap().cpu_slice_mut::<f32>().unwrap()[5] = 50.0 };
    /// assert!(blob.cpu_data().is_err()); // still lent
    /// drop(tensor); // the consumer deletes it
    /// assert_eq!(blob.cpu_data()?[5], 50.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_dlpack(&self) -> Result<dlpark::versioned::Dlpack> {
        self.to_dlpack_as(DlpackAccess::ReadWrite)
    }

    /// The blob's data as a DLPack tensor of either ABI (`M` is
    /// `DLManagedTensorVersioned` or the legacy `DLManagedTensor`), shared
    /// as `access` says. The legacy ABI has no read-only flag, so it is
    /// only lent [`DlpackAccess::ReadWrite`].
    ///
    /// ```
    /// use blob_runtime::{Blob, DlpackAccess};
    /// use dlpark::ffi::DLManagedTensor;
    /// let blob = Blob::<f64>::new(&[4])?;
    /// let legacy = blob.to_dlpack_as::<DLManagedTensor>(DlpackAccess::ReadWrite)?;
    /// assert_eq!(legacy.validate().unwrap().shape(), &[4]);
    /// drop(legacy);
    /// let err = blob.to_dlpack_as::<DLManagedTensor>(DlpackAccess::ReadOnly).map(drop).unwrap_err();
    /// assert!(err.to_string().contains("legacy DLPack ABI cannot mark a tensor read-only"));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_dlpack_as<M: ManagedTensorBase + 'static>(
        &self,
        access: DlpackAccess,
    ) -> Result<Managed<M>> {
        self.lend(access, false)
    }

    /// The blob's data on its device (a GPU) as a DLPack tensor (the
    /// versioned ABI), sharing the device memory: no copy. Data whose
    /// newest bytes are on the host are first uploaded, as Caffe's
    /// `mutable_gpu_data()` does, and the device's queued work is waited
    /// for, so the consumer may use the memory on any stream. It stays
    /// borrowed for writing until the consumer deletes the tensor, which
    /// it does once its own work on the memory is done.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// // A blob with no device has no device memory to lend.
    /// let err = Blob::<f32>::new(&[2])?.to_dlpack_device().map(drop).unwrap_err();
    /// assert!(err.to_string().contains("no GPU device"), "{err}");
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_dlpack_device(&self) -> Result<dlpark::versioned::Dlpack> {
        self.to_dlpack_device_as(DlpackAccess::ReadWrite)
    }

    /// [`to_dlpack_device`](Self::to_dlpack_device) in either ABI, shared
    /// as `access` says (as [`to_dlpack_as`](Self::to_dlpack_as)).
    pub fn to_dlpack_device_as<M: ManagedTensorBase + 'static>(
        &self,
        access: DlpackAccess,
    ) -> Result<Managed<M>> {
        self.lend(access, true)
    }

    fn lend<M: ManagedTensorBase + 'static>(
        &self,
        access: DlpackAccess,
        on_device: bool,
    ) -> Result<Managed<M>> {
        const OP: &str = "export a blob through DLPack";
        let read_only = access == DlpackAccess::ReadOnly;
        if read_only && TypeId::of::<M>() == TypeId::of::<DLManagedTensor>() {
            return Err(refused(
                OP,
                "the legacy DLPack ABI cannot mark a tensor read-only; lend it \
                 DlpackAccess::ReadWrite or use the versioned ABI",
            ));
        }
        // A blob of no elements has no memory to lend: a dangling pointer
        // aligned for `T` stands for it.
        let dangling = NonNull::<T>::dangling().as_ptr().cast::<c_void>();
        let (lease, address, device) = if on_device {
            let backend = self.device.as_ref().ok_or(BlobError::NoDevice { op: OP })?;
            let Some((kind, id)) = backend.dlpack_device() else {
                return Err(refused(
                    OP,
                    format!("{} does not lend its memory through DLPack", backend.name()),
                ));
            };
            let device = DLDevice {
                device_type: DLDeviceType(kind),
                device_id: id,
            };
            if self.count == 0 {
                (None, dangling, device)
            } else {
                let lease = SyncedMemory::lease_device(&self.data, !read_only)?;
                let on_device = |source| BlobError::Device { op: OP, source };
                let address = lease
                    .backend()
                    .device_address(lease.buffer())
                    .map_err(on_device)?;
                lease.backend().synchronize().map_err(on_device)?;
                // A device address: no host memory behind it.
                let address = std::ptr::without_provenance_mut(address as usize);
                (Some(Lease::Device(lease)), address, device)
            }
        } else if self.count == 0 {
            (None, dangling, DLDevice::CPU)
        } else {
            let lease = SyncedMemory::lease_host(&self.data, !read_only)?;
            let address = lease.as_ptr().as_ptr().cast();
            (Some(Lease::Host(lease)), address, DLDevice::CPU)
        };
        let mut tensor = Dynamic::compact(self.shape.as_slice())
            .prepare_as::<M>()
            .map_err(|e| refused(OP, e.to_string()))?
            .initialize(Box::new(lease));
        tensor
            .set_data(address)
            .set_device(device)
            .set_dtype(DLDataType::of::<T>());
        if read_only {
            tensor
                .set_flags(DlpackFlags::READ_ONLY)
                .map_err(|e| refused(OP, e.to_string()))?;
        }
        // SAFETY: `address` is the blob's first element on `device`; its
        // `count` elements stay allocated and borrowed as `access` says for
        // as long as the lease (the tensor's context, dropped by its
        // deleter) lives; the strides are compact and the flags say
        // read-only where it is.
        Ok(unsafe { tensor.finish() })
    }

    /// A blob whose data is `tensor`'s memory, adopted without a copy (the
    /// versioned or the legacy ABI): the tensor is deleted (its producer's
    /// deleter called) when the blob's data is dropped or replaced. The
    /// tensor must be on the CPU (or pinned host memory), hold `T`, be
    /// row-major and contiguous, and be writable; anything else is an error
    /// naming what differs. As with any DLPack consumer, the producer must
    /// not write the memory while the blob lives.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// let source = Blob::<f32>::from_vec(&[3], vec![1.0, 2.0, 3.0])?;
    /// let at = source.cpu_data()?.as_ptr();
    /// let blob = Blob::<f32>::from_dlpack(source.to_dlpack()?)?;
    /// assert_eq!(blob.shape(), &[3]);
    /// assert_eq!(blob.cpu_data()?.as_ptr(), at); // the same memory
    /// let err = Blob::<f64>::from_dlpack(blob.to_dlpack()?).unwrap_err();
    /// assert!(err.to_string().contains("holds float32, not f64"));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn from_dlpack<M: ManagedTensorBase>(tensor: Managed<M>) -> Result<Self> {
        Self::adopt(tensor, None)
    }

    /// A blob that can live on `device`, whose data is `tensor`'s memory,
    /// adopted without a copy: a tensor on that device (a CUDA tensor of
    /// that GPU) becomes the blob's device memory, head at GPU; a host
    /// tensor its host memory, as [`from_dlpack`](Self::from_dlpack). The
    /// producer must have finished its work on the memory (DLPack's
    /// stream hand-over) before the tensor is given here.
    ///
    /// ```
    /// use blob_runtime::{Blob, host_device::HostDevice};
    /// let host = Blob::<f32>::from_vec(&[2], vec![1.0, 2.0])?;
    /// let blob = Blob::<f32>::from_dlpack_on(host.to_dlpack()?, HostDevice::new())?;
    /// assert!(blob.device().is_some());
    /// assert_eq!(blob.asum_data()?, 3.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn from_dlpack_on<M: ManagedTensorBase>(
        tensor: Managed<M>,
        device: Arc<dyn DeviceBackend>,
    ) -> Result<Self> {
        Self::adopt(tensor, Some(device))
    }

    fn adopt<M: ManagedTensorBase>(
        tensor: Managed<M>,
        device: Option<Arc<dyn DeviceBackend>>,
    ) -> Result<Self> {
        const OP: &str = "import a DLPack tensor";
        let view = tensor.validate().map_err(|e| refused(OP, e.to_string()))?;
        let on_host = is_host(view.device());
        let backend_device = device.as_ref().and_then(|d| d.dlpack_device());
        let tensor_device = (view.device().device_type.0, view.device().device_id);
        if !on_host && backend_device != Some(tensor_device) {
            let wanted = match &device {
                None => "Blob::from_dlpack takes host tensors: adopt it with \
                         Blob::from_dlpack_on and its device's backend, or copy it to the CPU"
                    .to_owned(),
                Some(backend) => format!("not on {}", backend.name()),
            };
            return Err(refused(
                OP,
                format!("the tensor is on {}; {wanted}", device_name(view.device())),
            ));
        }
        let dims = blob_dims::<T>(OP, &view)?;
        if tensor.flags().contains(DlpackFlags::READ_ONLY) {
            return Err(refused(
                OP,
                "the tensor is read-only, and a blob's data is writable: copy it in \
                 (copy_from_dlpack), or export it writable",
            ));
        }
        let blob = match &device {
            Some(backend) => Self::with_device(&dims, backend.clone())?,
            None => Self::new(&dims)?,
        };
        if blob.count == 0 {
            return Ok(blob);
        }
        let offset = usize::try_from(view.byte_offset())
            .ok()
            .filter(|&offset| view.data_ptr().addr().checked_add(offset).is_some())
            .ok_or_else(|| refused(OP, "the tensor's byte offset overflows its address"))?;
        let data = view.data_ptr().cast_mut().wrapping_byte_add(offset);
        if data.is_null() {
            return Err(refused(OP, "the tensor's data pointer is null"));
        }
        if !data.addr().is_multiple_of(align_of::<T>()) {
            return Err(refused(
                OP,
                format!(
                    "the tensor's data at {data:p} is not aligned for {}",
                    T::NAME
                ),
            ));
        }
        let bytes = blob.count * size_of::<T>();
        let owner = tensor.into_deleter();
        match device.filter(|_| !on_host) {
            Some(backend) => {
                let address = data.addr() as u64;
                // SAFETY: the tensor is on this backend's device (checked
                // above), writable, `bytes` long from `address`, and stays
                // so until its deleter runs, when `owner` is dropped.
                let buffer = unsafe { backend.adopt(address, bytes, Box::new(owner)) }
                    .map_err(|source| BlobError::Device { op: OP, source })?;
                blob.data.set_gpu_data(buffer)?;
            }
            None => {
                let data = NonNull::new(data.cast::<u8>()).expect("checked non-null");
                // SAFETY: the tensor's `bytes` bytes at `data` are host
                // memory, valid, writable (not READ_ONLY), aligned for `T`
                // and initialized, and stay so until its deleter runs,
                // which dropping `owner` does, once.
                let buffer = unsafe {
                    HostBuffer::borrowed_from_owner(data, bytes, move |_, _| drop(owner))
                };
                blob.data.set_cpu_data(buffer)?;
            }
        }
        Ok(blob)
    }

    /// Copies `tensor`'s values into this blob's data, reshaping the blob
    /// to the tensor's shape first (pycaffe's `blob.data[...] = array`),
    /// then deletes the tensor. For a tensor the blob should not take
    /// over: a read-only one, or one its producer goes on using. The
    /// tensor must be a row-major, contiguous host tensor of `T`.
    ///
    /// ```
    /// use blob_runtime::{Blob, DlpackAccess};
    /// let source = Blob::<f32>::from_vec(&[2], vec![3.0, 4.0])?;
    /// let tensor = source.to_dlpack_as::<dlpark::ffi::DLManagedTensorVersioned>(DlpackAccess::ReadOnly)?;
    /// let mut blob = Blob::<f32>::new(&[5])?;
    /// blob.copy_from_dlpack(tensor)?;
    /// assert_eq!(blob.shape(), &[2]);
    /// assert_eq!(blob.to_vec()?, [3.0, 4.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn copy_from_dlpack<M: ManagedTensorBase>(&mut self, tensor: Managed<M>) -> Result<()> {
        const OP: &str = "copy a DLPack tensor into a blob";
        let view = tensor.validate().map_err(|e| refused(OP, e.to_string()))?;
        if !is_host(view.device()) {
            return Err(refused(
                OP,
                format!(
                    "the tensor is on {}; copy it to the CPU first",
                    device_name(view.device())
                ),
            ));
        }
        self.reshape(&blob_dims::<T>(OP, &view)?)?;
        if self.count == 0 {
            return Ok(());
        }
        // SAFETY: validated as a live, compact host tensor of `T` whose
        // element count is the blob's.
        let values = unsafe { view.cpu_slice::<T>() }.map_err(|e| refused(OP, e.to_string()))?;
        self.mutable_cpu_data()?.copy_from_slice(values);
        Ok(())
    }
}

/// What an exported tensor's context holds: the borrow of the memory
/// lent, given back (by the lease's drop) when the consumer deletes the
/// tensor. Never read, only dropped.
#[allow(dead_code)]
enum Lease {
    Host(HostLease),
    Device(DeviceLease),
}

/// Whether the host can read the tensor's memory (pinned memory included).
fn is_host(device: DLDevice) -> bool {
    matches!(
        device.device_type,
        DLDeviceType::CPU | DLDeviceType::CUDAHOST
    )
}

/// The dims of a tensor a blob can hold: of `T`, row-major and
/// contiguous; an error naming what differs otherwise.
fn blob_dims<T: Element + DlpackElement>(op: &'static str, view: &TensorRef) -> Result<Vec<usize>> {
    if view.dtype() != DLDataType::of::<T>() {
        return Err(refused(
            op,
            format!(
                "the tensor holds {}, not {}",
                dtype_name(view.dtype()),
                T::NAME
            ),
        ));
    }
    let shape = view.shape();
    if !view.is_compact().map_err(|e| refused(op, e.to_string()))? {
        return Err(refused(
            op,
            format!(
                "the tensor of shape {shape:?} has strides {:?}, not row-major and \
                 contiguous as a blob is: make it contiguous first \
                 (NumPy's ascontiguousarray, PyTorch's .contiguous())",
                view.strides().unwrap_or_default()
            ),
        ));
    }
    Ok(shape
        .iter()
        .map(|&d| usize::try_from(d).expect("validate refuses negative dims"))
        .collect())
}

fn device_name(device: DLDevice) -> String {
    let kind = match device.device_type {
        DLDeviceType::CUDA => "CUDA",
        DLDeviceType::CUDAMANAGED => "CUDA managed memory",
        DLDeviceType::ROCM => "ROCm",
        DLDeviceType::ROCMHOST => "ROCm host memory",
        DLDeviceType::METAL => "Metal",
        DLDeviceType::VULKAN => "Vulkan",
        DLDeviceType::OPENCL => "OpenCL",
        DLDeviceType::ONEAPI => "oneAPI",
        other => return format!("DLPack device type {} #{}", other.0, device.device_id),
    };
    format!("{kind} device {}", device.device_id)
}

fn dtype_name(dtype: DLDataType) -> String {
    let kind = match dtype.code {
        DLDataTypeCode::INT => "int",
        DLDataTypeCode::UINT => "uint",
        DLDataTypeCode::FLOAT => "float",
        DLDataTypeCode::BFLOAT => "bfloat",
        DLDataTypeCode::COMPLEX => "complex",
        DLDataTypeCode::BOOL => "bool",
        other => {
            return format!(
                "DLPack type code {} of {} bits x {} lanes",
                other.0, dtype.bits, dtype.lanes
            );
        }
    };
    let lanes = if dtype.lanes == 1 {
        String::new()
    } else {
        format!("x{}", dtype.lanes)
    };
    format!("{kind}{}{lanes}", dtype.bits)
}
