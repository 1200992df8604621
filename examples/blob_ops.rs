//! Times a blob's `asum_data`, `sumsq_data`, `update` and `scale_data` on
//! `N` floats (Caffe's `Blob::asum_data`, `sumsq_data`, `Update`,
//! `scale_data`), the figures `scripts/blas_peer.py` sets beside
//! OpenBLAS's `sasum`, `sdot`, `saxpy` and `sscal` measured the same way.
//! Prints one JSON object per op: its name, the median seconds per call
//! over 7 batches of at least 20 ms each, and whether this is a debug
//! build (whose figures say nothing of speed). Threads: rayon's pool
//! (`RAYON_NUM_THREADS`).
//!
//! Run: `cargo run --release --example blob_ops -- 1000000`

use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use blobflow::prelude::*;

/// Median over 7 batches of the seconds one call takes.
fn seconds_per_call(mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed().as_secs_f64() < 0.02 {
        f();
        calls += 1;
    }
    let mut batches: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                f();
            }
            t.elapsed().as_secs_f64() / f64::from(calls)
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches[3]
}

fn main() -> Result<(), BlobError> {
    let n: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        Some(Ok(n)) if n > 0 => n,
        _ => {
            eprintln!("usage: blob_ops N   (N floats, at least 1)");
            std::process::exit(2);
        }
    };
    let blob = Blob::<f32>::new(&[n])?;
    blob.mutable_cpu_data()?.fill(0.5);
    blob.mutable_cpu_diff()?.fill(1e-9);
    let report = |op: &str,
                  f: &mut dyn FnMut() -> Result<(), BlobError>|
     -> Result<(), BlobError> {
        f()?;
        let t = seconds_per_call(|| f().expect("the blob op succeeded once already"));
        let line = format!(
            "{{\"op\": \"{op}\", \"n\": {n}, \"threads\": {}, \"seconds\": {t:e}, \"debug_build\": {}}}",
            rayon::current_num_threads(),
            cfg!(debug_assertions)
        );
        // A closed stdout (piped into `head`) ends the run quietly.
        if writeln!(std::io::stdout(), "{line}").is_err() {
            std::process::exit(0);
        }
        Ok(())
    };
    report("warmup", &mut || {
        blob.asum_data().map(|v| {
            black_box(v);
        })
    })?;
    report("asum", &mut || {
        blob.asum_data().map(|v| {
            black_box(v);
        })
    })?;
    report("sumsq", &mut || {
        blob.sumsq_data().map(|v| {
            black_box(v);
        })
    })?;
    report("update", &mut || blob.update())?;
    report("scale", &mut || blob.scale_data(0.999_999))?;
    Ok(())
}
