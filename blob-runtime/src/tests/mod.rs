//! Unit tests that need the test-only stand-in device (which integration
//! tests cannot see): Caffe's test_syncedmem.cpp and the device half of
//! test_blob.cpp, the state table, and a model-based property test.

mod blob_math;
mod model;
mod state_table;
mod syncedmem;
mod vec;

use std::sync::Arc;

use crate::stand_in_device::{StandInBuffer, StandInDevice};
use crate::{DeviceBackend, DeviceWrite};

/// Where a ported Caffe test runs: Caffe's `CPUDevice` / `GPUDevice`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Cpu,
    Gpu,
}

const MODES: [Mode; 2] = [Mode::Cpu, Mode::Gpu];

fn stand_in() -> (Arc<StandInDevice>, Arc<dyn DeviceBackend>) {
    let d = StandInDevice::new();
    let dyn_d: Arc<dyn DeviceBackend> = d.clone();
    (d, dyn_d)
}

/// The device bytes behind a write guard, for tests that write "on the GPU".
fn device_bytes<'a>(g: &'a mut DeviceWrite<'_>) -> &'a mut [u8] {
    let b: &mut StandInBuffer = g.as_any_mut().downcast_mut().expect("stand-in buffer");
    b.bytes_for_tests()
}

/// The device bytes behind a read guard.
fn device_view<'a>(g: &'a crate::DeviceRead<'_>) -> &'a [u8] {
    let b: &StandInBuffer = g.as_any().downcast_ref().expect("stand-in buffer");
    b.bytes_view()
}
