//! Unit tests on the host device that look inside its buffers: Caffe's
//! test_syncedmem.cpp and the device half of test_blob.cpp, the state
//! table, and a model-based property test.

mod blob_math;
#[cfg(feature = "dlpack")]
mod dlpack;
mod host_device;
mod model;
mod state_table;
mod syncedmem;
mod typed_view;
mod vec;

use std::sync::Arc;

use crate::host_device::{HostDevice, HostDeviceBuffer};
use crate::{DeviceBackend, DeviceWrite};

/// Where a ported Caffe test runs: Caffe's `CPUDevice` / `GPUDevice`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Cpu,
    Gpu,
}

const MODES: [Mode; 2] = [Mode::Cpu, Mode::Gpu];

fn host_device_pair() -> (Arc<HostDevice>, Arc<dyn DeviceBackend>) {
    let d = HostDevice::new();
    let dyn_d: Arc<dyn DeviceBackend> = d.clone();
    (d, dyn_d)
}

/// The device bytes behind a write guard, for tests that write "on the GPU".
fn device_bytes<'a>(g: &'a mut DeviceWrite<'_>) -> &'a mut [u8] {
    let b: &mut HostDeviceBuffer = g.as_any_mut().downcast_mut().expect("a host device buffer");
    b.bytes_mut()
}

/// The device bytes behind a read guard.
fn device_view<'a>(g: &'a crate::DeviceRead<'_>) -> &'a [u8] {
    let b: &HostDeviceBuffer = g.as_any().downcast_ref().expect("a host device buffer");
    b.bytes()
}
