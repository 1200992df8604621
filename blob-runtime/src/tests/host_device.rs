//! The host device refuses what is not its own, with errors that say so.

use crate::host_device::{HostDevice, HostStream};
use crate::{DeviceBackend, DeviceBuffer, DeviceStream, Precision};

#[derive(Debug)]
struct Foreign;

impl DeviceBuffer for Foreign {
    fn len(&self) -> usize {
        4
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[derive(Debug)]
struct OtherStream;

impl DeviceStream for OtherStream {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[test]
fn foreign_buffers_streams_and_short_buffers_are_errors() {
    let device = HostDevice::new();
    let message = |e: crate::DeviceError| e.to_string();
    let err = device.upload(&[1, 2, 3, 4], &mut Foreign).unwrap_err();
    assert!(message(err).contains("not a buffer of a host device"));
    let mut own = device.alloc_zeroed(4).unwrap();
    let err = device.upload(&[0; 8], &mut *own).unwrap_err();
    assert!(message(err).contains("do not fit a 4-byte buffer"));
    let err = device
        .upload_async(&[0; 4], &mut *own, &OtherStream)
        .unwrap_err();
    assert!(message(err).contains("not a stream of a host device"));
    device
        .upload_async(&[0; 4], &mut *own, &HostStream)
        .unwrap();
    let err = device
        .axpy(Precision::F32, 2, 1.0, &Foreign, &mut *own)
        .unwrap_err();
    assert!(message(err).contains("not a buffer of a host device"));
    let err = device.asum(Precision::F64, 1, &*own).unwrap_err();
    assert!(message(err).contains("1 elements do not fit a 4-byte buffer"));
    assert_eq!(device.asum(Precision::F32, 1, &*own).unwrap(), 0.0);
}
