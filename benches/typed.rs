//! Zero cost of typed blobs: summing a 64x3x224x224 blob through
//! `TypedBlob::offset` (static dims as constants, bounds checked) against
//! hand-written index arithmetic on the raw slice, in the same run.
//!
//! Run: `cargo bench --bench typed`

use std::hint::black_box;
use std::time::Instant;

use blobflow::blob;

type Images = blob!(f32; 64, 3, 224, 224);

fn best_of(reps: usize, mut f: impl FnMut() -> f32) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let blob = Images::new().unwrap();
    for (i, v) in blob.mutable_cpu_data().unwrap().iter_mut().enumerate() {
        *v = (i % 7) as f32;
    }
    let data = blob.cpu_data().unwrap();
    let typed = || {
        let mut s = 0f32;
        for n in 0..64 {
            for c in 0..3 {
                for h in 0..224 {
                    for w in 0..224 {
                        s += data[blob.offset([n, c, h, w])];
                    }
                }
            }
        }
        s
    };
    let raw = || {
        let d: &[f32] = &data;
        let mut s = 0f32;
        for n in 0..64 {
            for c in 0..3 {
                for h in 0..224 {
                    for w in 0..224 {
                        s += d[((n * 3 + c) * 224 + h) * 224 + w];
                    }
                }
            }
        }
        s
    };
    assert_eq!(typed(), raw());
    let (t_typed, t_raw) = (best_of(7, typed), best_of(7, raw));
    println!(
        "sum of 64x3x224x224 through offset():  {:.2} ms",
        t_typed * 1e3
    );
    println!(
        "sum of 64x3x224x224 raw slice index:   {:.2} ms",
        t_raw * 1e3
    );
    println!("ratio typed / raw: {:.3} (target <= 1.05)", t_typed / t_raw);
}
