//! Caffe's test_blob.cpp (shape and CPU cases) and the differences of
//! SPEC §7, through the public API.

use blobflow::prelude::*;

#[test]
fn initialization() {
    let blob = Blob::<f32>::from_nchw(2, 3, 4, 5).unwrap();
    assert_eq!(blob.num().unwrap(), 2);
    assert_eq!(blob.channels().unwrap(), 3);
    assert_eq!(blob.height().unwrap(), 4);
    assert_eq!(blob.width().unwrap(), 5);
    assert_eq!(blob.count(), 120);
    let empty = Blob::<f32>::default();
    assert_eq!(empty.num_axes(), 0);
    assert_eq!(empty.count(), 0);
    assert_eq!(empty.shape_string(), "(0)");
    assert!(empty.cpu_data().unwrap().is_empty());
}

#[test]
fn pointers_cpu() {
    let blob = Blob::<f64>::from_nchw(2, 3, 4, 5).unwrap();
    assert_eq!(blob.cpu_data().unwrap().len(), 120);
    assert_eq!(blob.mutable_cpu_data().unwrap().len(), 120);
    assert_eq!(blob.cpu_diff().unwrap().len(), 120);
    assert_eq!(blob.mutable_cpu_diff().unwrap().len(), 120);
}

#[test]
fn reshape() {
    let mut blob = Blob::<f32>::default();
    blob.reshape_nchw(2, 3, 4, 5).unwrap();
    assert_eq!(blob.num().unwrap(), 2);
    assert_eq!(blob.channels().unwrap(), 3);
    assert_eq!(blob.height().unwrap(), 4);
    assert_eq!(blob.width().unwrap(), 5);
    assert_eq!(blob.count(), 120);
}

#[test]
fn reshape_zero() {
    let mut blob = Blob::<f32>::default();
    blob.reshape(&[0, 5]).unwrap();
    assert_eq!(blob.count(), 0);
    assert!(blob.cpu_data().unwrap().is_empty());
    assert_eq!(blob.asum_data().unwrap(), 0.0);
    blob.update().unwrap();
    blob.scale_diff(2.0).unwrap();
}

#[test]
fn scalar_blob_has_count_one() {
    let blob = Blob::<f32>::new(&[]).unwrap();
    assert_eq!(blob.count(), 1);
    assert_eq!(blob.shape_string(), "(1)");
    assert_eq!(blob.data_at(&[]), 0.0);
}

#[test]
fn reshape_keeps_contents_within_capacity_and_replaces_beyond() {
    let mut blob = Blob::<f32>::new(&[2, 3]).unwrap();
    blob.mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[1., 2., 3., 4., 5., 6.]);
    let before = std::sync::Arc::as_ptr(blob.data());
    blob.reshape(&[3, 2]).unwrap();
    assert_eq!(
        std::sync::Arc::as_ptr(blob.data()),
        before,
        "no reallocation"
    );
    assert_eq!(blob.data_at(&[2, 1]), 6.0);
    assert_eq!(blob.data_head(), Head::AtCpu, "head kept");
    blob.reshape(&[1]).unwrap();
    assert_eq!(blob.capacity(), 6, "shrinking keeps memory, as in Caffe");
    blob.reshape(&[7]).unwrap();
    assert_ne!(std::sync::Arc::as_ptr(blob.data()), before);
    assert_eq!(blob.data_head(), Head::Uninitialized);
    assert!(
        blob.cpu_data().unwrap().iter().all(|&v| v == 0.0),
        "fresh zero fill"
    );
}

#[test]
fn too_many_axes_and_overflow_are_errors() {
    let err = Blob::<f32>::new(&[1; 33]).unwrap_err();
    assert!(
        err.to_string().contains("33 axes exceed the maximum of 32"),
        "{err}"
    );
    assert!(Blob::<f32>::new(&[1; 32]).is_ok());
    let err = Blob::<f32>::new(&[1 << 40, 1 << 40]).unwrap_err();
    assert!(matches!(err, BlobError::CountOverflow { .. }), "{err}");
    // Bytes overflow too: count fits usize, count * 8 does not.
    assert!(Blob::<f64>::new(&[usize::MAX / 4]).is_err());
}

#[test]
fn counts_beyond_i32_are_representable() {
    // No memory is touched, so this costs nothing: Caffe refuses at Reshape.
    let blob = Blob::<u32>::new(&[3, 1 << 30]).unwrap();
    assert_eq!(blob.count(), 3 << 30);
    assert_eq!(blob.offset(&[2, (1 << 30) - 1]), (3 << 30) - 1);
}

#[test]
fn count_ranges_and_axes() {
    let blob = Blob::<f32>::new(&[2, 3, 4, 5]).unwrap();
    assert_eq!(blob.count_range(0, 4).unwrap(), 120);
    assert_eq!(blob.count_range(1, 3).unwrap(), 12);
    assert_eq!(blob.count_range(4, 4).unwrap(), 1);
    assert_eq!(blob.count_from(2).unwrap(), 20);
    assert!(blob.count_range(2, 5).is_err());
    assert_eq!(blob.shape_at(-4).unwrap(), 2);
    let err = blob.shape_at(-5).unwrap_err();
    assert_eq!(
        err.to_string(),
        "axis -5 out of range for 4-D blob with shape 2 3 4 5 (120)"
    );
}

#[test]
fn legacy_shape_alignment() {
    let blob = Blob::<f32>::new(&[3, 2]).unwrap();
    assert_eq!(
        (0..4)
            .map(|i| blob.legacy_shape(i).unwrap())
            .collect::<Vec<_>>(),
        [3, 2, 1, 1]
    );
    assert_eq!(
        (-4..0)
            .map(|i| blob.legacy_shape(i).unwrap())
            .collect::<Vec<_>>(),
        [1, 1, 3, 2]
    );
    assert!(blob.legacy_shape(4).is_err());
    assert!(blob.legacy_shape(-5).is_err());
    let five = Blob::<f32>::new(&[1, 2, 3, 4, 5]).unwrap();
    let err = five.num().unwrap_err();
    assert!(err.to_string().contains("legacy"), "{err}");
}

#[test]
fn offsets_are_strict_and_strides_explicit() {
    let blob = Blob::<f32>::new(&[2, 3, 4, 5]).unwrap();
    assert_eq!(blob.offset(&[1, 2, 3, 4]), 119);
    assert_eq!(blob.offset(&[0, 1]), 20);
    assert_eq!(blob.legacy_offset(1, 0, 0, 0), 60);
    assert_eq!(blob.strides(), [60, 20, 5, 1]);
    assert_eq!(blob.stride(1).unwrap(), 20);
    // Caffe accepts n == num here (inclusive check, issue 3420).
    assert!(blob.try_offset(&[2, 0, 0, 0]).is_err());
    assert!(blob.try_offset(&[0, 0, 0, 0, 0]).is_err());
}

#[test]
#[should_panic(expected = "index [0, 3] out of bounds for blob with shape 2 3 4 5 (120)")]
fn offset_out_of_bounds_panics_with_shape_and_index() {
    Blob::<f32>::new(&[2, 3, 4, 5]).unwrap().offset(&[0, 3]);
}

#[test]
#[should_panic(expected = "out of bounds")]
fn legacy_offset_is_strict() {
    Blob::<f32>::new(&[2, 3, 4, 5])
        .unwrap()
        .legacy_offset(2, 0, 0, 0);
}

#[test]
fn copy_from_refuses_different_shapes_of_equal_count() {
    let src = Blob::<f32>::new(&[2, 3, 4, 5]).unwrap();
    let mut dst = Blob::<f32>::new(&[2, 3, 20]).unwrap();
    let err = dst.copy_from(&src, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot copy blob of shape 2 3 4 5 (120) into 2 3 20 (120): shapes differ"
    );
    src.mutable_cpu_diff().unwrap().fill(-1.0);
    dst.copy_from_reshaping(&src, true).unwrap();
    assert_eq!(dst.shape(), src.shape());
    assert_eq!(dst.asum_diff().unwrap(), 120.0);
    assert_eq!(
        dst.data_head(),
        Head::Uninitialized,
        "only the diff was copied"
    );
}

#[test]
fn share_data_keeps_capacity_honest() {
    // Caffe issue 5439: after ShareData with a smaller blob, a reshape
    // within the stale capacity wrote past the shared buffer.
    let small = Blob::<f32>::new(&[4]).unwrap();
    let mut big = Blob::<f32>::new(&[100]).unwrap();
    big.reshape(&[4]).unwrap();
    big.share_data(&small).unwrap();
    assert_eq!(big.capacity(), 4);
    big.reshape(&[50]).unwrap();
    assert!(
        !std::sync::Arc::ptr_eq(big.data(), small.data()),
        "reallocated, not overrun"
    );
    assert_eq!(small.cpu_data().unwrap().len(), 4);
    let err = big.share_data(&small).unwrap_err();
    assert!(err.to_string().contains("4 elements but 50"), "{err}");
}

#[test]
fn shared_data_is_safe_across_threads() {
    let a = Blob::<f32>::new(&[1000]).unwrap();
    a.mutable_cpu_data().unwrap().fill(1.0);
    let mut b = Blob::<f32>::new(&[1000]).unwrap();
    b.share_data(&a).unwrap();
    let total = std::thread::scope(|s| {
        let ha = s.spawn(|| a.asum_data().unwrap());
        let hb = s.spawn(|| b.asum_data().unwrap());
        ha.join().unwrap() + hb.join().unwrap()
    });
    assert_eq!(total, 2000.0);
    // A write while another thread's reader is alive is refused, not raced.
    let guard = a.cpu_data().unwrap();
    std::thread::scope(|s| {
        let r = s.spawn(|| b.mutable_cpu_data().map(|_| ()));
        let err = r.join().unwrap().unwrap_err();
        assert!(matches!(err, BlobError::Borrowed { .. }), "{err}");
    });
    drop(guard);
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Blob<f32>>();
    assert_send_sync::<Blob<u32>>();
}

#[test]
fn update_requires_touched_memory() {
    let blob = Blob::<f32>::new(&[3]).unwrap();
    let err = blob.update().unwrap_err();
    assert!(err.to_string().contains("not initialized"), "{err}");
}

#[test]
fn gpu_accessors_without_a_device_say_so() {
    let blob = Blob::<f32>::new(&[3]).unwrap();
    let err = blob.gpu_data().unwrap_err();
    assert_eq!(
        err.to_string(),
        "gpu_data: no GPU device is attached to this memory; create it with a device"
    );
}

#[test]
fn integer_blobs_store_and_copy() {
    let mut labels = Blob::<i32>::new(&[4]).unwrap();
    labels
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[3, -1, 4, 1]);
    let mut copy = Blob::<i32>::default();
    copy.copy_from_reshaping(&labels, false).unwrap();
    assert_eq!(&*copy.cpu_data().unwrap(), &[3, -1, 4, 1]);
    labels.shrink_to_fit().unwrap();
}

#[test]
fn set_cpu_data_after_shrink_replaces_both_buffers() {
    let mut blob = Blob::<f32>::new(&[10]).unwrap();
    blob.mutable_cpu_diff().unwrap().fill(9.0);
    blob.reshape(&[2]).unwrap();
    blob.set_cpu_data(HostBuffer::from_slice(&[1.0f32, 2.0]).unwrap())
        .unwrap();
    assert_eq!(blob.capacity(), 2);
    assert_eq!(&*blob.cpu_data().unwrap(), &[1.0, 2.0]);
    assert_eq!(
        &*blob.cpu_diff().unwrap(),
        &[0.0, 0.0],
        "diff replaced, as in Caffe"
    );
}
