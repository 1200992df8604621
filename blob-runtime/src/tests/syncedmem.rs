//! Caffe's test_syncedmem.cpp, with the GPU cases on the host device.

use super::{device_bytes, host_device_pair};
use crate::{Head, SyncedMemory};

#[test]
fn initialization() {
    let mem = SyncedMemory::new(10);
    assert_eq!(mem.head(), Head::Uninitialized);
    assert_eq!(mem.size(), 10);
    let p = SyncedMemory::new(10 * size_of::<f32>());
    assert_eq!(p.size(), 40);
}

#[test]
fn allocation_cpu_gpu() {
    let (_, dev) = host_device_pair();
    let mem = SyncedMemory::with_device(10, dev);
    assert_eq!(mem.cpu_data().unwrap().len(), 10);
    assert_eq!(mem.gpu_data().unwrap().len(), 10);
    assert_eq!(mem.mutable_cpu_data().unwrap().len(), 10);
    assert_eq!(mem.mutable_gpu_data().unwrap().len(), 10);
}

#[test]
fn allocation_cpu() {
    let mem = SyncedMemory::new(10);
    assert_eq!(mem.cpu_data().unwrap().len(), 10);
    assert_eq!(mem.mutable_cpu_data().unwrap().len(), 10);
}

#[test]
fn allocation_gpu() {
    let (counts, dev) = host_device_pair();
    let mem = SyncedMemory::with_device(10, dev);
    assert!(mem.gpu_data().is_ok());
    assert!(mem.mutable_gpu_data().is_ok());
    assert_eq!(counts.allocs(), 1, "device buffer allocated once and kept");
}

#[test]
fn cpu_write() {
    let mem = SyncedMemory::new(10);
    mem.mutable_cpu_data().unwrap().fill(1);
    assert_eq!(mem.head(), Head::AtCpu);
    assert!(mem.cpu_data().unwrap().iter().all(|&b| b == 1));
    mem.mutable_cpu_data().unwrap().fill(0);
    assert!(mem.cpu_data().unwrap().iter().all(|&b| b == 0));
}

#[test]
fn gpu_read() {
    let (counts, dev) = host_device_pair();
    let mem = SyncedMemory::with_device(10, dev);
    mem.mutable_cpu_data().unwrap().fill(1);
    assert_eq!(mem.head(), Head::AtCpu);
    {
        let g = mem.gpu_data().unwrap();
        assert_eq!(mem.head(), Head::Synced);
        let b = g
            .as_any()
            .downcast_ref::<crate::host_device::HostDeviceBuffer>();
        assert!(b.unwrap().bytes().iter().all(|&x| x == 1));
    }
    assert_eq!(counts.uploads(), 1);
    mem.mutable_cpu_data().unwrap().fill(0);
    assert_eq!(mem.head(), Head::AtCpu);
    let g = mem.gpu_data().unwrap();
    assert_eq!(mem.head(), Head::Synced);
    let b = g
        .as_any()
        .downcast_ref::<crate::host_device::HostDeviceBuffer>();
    assert!(b.unwrap().bytes().iter().all(|&x| x == 0));
    assert_eq!(counts.uploads(), 2);
}

#[test]
fn gpu_write() {
    let (counts, dev) = host_device_pair();
    let mem = SyncedMemory::with_device(10, dev);
    device_bytes(&mut mem.mutable_gpu_data().unwrap()).fill(1);
    assert_eq!(mem.head(), Head::AtGpu);
    assert!(mem.cpu_data().unwrap().iter().all(|&b| b == 1));
    assert_eq!(mem.head(), Head::Synced);
    device_bytes(&mut mem.mutable_gpu_data().unwrap()).fill(0);
    assert_eq!(mem.head(), Head::AtGpu);
    assert!(mem.cpu_data().unwrap().iter().all(|&b| b == 0));
    assert_eq!(mem.head(), Head::Synced);
    assert_eq!(counts.downloads(), 2);
}

#[test]
fn borrow_rules_refuse_conflicts_instead_of_aliasing() {
    let mem = SyncedMemory::new(4);
    let r1 = mem.cpu_data().unwrap();
    let r2 = mem.cpu_data().unwrap();
    let err = mem.mutable_cpu_data().expect_err("write while reading");
    assert!(err.to_string().contains("read guard"), "{err}");
    drop((r1, r2));
    let w = mem.mutable_cpu_data().unwrap();
    assert!(mem.cpu_data().is_err());
    assert!(
        mem.set_cpu_data(crate::HostBuffer::zeroed(4).unwrap())
            .is_err()
    );
    drop(w);
    assert!(mem.cpu_data().is_ok());
}

#[test]
fn set_cpu_data_swaps_and_hands_back_the_old_buffer() {
    let (counts, dev) = host_device_pair();
    let mem = SyncedMemory::with_device(4, dev);
    mem.mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[1, 2, 3, 4]);
    let _ = mem.gpu_data().unwrap();
    let old = mem
        .set_cpu_data(crate::HostBuffer::from_bytes(&[9, 9, 9, 9]).unwrap())
        .unwrap()
        .expect("previous buffer returned");
    assert_eq!(old.as_bytes(), &[1, 2, 3, 4]);
    assert_eq!(mem.head(), Head::AtCpu);
    // The device copy is stale now; a GPU read uploads the new bytes.
    let before = counts.uploads();
    let g = mem.gpu_data().unwrap();
    let b = g
        .as_any()
        .downcast_ref::<crate::host_device::HostDeviceBuffer>();
    assert_eq!(b.unwrap().bytes(), &[9, 9, 9, 9]);
    assert_eq!(counts.uploads(), before + 1);
}

#[test]
fn shared_memory_reads_from_many_threads() {
    let mem = std::sync::Arc::new(SyncedMemory::new(1024));
    mem.mutable_cpu_data().unwrap().fill(3);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let m = mem.clone();
            std::thread::spawn(move || {
                (0..50)
                    .map(|_| m.cpu_data().unwrap().iter().map(|&b| b as u64).sum::<u64>())
                    .sum::<u64>()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 50 * 3 * 1024);
    }
}

/// A writer that only retries, against readers on other threads that
/// never pause: each refused try keeps new readers out for a moment, so
/// the writer gets in (it once got 0 of 11 million tries in).
#[test]
#[cfg_attr(
    miri,
    ignore = "reader threads spinning until the writer is done take minutes under miri"
)]
fn a_writer_that_retries_gets_past_readers_that_never_pause() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let mem = Arc::new(SyncedMemory::new(1024));
    mem.mutable_cpu_data().unwrap().fill(1);
    let stop = Arc::new(AtomicBool::new(false));
    // Each reader takes its next guard before it lets the last go, so a
    // guard is alive at every moment, until a read is refused.
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (m, stop) = (mem.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut reads, mut held) = (0u64, None);
                while !stop.load(Ordering::Relaxed) {
                    match m.cpu_data() {
                        Ok(data) => {
                            reads += u64::from(data[0] > 0);
                            held = Some(data);
                        }
                        Err(_) => held = None,
                    }
                }
                drop(held);
                reads
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    let (mut writes, started) = (0, Instant::now());
    while writes < 50 && started.elapsed() < Duration::from_secs(20) {
        if let Ok(mut data) = mem.mutable_cpu_data() {
            data[0] = data[0].wrapping_add(1).max(1);
            writes += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert_eq!(writes, 50, "the writer got in {writes} times in 20 s");
    assert!(reads > 0, "the readers read meanwhile");
    // The writer's own thread still reads at once after a refused write.
    let held = mem.cpu_data().unwrap();
    assert!(mem.mutable_cpu_data().is_err());
    assert!(mem.cpu_data().is_ok());
    drop(held);
}

/// Readers on other threads that never pause kept `update` refused
/// (9 successes in 10 s against millions of `Borrowed`); `update_within`
/// waits, refusing new readers meanwhile, and gets in every time.
#[test]
#[cfg_attr(
    miri,
    ignore = "reader threads spinning until the writer is done take minutes under miri"
)]
fn a_writer_waiting_within_a_bound_gets_past_steady_readers() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    let blob = Arc::new(crate::Blob::<f32>::new(&[256]).unwrap());
    blob.mutable_cpu_data().unwrap().fill(1.0);
    blob.mutable_cpu_diff().unwrap().fill(0.0);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (b, stop) = (blob.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Refused (Borrowed) while the writer waits: read again.
                    if let Ok(data) = b.cpu_data() {
                        reads += data.iter().map(|&v| v as u64).sum::<u64>().min(1);
                    }
                }
                reads
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    for _ in 0..20 {
        blob.update_within(Duration::from_secs(5)).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(reads > 0, "the readers read meanwhile");
    // Under a guard held across the whole bound, it gives up with the
    // error that names what is held.
    let held = blob.cpu_data().unwrap();
    let err = blob.update_within(Duration::from_millis(20)).unwrap_err();
    assert!(err.to_string().contains("read guard"), "{err}");
    drop(held);
    // And readers are let in again after it gave up.
    assert!(blob.cpu_data().is_ok());
}
