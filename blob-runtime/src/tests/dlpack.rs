//! DLPack out and in: the same memory both ways, the borrow a consumer
//! holds, the producer's deleter run once, and every refusal's words.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlpark::ffi::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned};
use dlpark::metadata::Dynamic;
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};

use super::{device_bytes, host_device_pair};
use crate::{Blob, BlobError, DlpackAccess};

/// A producer's tensor over `values`, which says when its deleter ran.
struct Produced {
    values: Vec<f32>,
    deleted: Arc<AtomicUsize>,
}

impl Drop for Produced {
    fn drop(&mut self) {
        self.deleted.fetch_add(1, Ordering::SeqCst);
    }
}

fn produce<M: ManagedTensorBase>(
    values: Vec<f32>,
    shape: &[i64],
    strides: Option<&[i64]>,
    flags: DlpackFlags,
    device: DLDevice,
) -> (Managed<M>, *const f32, Arc<AtomicUsize>) {
    let deleted = Arc::new(AtomicUsize::new(0));
    let mut owner = Box::new(Produced {
        values,
        deleted: deleted.clone(),
    });
    let data = owner.values.as_mut_ptr();
    let mut tensor = match strides {
        None => Dynamic::compact(shape).prepare_as::<M>().unwrap(),
        Some(strides) => Dynamic::new(shape, strides).prepare_as::<M>().unwrap(),
    }
    .initialize(owner);
    tensor
        .set_data(data.cast())
        .set_device(device)
        .set_dtype(DLDataType::of::<f32>());
    tensor.set_flags(flags).unwrap();
    // SAFETY: `data` is the owner's Vec, alive until the deleter drops
    // the owner; shape and strides describe it.
    (unsafe { tensor.finish() }, data, deleted)
}

fn refusal(err: BlobError) -> String {
    assert!(matches!(err, BlobError::Dlpack { .. }), "{err:?}");
    err.to_string()
}

#[test]
fn a_consumer_writes_the_blobs_own_memory_and_holds_it_meanwhile() {
    let blob = Blob::<f32>::from_vec(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let at = blob.cpu_data().unwrap().as_ptr();
    let mut tensor = blob.to_dlpack().unwrap();
    assert_eq!(tensor.validate().unwrap().data_ptr(), at.cast());
    assert_eq!(tensor.validate().unwrap().strides(), Some(&[2i64, 1][..]));
    assert!(!tensor.flags().contains(DlpackFlags::READ_ONLY));
    // SAFETY: a live, writable, compact f32 CPU tensor.
    unsafe {
        tensor
            .validate_mut()
            .unwrap()
            .cpu_slice_mut::<f32>()
            .unwrap()[3] = 40.0
    };
    for err in [
        blob.cpu_data().map(drop).unwrap_err(),
        blob.mutable_cpu_data().map(drop).unwrap_err(),
        blob.to_dlpack().map(drop).unwrap_err(),
    ] {
        assert!(
            err.to_string()
                .contains("it is lent through DLPack until the consumer deletes its tensor"),
            "{err}"
        );
    }
    // The deleter may run on another thread (the consumer's).
    std::thread::spawn(move || drop(tensor)).join().unwrap();
    assert_eq!(&*blob.cpu_data().unwrap(), &[1.0, 2.0, 3.0, 40.0]);
    blob.mutable_cpu_data().unwrap()[0] = 10.0;
}

#[test]
fn read_only_exports_let_blobflow_read_but_not_write() {
    let blob = Blob::<f64>::from_vec(&[3], vec![1.0, 2.0, 3.0]).unwrap();
    let first = blob
        .to_dlpack_as::<DLManagedTensorVersioned>(DlpackAccess::ReadOnly)
        .unwrap();
    let second = blob
        .to_dlpack_as::<DLManagedTensorVersioned>(DlpackAccess::ReadOnly)
        .unwrap();
    assert!(first.flags().contains(DlpackFlags::READ_ONLY));
    assert_eq!(blob.cpu_data().unwrap()[2], 3.0);
    let err = blob.mutable_cpu_data().map(drop).unwrap_err();
    assert!(err.to_string().contains("lent through DLPack"), "{err}");
    drop(first);
    assert!(
        blob.mutable_cpu_data().is_err(),
        "the second lease still reads"
    );
    drop(second);
    blob.mutable_cpu_data().unwrap()[0] = 5.0;
}

#[test]
fn data_newest_on_the_device_come_to_the_host_first() {
    let (_, device) = host_device_pair();
    let blob = Blob::<f32>::with_device(&[2], device).unwrap();
    {
        let mut on_device = blob.mutable_gpu_data().unwrap();
        device_bytes(&mut on_device).copy_from_slice(bytemuck::cast_slice(&[7.0f32, 8.0]));
    }
    let tensor = blob.to_dlpack().unwrap();
    let view = tensor.validate().unwrap();
    // SAFETY: a live compact f32 CPU tensor.
    let values = unsafe { view.cpu_slice::<f32>() }.unwrap();
    assert_eq!(values, &[7.0, 8.0]);
}

#[test]
fn an_adopted_tensor_is_the_blobs_memory_until_the_blob_goes() {
    let (tensor, at, deleted) = produce::<DLManagedTensorVersioned>(
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        &[1, 2, 3],
        None,
        DlpackFlags::empty(),
        DLDevice::CPU,
    );
    let mut blob = Blob::<f32>::from_dlpack(tensor).unwrap();
    assert_eq!(blob.shape(), &[1, 2, 3]);
    assert_eq!(blob.cpu_data().unwrap().as_ptr(), at);
    assert_eq!(blob.data_at(&[0, 1, 2]), 6.0);
    blob.mutable_cpu_data().unwrap()[0] = -1.0;
    assert_eq!(blob.asum_data().unwrap(), 21.0);
    // The same count: still the producer's memory.
    blob.reshape(&[6]).unwrap();
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    drop(blob);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn the_legacy_abi_works_both_ways() {
    let (tensor, at, deleted) = produce::<DLManagedTensor>(
        vec![0.5; 4],
        &[4],
        None,
        DlpackFlags::empty(),
        DLDevice::CPU,
    );
    let blob = Blob::<f32>::from_dlpack(tensor).unwrap();
    assert_eq!(blob.cpu_data().unwrap().as_ptr(), at);
    let legacy = blob
        .to_dlpack_as::<DLManagedTensor>(DlpackAccess::ReadWrite)
        .unwrap();
    assert_eq!(legacy.validate().unwrap().data_ptr(), at.cast());
    let again = Blob::<f32>::from_dlpack(legacy).unwrap();
    assert_eq!(again.cpu_data().unwrap().as_ptr(), at);
    assert!(blob.cpu_data().is_err(), "lent to `again`");
    drop(again);
    assert_eq!(blob.cpu_data().unwrap()[3], 0.5);
    drop(blob);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn tensors_a_blob_cannot_be_are_refused_by_what_differs_and_deleted() {
    /// Shape, strides, flags, device, and the refusal's words.
    type Case<'a> = (&'a [i64], Option<&'a [i64]>, DlpackFlags, DLDevice, &'a str);
    let cases: [Case; 4] = [
        (
            &[2, 2],
            Some(&[1, 2]),
            DlpackFlags::empty(),
            DLDevice::CPU,
            "the tensor of shape [2, 2] has strides [1, 2], not row-major and contiguous",
        ),
        (
            &[4],
            None,
            DlpackFlags::READ_ONLY,
            DLDevice::CPU,
            "the tensor is read-only, and a blob's data is writable",
        ),
        (
            &[4],
            None,
            DlpackFlags::empty(),
            DLDevice::cuda(1),
            "the tensor is on CUDA device 1; Blob::from_dlpack takes host tensors: adopt it with \
             Blob::from_dlpack_on",
        ),
        (
            &[2, 2],
            None,
            DlpackFlags::empty(),
            DLDevice::CPU,
            "the tensor holds float32, not f64",
        ),
    ];
    for (shape, strides, flags, device, words) in cases {
        let (tensor, _, deleted) =
            produce::<DLManagedTensorVersioned>(vec![0.0; 4], shape, strides, flags, device);
        let message = if words.contains("f64") {
            refusal(Blob::<f64>::from_dlpack(tensor).unwrap_err())
        } else {
            refusal(Blob::<f32>::from_dlpack(tensor).unwrap_err())
        };
        assert!(
            message.starts_with("cannot import a DLPack tensor: ") && message.contains(words),
            "{message}"
        );
        assert_eq!(deleted.load(Ordering::SeqCst), 1, "{words}");
    }
}

#[test]
fn copying_in_takes_read_only_tensors_and_leaves_the_producer_its_memory() {
    let (tensor, at, deleted) = produce::<DLManagedTensorVersioned>(
        vec![1.0, 2.0, 3.0, 4.0],
        &[2, 2],
        None,
        DlpackFlags::READ_ONLY,
        DLDevice::CPU,
    );
    let mut blob = Blob::<f32>::new(&[3]).unwrap();
    blob.copy_from_dlpack(tensor).unwrap();
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    assert_eq!(blob.shape(), &[2, 2]);
    assert_ne!(blob.cpu_data().unwrap().as_ptr(), at);
    assert_eq!(blob.to_vec().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    let (tensor, _, _) = produce::<DLManagedTensor>(
        vec![0.0; 4],
        &[2, 2],
        Some(&[1, 2]),
        DlpackFlags::empty(),
        DLDevice::CPU,
    );
    let message = refusal(blob.copy_from_dlpack(tensor).unwrap_err());
    assert!(
        message.starts_with(
            "cannot copy a DLPack tensor into a blob: the tensor of shape [2, 2] has strides [1, 2]"
        ),
        "{message}"
    );
    assert_eq!(
        blob.shape(),
        &[2, 2],
        "a refused copy leaves the blob as it was"
    );
}

#[test]
fn empty_blobs_cross_with_no_memory_to_lend() {
    let blob = Blob::<f32>::new(&[0, 3]).unwrap();
    let tensor = blob.to_dlpack().unwrap();
    assert_eq!(tensor.validate().unwrap().shape(), &[0, 3]);
    let back = Blob::<f32>::from_dlpack(tensor).unwrap();
    assert_eq!(back.shape(), &[0, 3]);
    blob.mutable_cpu_data().unwrap();
}

#[test]
fn device_memory_is_lent_where_it_is() {
    let (_, device) = host_device_pair();
    let blob = Blob::<f32>::from_vec(&[3], vec![1.0, 2.0, 3.0]).unwrap();
    let blob = Blob::<f32>::from_dlpack_on(blob.to_dlpack().unwrap(), device.clone()).unwrap();
    let at = {
        let on_device = blob.gpu_data().unwrap();
        let buffer: &crate::host_device::HostDeviceBuffer =
            on_device.as_any().downcast_ref().unwrap();
        buffer.bytes().as_ptr()
    };
    let tensor = blob.to_dlpack_device().unwrap();
    let view = tensor.validate().unwrap();
    assert_eq!(
        view.device().device_type.0,
        12,
        "the host device is DLPack's test device"
    );
    assert_eq!(view.data_ptr().addr(), at.addr());
    assert_eq!(blob.data_head(), crate::Head::AtGpu);
    let err = blob.gpu_data().map(drop).unwrap_err();
    assert!(err.to_string().contains("lent through DLPack"), "{err}");
    // Device memory goes back only to a blob of that device.
    let message = refusal(Blob::<f32>::from_dlpack(tensor).unwrap_err());
    assert!(
        message.contains(
            "the tensor is on DLPack device type 12 #0; Blob::from_dlpack takes host tensors"
        ),
        "{message}"
    );
    let tensor = blob.to_dlpack_device().unwrap();
    let err = Blob::<f32>::from_dlpack_on(tensor, device).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot adopt another library's memory"),
        "{err}"
    );
    assert_eq!(blob.to_vec().unwrap(), [1.0, 2.0, 3.0]);
}

#[test]
fn a_read_only_device_lease_lets_blobflow_read_there() {
    let (_, device) = host_device_pair();
    let blob = Blob::<f64>::with_device(&[2], device).unwrap();
    let tensor = blob
        .to_dlpack_device_as::<DLManagedTensorVersioned>(DlpackAccess::ReadOnly)
        .unwrap();
    assert!(tensor.flags().contains(DlpackFlags::READ_ONLY));
    assert_eq!(blob.asum_data().unwrap(), 0.0);
    assert!(blob.mutable_gpu_data().is_err());
    drop(tensor);
    drop(blob.mutable_gpu_data().unwrap());
}
