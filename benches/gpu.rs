//! GPU throughput (feature `cuda`): axpy, asum, dot, scal and the strided
//! sums of biases' gradients in GB/s against the device's own
//! device-to-device copy in the same run; host-to-device and
//! device-to-host GB/s from pinned and pageable memory; gemm TFLOP/s at
//! 4096. Without a GPU it says so and exits.
//!
//! Run on a GPU machine: `cargo bench --features cuda --bench gpu`

use std::time::Instant;

use blobflow::kernels::cpu::Transpose;
use blobflow::kernels::cuda::Gpu;
use blobflow::kernels::sums::SumLayout;

#[path = "support/no_gpu.rs"]
mod no_gpu;
use no_gpu::no_gpu;

fn time(gpu: &Gpu, reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    gpu.synchronize().unwrap();
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    gpu.synchronize().unwrap();
    t.elapsed().as_secs_f64() / reps as f64
}

fn main() {
    let gpu = match Gpu::new(0) {
        Ok(g) => g,
        Err(e) => return no_gpu(e),
    };
    println!("device: {}", gpu.name());
    let s = gpu.stream().clone();
    let n = 1 << 28; // 256M floats, 1 GiB
    let x = s.alloc_zeros::<f32>(n).unwrap();
    let mut y = s.alloc_zeros::<f32>(n).unwrap();
    let bytes = (n * 4) as f64;
    let copy = time(&gpu, 20, || s.memcpy_dtod(&x, &mut y).unwrap());
    let copy_gbs = 2.0 * bytes / copy / 1e9;
    println!("d2d copy        {copy_gbs:>8.1} GB/s  ratio 1.00");
    let report = |name: &str, streams: f64, t: f64| {
        let gbs = streams * bytes / t / 1e9;
        println!("{name:<15} {gbs:>8.1} GB/s  ratio {:.2}", gbs / copy_gbs);
    };
    report(
        "axpy",
        3.0,
        time(&gpu, 20, || {
            gpu.axpy(0.5f32, &x.as_view(), &mut y.as_view_mut())
                .unwrap()
        }),
    );
    report(
        "scal",
        2.0,
        time(&gpu, 20, || gpu.scal(0.5f32, &mut y.as_view_mut()).unwrap()),
    );
    report(
        "asum",
        1.0,
        time(&gpu, 20, || {
            std::hint::black_box(gpu.asum(&x.as_view()).unwrap());
        }),
    );
    report(
        "dot",
        2.0,
        time(&gpu, 20, || {
            std::hint::black_box(gpu.dot(&x.as_view(), &y.as_view()).unwrap());
        }),
    );
    // Biases' gradients as LeNet's backward pass sums them at batch 1000:
    // conv1's im2col path (rows), its cuDNN path (channels), ip1 (columns).
    let mut sums = s.alloc_zeros::<f32>(1000).unwrap();
    for (name, layout) in [
        ("sums conv1 rows", SumLayout::rows_of(20, 576_000)),
        ("sums conv1 chan", SumLayout::channels_of(1000, 20, 576)),
        ("sums ip1 cols", SumLayout::columns_of(1000, 500)),
    ] {
        let t = time(&gpu, 20, || {
            gpu.add_sums(
                &layout,
                &x.slice(..layout.span()),
                &mut sums.slice_mut(..layout.sums),
            )
            .unwrap()
        });
        let gbs = (layout.span() * 4) as f64 / t / 1e9;
        println!(
            "{name:<15} {gbs:>8.1} GB/s  ratio {:.2}  ({:.1} us)",
            gbs / copy_gbs,
            t * 1e6
        );
    }

    let m = 1 << 26; // 256 MiB transfers
    let host: Vec<f32> = vec![1.0; m];
    let mut dev = s.alloc_zeros::<f32>(m).unwrap();
    let tb = (m * 4) as f64;
    let pageable_h2d = time(&gpu, 10, || s.memcpy_htod(&host, &mut dev).unwrap());
    let mut back = vec![0f32; m];
    let pageable_d2h = time(&gpu, 10, || s.memcpy_dtoh(&dev, &mut back).unwrap());
    // SAFETY: the pinned buffer is written before it is read.
    let mut pinned = unsafe { gpu.context().alloc_pinned::<f32>(m) }.unwrap();
    pinned.as_mut_slice().unwrap().fill(1.0);
    let pinned_h2d = time(&gpu, 10, || s.memcpy_htod(&pinned, &mut dev).unwrap());
    let pinned_d2h = time(&gpu, 10, || s.memcpy_dtoh(&dev, &mut pinned).unwrap());
    for (name, t) in [
        ("H2D pageable", pageable_h2d),
        ("H2D pinned", pinned_h2d),
        ("D2H pageable", pageable_d2h),
        ("D2H pinned", pinned_d2h),
    ] {
        println!("{name:<15} {:>8.1} GB/s", tb / t / 1e9);
    }

    let k = 4096;
    let a = s.alloc_zeros::<f32>(k * k).unwrap();
    let b = s.alloc_zeros::<f32>(k * k).unwrap();
    let mut c = s.alloc_zeros::<f32>(k * k).unwrap();
    let t = time(&gpu, 10, || {
        gpu.gemm(
            Transpose::No,
            Transpose::No,
            k,
            k,
            k,
            1.0f32,
            &a.as_view(),
            &b.as_view(),
            0.0,
            &mut c.as_view_mut(),
        )
        .unwrap()
    });
    println!(
        "sgemm 4096      {:>8.1} TFLOP/s",
        2.0 * (k as f64).powi(3) / t / 1e12
    );
}
