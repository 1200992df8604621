//! The math half of Caffe's test_blob.cpp (sumsq, asum, scale), for f32 and
//! f64, once with the head on the CPU and once on the host device.

use blob_kernels::cpu;

use super::{MODES, Mode, host_device_pair};
use crate::{Blob, Head, MathElement};

fn filled_blob<T: MathElement>(
    mode: Mode,
) -> (
    Blob<T>,
    Option<std::sync::Arc<crate::host_device::HostDevice>>,
) {
    let (blob, counts) = match mode {
        Mode::Cpu => (Blob::<T>::new(&[2, 3, 4, 5]).unwrap(), None),
        Mode::Gpu => {
            let (counts, dev) = host_device_pair();
            (
                Blob::<T>::with_device(&[2, 3, 4, 5], dev).unwrap(),
                Some(counts),
            )
        }
    };
    (blob, counts)
}

fn fill_uniform<T: MathElement>(blob: &Blob<T>) {
    cpu::set_seed(1701);
    cpu::uniform(
        T::from_f64(-3.0),
        T::from_f64(3.0),
        &mut blob.mutable_cpu_data().unwrap(),
    )
    .unwrap();
}

/// Move the data head to the mode's side, so the reduction runs there.
fn touch_data<T: MathElement>(blob: &Blob<T>, mode: Mode) {
    match mode {
        Mode::Cpu => drop(blob.mutable_cpu_data().unwrap()),
        Mode::Gpu => drop(blob.mutable_gpu_data().unwrap()),
    }
}

fn touch_diff<T: MathElement>(blob: &Blob<T>, mode: Mode) {
    match mode {
        Mode::Cpu => drop(blob.mutable_cpu_diff().unwrap()),
        Mode::Gpu => drop(blob.mutable_gpu_diff().unwrap()),
    }
}

fn near<T: MathElement>(want: T, got: T, what: &str) {
    let (w, g) = (want.to_f64(), got.to_f64());
    assert!((w - g).abs() <= 1e-6 * w.abs(), "{what}: want {w}, got {g}");
}

fn sum_of_squares<T: MathElement>() {
    for mode in MODES {
        let (blob, counts) = filled_blob::<T>(mode);
        assert_eq!(blob.sumsq_data().unwrap(), T::ZERO);
        assert_eq!(blob.sumsq_diff().unwrap(), T::ZERO);
        fill_uniform(&blob);
        let expected: T = blob.cpu_data().unwrap().iter().map(|&v| v * v).sum();
        touch_data(&blob, mode);
        near(expected, blob.sumsq_data().unwrap(), "sumsq_data");
        assert_eq!(blob.sumsq_diff().unwrap(), T::ZERO);
        let seven = T::from_f64(7.0);
        cpu::scale(
            seven,
            &blob.cpu_data().unwrap(),
            &mut blob.mutable_cpu_diff().unwrap(),
        );
        touch_diff(&blob, mode);
        near(
            expected,
            blob.sumsq_data().unwrap(),
            "sumsq_data after diff",
        );
        near(
            expected * seven * seven,
            blob.sumsq_diff().unwrap(),
            "sumsq_diff",
        );
        if let Some(c) = counts {
            assert!(
                c.math_calls() >= 3,
                "{mode:?}: reductions ran on the device"
            );
            assert_eq!(blob.diff_head(), Head::AtGpu);
        }
    }
}

fn asum<T: MathElement>() {
    for mode in MODES {
        let (blob, counts) = filled_blob::<T>(mode);
        assert_eq!(blob.asum_data().unwrap(), T::ZERO);
        assert_eq!(blob.asum_diff().unwrap(), T::ZERO);
        fill_uniform(&blob);
        let expected: T = blob.cpu_data().unwrap().iter().map(|&v| v.abs()).sum();
        touch_data(&blob, mode);
        near(expected, blob.asum_data().unwrap(), "asum_data");
        assert_eq!(blob.asum_diff().unwrap(), T::ZERO);
        let seven = T::from_f64(7.0);
        cpu::scale(
            seven,
            &blob.cpu_data().unwrap(),
            &mut blob.mutable_cpu_diff().unwrap(),
        );
        touch_diff(&blob, mode);
        near(expected, blob.asum_data().unwrap(), "asum_data after diff");
        near(expected * seven, blob.asum_diff().unwrap(), "asum_diff");
        if let Some(c) = counts {
            assert!(
                c.math_calls() >= 3,
                "{mode:?}: reductions ran on the device"
            );
        }
    }
}

fn scale_data<T: MathElement>() {
    for mode in MODES {
        let (blob, _) = filled_blob::<T>(mode);
        assert_eq!(blob.asum_data().unwrap(), T::ZERO);
        assert_eq!(blob.asum_diff().unwrap(), T::ZERO);
        fill_uniform(&blob);
        let before = blob.asum_data().unwrap();
        touch_data(&blob, mode);
        let three = T::from_f64(3.0);
        blob.scale_data(three).unwrap();
        near(
            before * three,
            blob.asum_data().unwrap(),
            "scaled asum_data",
        );
        assert_eq!(blob.asum_diff().unwrap(), T::ZERO);
        let seven = T::from_f64(7.0);
        cpu::scale(
            seven,
            &blob.cpu_data().unwrap(),
            &mut blob.mutable_cpu_diff().unwrap(),
        );
        near(before * three, blob.asum_data().unwrap(), "asum_data");
        let diff_before = before * three * seven;
        near(diff_before, blob.asum_diff().unwrap(), "asum_diff = 21x");
        touch_diff(&blob, mode);
        blob.scale_diff(three).unwrap();
        near(
            before * three,
            blob.asum_data().unwrap(),
            "asum_data unchanged",
        );
        near(
            diff_before * three,
            blob.asum_diff().unwrap(),
            "asum_diff = 63x",
        );
        if mode == Mode::Gpu {
            assert_eq!(blob.diff_head(), Head::AtGpu, "scale ran on the device");
        }
    }
}

#[test]
fn sum_of_squares_f32() {
    sum_of_squares::<f32>();
}
#[test]
fn sum_of_squares_f64() {
    sum_of_squares::<f64>();
}
#[test]
fn asum_f32() {
    asum::<f32>();
}
#[test]
fn asum_f64() {
    asum::<f64>();
}
#[test]
fn scale_data_f32() {
    scale_data::<f32>();
}
#[test]
fn scale_data_f64() {
    scale_data::<f64>();
}

#[test]
fn update_runs_on_the_device_when_the_head_is_there() {
    let (counts, dev) = host_device_pair();
    let blob = Blob::<f32>::with_device(&[4], dev).unwrap();
    blob.mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
    blob.mutable_cpu_diff().unwrap().fill(0.5);
    drop(blob.gpu_data().unwrap()); // SYNCED
    blob.update().unwrap();
    assert_eq!(
        blob.data_head(),
        Head::AtGpu,
        "Caffe: GPU update leaves the head at GPU"
    );
    assert_eq!(counts.math_calls(), 1);
    assert_eq!(&*blob.cpu_data().unwrap(), &[0.5, 1.5, 2.5, 3.5]);
}

#[test]
fn copy_from_on_the_device_side() {
    let (counts, dev) = host_device_pair();
    let src = Blob::<f64>::with_device(&[3], dev.clone()).unwrap();
    super::device_bytes(&mut src.mutable_gpu_data().unwrap())
        .copy_from_slice(bytemuck::cast_slice(&[1.0f64, 2.0, 3.0]));
    let mut dst = Blob::<f64>::with_device(&[3], dev).unwrap();
    dst.copy_from(&src, false).unwrap();
    assert_eq!(dst.data_head(), Head::AtGpu);
    assert_eq!(counts.math_calls(), 1, "device-to-device copy");
    assert_eq!(&*dst.cpu_data().unwrap(), &[1.0, 2.0, 3.0]);
}

/// A net goes to a device blob by blob: data and diff both arrive, and a
/// buffer never written stays unallocated.
#[test]
fn move_to_takes_data_and_diff() {
    let (counts, dev) = host_device_pair();
    let mut w = Blob::<f32>::new(&[2, 2]).unwrap();
    w.mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
    w.mutable_cpu_diff().unwrap().fill(0.25);
    w.move_to(dev.clone()).unwrap();
    assert!(w.device().is_some_and(|d| std::sync::Arc::ptr_eq(d, &dev)));
    drop(w.gpu_data().unwrap());
    drop(w.gpu_diff().unwrap());
    assert_eq!(counts.uploads(), 2, "data and diff on the device");
    assert_eq!(w.to_vec().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(w.diff_to_vec().unwrap(), [0.25; 4]);

    let mut untouched = Blob::<f32>::new(&[3]).unwrap();
    untouched.move_to(dev.clone()).unwrap();
    assert_eq!(
        (untouched.data_head(), untouched.diff_head()),
        (Head::Uninitialized, Head::Uninitialized)
    );

    let allocs = counts.allocs();
    w.move_to(dev).unwrap(); // already there
    assert_eq!(counts.allocs(), allocs);
    assert_eq!(w.to_vec().unwrap(), [1.0, 2.0, 3.0, 4.0]);
}

/// Between two devices a copy goes through the host (a device copy would
/// hand one backend the other's buffer), and a blob moves from one device
/// to another with its values.
#[test]
fn copy_and_move_between_two_devices() {
    let (first, dev1) = host_device_pair();
    let (second, dev2) = host_device_pair();
    let src = Blob::<f32>::with_device(&[3], dev1).unwrap();
    super::device_bytes(&mut src.mutable_gpu_data().unwrap())
        .copy_from_slice(bytemuck::cast_slice(&[1.0f32, 2.0, 3.0]));
    let mut dst = Blob::<f32>::with_device(&[3], dev2.clone()).unwrap();
    dst.copy_from(&src, false).unwrap();
    assert_eq!(dst.to_vec().unwrap(), [1.0, 2.0, 3.0]);
    assert_eq!((first.math_calls(), second.math_calls()), (0, 0));
    assert_eq!(first.downloads(), 1);

    let mut moved = src;
    moved.move_to(dev2.clone()).unwrap();
    assert!(
        moved
            .device()
            .is_some_and(|d| std::sync::Arc::ptr_eq(d, &dev2))
    );
    assert_eq!(moved.to_vec().unwrap(), [1.0, 2.0, 3.0]);
}

#[test]
fn gpu_shape_holds_the_dims_on_the_device() {
    let (counts, dev) = host_device_pair();
    let blob = Blob::<f32>::with_device(&[2, 3, 4], dev).unwrap();
    let shape = blob.gpu_shape().unwrap();
    assert_eq!(shape.head(), Head::Synced);
    assert_eq!(counts.uploads(), 1);
    let g = shape.gpu_data().unwrap();
    let dims: &[i32] = bytemuck::cast_slice(super::device_view(&g));
    assert_eq!(dims, &[2, 3, 4]);
}

/// Caffe's ClearParamDiffs: the diff becomes zero (NaN included) on the
/// side that holds it, with nothing brought back to the host.
fn clear_diff<T: MathElement>() {
    for mode in MODES {
        let (blob, counts) = filled_blob::<T>(mode);
        fill_uniform(&blob);
        cpu::scale(
            T::from_f64(2.0),
            &blob.cpu_data().unwrap(),
            &mut blob.mutable_cpu_diff().unwrap(),
        );
        blob.mutable_cpu_diff().unwrap()[5] = T::from_f64(f64::NAN);
        touch_diff(&blob, mode);
        let downloads = counts.as_ref().map(|c| c.downloads());
        blob.clear_diff().unwrap();
        if let Some(c) = &counts {
            assert_eq!(blob.diff_head(), Head::AtGpu, "cleared on the device");
            assert_eq!(Some(c.downloads()), downloads, "nothing came back");
        }
        assert!(blob.cpu_diff().unwrap().iter().all(|&v| v == T::ZERO));
        assert!(blob.asum_data().unwrap() > T::ZERO, "data untouched");
    }
}

#[test]
fn clear_diff_f32() {
    clear_diff::<f32>();
}
#[test]
fn clear_diff_f64() {
    clear_diff::<f64>();
}
