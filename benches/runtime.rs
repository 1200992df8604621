//! Runtime costs: reshape within capacity (must not allocate), first touch
//! of 10^7 floats against a plain zeroed `Vec` doing the same work, and
//! `update` on 10^7 floats. Prints GB/s and the first-touch ratio, then
//! `update` and `scale_data` on 10^8 floats, well beyond the cache, where
//! `python3 scripts/blas_peer.py 100000000` measures OpenBLAS's saxpy and
//! sscal the same way (at 10^7 the figures depend on what the cache still
//! holds from the steps before).
//!
//! Run: `cargo bench --bench runtime`

use std::hint::black_box;
use std::time::{Duration, Instant};

use blobflow::prelude::*;
use criterion::{Criterion, Throughput};

const N: usize = 10_000_000;

fn first_touch_blob() -> f32 {
    let blob = Blob::<f32>::new(&[N]).unwrap();
    let mut d = blob.mutable_cpu_data().unwrap();
    d.fill(1.0);
    d[N - 1]
}

fn first_touch_vec() -> f32 {
    let mut v = vec![0f32; N];
    v.fill(1.0);
    black_box(&mut v);
    v[N - 1]
}

fn median_time(mut f: impl FnMut(), reps: usize) -> Duration {
    let mut t: Vec<Duration> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    t[reps / 2]
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let bytes = (N * size_of::<f32>()) as u64;

    let mut g = c.benchmark_group("runtime");
    g.bench_function("reshape_within_capacity", |b| {
        let mut blob = Blob::<f32>::new(&[64, 3, 32, 32]).unwrap();
        b.iter(|| {
            blob.reshape(black_box(&[32, 3, 32, 32])).unwrap();
            blob.reshape(black_box(&[64, 3, 32, 32])).unwrap();
        })
    });
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("first_touch_1e7_f32", |b| b.iter(first_touch_blob));
    g.bench_function("zeroed_vec_1e7_f32", |b| b.iter(first_touch_vec));
    let blob = Blob::<f32>::new(&[N]).unwrap();
    blob.mutable_cpu_data().unwrap().fill(1.0);
    blob.mutable_cpu_diff().unwrap().fill(1e-6);
    // update reads data and diff and writes data: three streams.
    g.throughput(Throughput::Bytes(3 * bytes));
    g.bench_function("update_1e7_f32", |b| b.iter(|| blob.update().unwrap()));
    g.finish();

    let blob_t = median_time(
        || {
            black_box(first_touch_blob());
        },
        15,
    );
    let vec_t = median_time(
        || {
            black_box(first_touch_vec());
        },
        15,
    );
    let upd_t = median_time(|| blob.update().unwrap(), 15);
    let gbs = |b: u64, t: Duration| b as f64 / t.as_secs_f64() / 1e9;
    println!("\nsummary (median of 15, same run):");
    println!(
        "  first touch, blob:       {:>7.2} GB/s",
        gbs(bytes, blob_t)
    );
    println!("  first touch, zeroed Vec: {:>7.2} GB/s", gbs(bytes, vec_t));
    println!(
        "  ratio blob / Vec time:   {:>7.3}  (1.0 = same cost)",
        blob_t.as_secs_f64() / vec_t.as_secs_f64()
    );
    println!(
        "  update (3 streams):      {:>7.2} GB/s",
        gbs(3 * bytes, upd_t)
    );

    // References in the same run: the same arithmetic as one plain loop on
    // one core, and a copy (two streams) as the memory's pace.
    let (data, diff) = (
        blob.cpu_data().unwrap().to_vec(),
        blob.cpu_diff().unwrap().to_vec(),
    );
    let mut one_core = data.clone();
    let loop_update_t = median_time(
        || {
            for (d, &g) in one_core.iter_mut().zip(&diff) {
                *d -= g;
            }
            black_box(&mut one_core);
        },
        15,
    );
    let loop_scale_t = median_time(
        || {
            for d in one_core.iter_mut() {
                *d *= 0.999_999;
            }
            black_box(&mut one_core);
        },
        15,
    );
    let mut copy_dst = vec![0f32; N];
    let copy_t = median_time(
        || {
            copy_dst.copy_from_slice(black_box(&data));
            black_box(&mut copy_dst);
        },
        15,
    );
    let scale_t = median_time(|| blob.scale_data(0.999_999).unwrap(), 15);
    println!(
        "  scale_data (2 streams):  {:>7.2} GB/s",
        gbs(2 * bytes, scale_t)
    );
    println!(
        "  memcpy (2 streams):      {:>7.2} GB/s",
        gbs(2 * bytes, copy_t)
    );
    println!(
        "  update / one-core loop:  {:>7.2}x faster",
        loop_update_t.as_secs_f64() / upd_t.as_secs_f64()
    );
    println!(
        "  scale_data / one-core loop: {:>4.2}x faster",
        loop_scale_t.as_secs_f64() / scale_t.as_secs_f64()
    );

    beyond_the_cache();
}

/// update and scale_data on 10^8 floats: memory-bound, so comparable with
/// another library's figure taken the same way on the same machine.
fn beyond_the_cache() {
    const BIG: usize = 100_000_000;
    let blob = Blob::<f32>::new(&[BIG]).unwrap();
    blob.mutable_cpu_data().unwrap().fill(0.5);
    blob.mutable_cpu_diff().unwrap().fill(1e-6);
    let gb = (BIG * size_of::<f32>()) as f64 / 1e9;
    let update = median_time(|| blob.update().unwrap(), 15);
    let scale = median_time(|| blob.scale_data(0.999_999).unwrap(), 15);
    println!("\n10^8 floats (median of 15; peer: python3 scripts/blas_peer.py 100000000):");
    println!(
        "  update (3 streams):      {:>7.2} GB/s",
        3.0 * gb / update.as_secs_f64()
    );
    println!(
        "  scale_data (2 streams):  {:>7.2} GB/s",
        2.0 * gb / scale.as_secs_f64()
    );
}
