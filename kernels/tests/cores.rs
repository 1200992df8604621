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

#[test]
fn the_caller_runs_the_first_share_of_the_parts_in_order() {
    // Part k of a call runs on the same thread call after call, so its data
    // stays in that core's caches: the caller's share is the first
    // len / cores parts, which it claims before any helper could reach
    // them (a helper takes the others' parts only after its own, and from
    // the end). The parts sleep so that awake helpers claim their shares.
    let parts = 2 * cores();
    let caller = std::thread::current().id();
    for _ in 0..3 {
        let ran_on: Vec<std::sync::Mutex<Option<std::thread::ThreadId>>> =
            (0..parts).map(|_| std::sync::Mutex::new(None)).collect();
        let order = std::sync::Mutex::new(Vec::new());
        on_cores(0..parts, |i| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            *ran_on[i].lock().unwrap() = Some(std::thread::current().id());
            if std::thread::current().id() == caller {
                order.lock().unwrap().push(i);
            }
        });
        let own = parts / cores();
        for (i, thread) in ran_on.iter().enumerate().take(own) {
            assert_eq!(*thread.lock().unwrap(), Some(caller), "part {i} of {parts}");
        }
        let order = order.into_inner().unwrap();
        assert_eq!(&order[..own], (0..own).collect::<Vec<_>>(), "{order:?}");
    }
}
