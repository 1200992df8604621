//! Every accessor in every head state: resulting head, transfers made, and
//! the bytes each side then holds (SPEC §2's table, cell by cell).

use std::sync::Arc;

use super::{device_bytes, device_view, host_device_pair};
use crate::host_device::{HostDevice, HostStream};
use crate::{Head, HostBuffer, SyncedMemory};

const N: usize = 8;
const HOST_MARK: u8 = 0x11;
const DEV_MARK: u8 = 0x22;
const SET_MARK: u8 = 0x33;

/// A memory brought into `head`, with the host holding HOST_MARK where it
/// is current and the device DEV_MARK where it is current.
fn in_state(head: Head) -> (Arc<HostDevice>, SyncedMemory) {
    let (counts, dev) = host_device_pair();
    let m = SyncedMemory::with_device(N, dev);
    match head {
        Head::Uninitialized => {}
        Head::AtCpu => m.mutable_cpu_data().unwrap().fill(HOST_MARK),
        Head::AtGpu => device_bytes(&mut m.mutable_gpu_data().unwrap()).fill(DEV_MARK),
        Head::Synced => {
            m.mutable_cpu_data().unwrap().fill(HOST_MARK);
            drop(m.gpu_data().unwrap());
        }
    }
    assert_eq!(m.head(), head);
    (counts, m)
}

#[derive(Clone, Copy, Debug)]
enum Call {
    CpuData,
    MutableCpuData,
    GpuData,
    MutableGpuData,
    SetCpuData,
    SetGpuData,
    AsyncGpuPush,
}

/// (head after, uploads, downloads, device allocations) or None for an
/// error; one row per call, one column per starting head in the order
/// Uninitialized, AtCpu, AtGpu, Synced.
type Cell = Option<(Head, usize, usize, usize)>;
const TABLE: [(Call, [Cell; 4]); 7] = {
    use Head::*;
    [
        (
            Call::CpuData,
            [
                Some((AtCpu, 0, 0, 0)),
                Some((AtCpu, 0, 0, 0)),
                Some((Synced, 0, 1, 0)),
                Some((Synced, 0, 0, 0)),
            ],
        ),
        (
            Call::MutableCpuData,
            [
                Some((AtCpu, 0, 0, 0)),
                Some((AtCpu, 0, 0, 0)),
                Some((AtCpu, 0, 1, 0)),
                Some((AtCpu, 0, 0, 0)),
            ],
        ),
        (
            Call::GpuData,
            [
                Some((AtGpu, 0, 0, 1)),
                Some((Synced, 1, 0, 1)),
                Some((AtGpu, 0, 0, 0)),
                Some((Synced, 0, 0, 0)),
            ],
        ),
        (
            Call::MutableGpuData,
            [
                Some((AtGpu, 0, 0, 1)),
                Some((AtGpu, 1, 0, 1)),
                Some((AtGpu, 0, 0, 0)),
                Some((AtGpu, 0, 0, 0)),
            ],
        ),
        (Call::SetCpuData, [Some((AtCpu, 0, 0, 0)); 4]),
        (Call::SetGpuData, [Some((AtGpu, 0, 0, 1)); 4]),
        (
            Call::AsyncGpuPush,
            [None, Some((Synced, 1, 0, 1)), None, None],
        ),
    ]
};

const HEADS: [Head; 4] = [Head::Uninitialized, Head::AtCpu, Head::AtGpu, Head::Synced];

/// What the current side must hold after `call` from `start`.
fn expected_byte(call: Call, start: Head) -> u8 {
    match call {
        Call::SetCpuData | Call::SetGpuData => SET_MARK,
        _ => match start {
            Head::Uninitialized => 0,
            Head::AtCpu | Head::Synced => HOST_MARK,
            Head::AtGpu => DEV_MARK,
        },
    }
}

#[test]
fn every_accessor_in_every_head_state() {
    for (call, row) in TABLE {
        for (start, cell) in HEADS.into_iter().zip(row) {
            let (counts, m) = in_state(start);
            let (up0, down0, alloc0) = (counts.uploads(), counts.downloads(), counts.allocs());
            let seen: Option<Vec<u8>> = match call {
                Call::CpuData => m.cpu_data().ok().map(|g| g.to_vec()),
                Call::MutableCpuData => m.mutable_cpu_data().ok().map(|g| g.to_vec()),
                Call::GpuData => m.gpu_data().ok().map(|g| device_view(&g).to_vec()),
                Call::MutableGpuData => m
                    .mutable_gpu_data()
                    .ok()
                    .map(|mut g| device_bytes(&mut g).to_vec()),
                Call::SetCpuData => m
                    .set_cpu_data(HostBuffer::from_bytes(&[SET_MARK; N]).unwrap())
                    .ok()
                    .map(|_| m.cpu_data().unwrap().to_vec()),
                Call::SetGpuData => {
                    let mut buf = m.device().unwrap().alloc_zeroed(N).unwrap();
                    let b: &mut crate::host_device::HostDeviceBuffer =
                        buf.as_any_mut().downcast_mut().unwrap();
                    b.bytes_mut().fill(SET_MARK);
                    m.set_gpu_data(buf).ok().map(|_| vec![SET_MARK; N])
                }
                Call::AsyncGpuPush => m
                    .async_gpu_push(&HostStream)
                    .ok()
                    .map(|_| device_view(&m.gpu_data().unwrap()).to_vec()),
            };
            let what = format!("{call:?} from {start:?}");
            match cell {
                None => {
                    assert!(seen.is_none(), "{what}: expected an error");
                    assert_eq!(m.head(), start, "{what}: a refused call keeps the head");
                }
                Some((head, up, down, alloc)) => {
                    let bytes = seen.unwrap_or_else(|| panic!("{what}: unexpected error"));
                    let want = expected_byte(call, start);
                    assert!(
                        bytes.iter().all(|&b| b == want),
                        "{what}: bytes {bytes:?}, want {want}"
                    );
                    if !matches!(call, Call::SetCpuData | Call::AsyncGpuPush) {
                        assert_eq!(m.head(), head, "{what}: head");
                        assert_eq!(counts.uploads() - up0, up, "{what}: uploads");
                        assert_eq!(counts.downloads() - down0, down, "{what}: downloads");
                    }
                    let allocs = counts.allocs() - alloc0;
                    assert_eq!(allocs, alloc, "{what}: device allocations");
                }
            }
        }
    }
}

#[test]
fn set_and_push_heads_before_any_later_read() {
    // SetCpuData and AsyncGpuPush were checked above through a read that
    // itself may move the head; check the head right after the call here.
    for start in HEADS {
        let (_, m) = in_state(start);
        m.set_cpu_data(HostBuffer::zeroed(N).unwrap()).unwrap();
        assert_eq!(m.head(), Head::AtCpu, "set_cpu_data from {start:?}");
        m.async_gpu_push(&HostStream).unwrap();
        assert_eq!(m.head(), Head::Synced, "async push after set_cpu_data");
    }
}

#[test]
fn gpu_accessors_without_a_device_are_errors() {
    let m = SyncedMemory::new(N);
    for e in [
        m.gpu_data().err(),
        m.mutable_gpu_data().err(),
        m.async_gpu_push(&HostStream).err(),
    ] {
        let e = e.expect("no device: error");
        assert!(e.to_string().contains("no GPU device"), "{e}");
    }
    assert_eq!(m.head(), Head::Uninitialized);
}
