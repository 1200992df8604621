//! Work shared from the calling thread: every part runs once, from any
//! thread, nested or not, and a panic in a part reaches the caller.

use std::sync::atomic::{AtomicUsize, Ordering};

use blob_kernels::cpu::{cores, on_cores};

#[test]
fn every_part_runs_exactly_once() {
    for parts in [0, 1, 2, 3, 17, 1000] {
        let hits: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
        on_cores(0..parts, |i| {
            hits[i].fetch_add(1, Ordering::Relaxed);
        });
        assert!(
            hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
            "{parts} parts"
        );
    }
}

#[test]
fn parts_write_disjoint_slices() {
    let mut v = vec![0u64; 10_007];
    let len = v.len().div_ceil(cores() * 3);
    on_cores(v.chunks_mut(len).enumerate(), |(p, chunk)| {
        for (j, x) in chunk.iter_mut().enumerate() {
            *x = (p * len + j) as u64;
        }
    });
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
}

#[test]
fn nested_and_concurrent_callers_finish() {
    let total = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..50 {
                    on_cores(0..4, |_| {
                        on_cores(0..3, |_| {
                            total.fetch_add(1, Ordering::Relaxed);
                        });
                    });
                }
            });
        }
    });
    assert_eq!(total.load(Ordering::Relaxed), 4 * 50 * 4 * 3);
}

#[test]
fn a_panicking_part_panics_the_caller_after_the_others_finish() {
    let done = AtomicUsize::new(0);
    let caught = std::panic::catch_unwind(|| {
        on_cores(0..8, |i| {
            if i == 5 {
                panic!("part 5 failed");
            }
            done.fetch_add(1, Ordering::Relaxed);
        });
    });
    let payload = caught.expect_err("the part's panic reaches the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"part 5 failed"));
    assert_eq!(done.load(Ordering::Relaxed), 7);
    // The helpers are free again.
    let after = AtomicUsize::new(0);
    on_cores(0..8, |_| {
        after.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(after.load(Ordering::Relaxed), 8);
}

#[test]
fn inside_a_rayon_pool_the_parts_use_that_pool() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    pool.install(|| {
        assert_eq!(cores(), 3);
        let hits = AtomicUsize::new(0);
        on_cores(0..10, |_| {
            hits.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(hits.load(Ordering::Relaxed), 10);
    });
}
