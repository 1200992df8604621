//! Test code only: a "device" made of host memory that counts allocations
//! and transfers, so the GPU rows of the state table run in CPU-only CI.
//! It is never offered to users as a GPU.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use blob_kernels::cpu;

use crate::device::{DeviceBackend, DeviceBuffer, DeviceStream, Precision};
use crate::error::DeviceError;

#[derive(Debug)]
pub(crate) struct StandInBuffer {
    words: Vec<u64>,
    len: usize,
}

impl StandInBuffer {
    fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
    pub(crate) fn bytes_for_tests(&mut self) -> &mut [u8] {
        self.bytes_mut()
    }
    pub(crate) fn bytes_view(&self) -> &[u8] {
        self.bytes()
    }
}

impl DeviceBuffer for StandInBuffer {
    fn len(&self) -> usize {
        self.len
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[derive(Debug)]
pub(crate) struct StandInStream;

impl DeviceStream for StandInStream {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Counts of what the runtime asked the device to do.
#[derive(Debug, Default)]
pub(crate) struct StandInDevice {
    pub allocs: AtomicUsize,
    pub uploads: AtomicUsize,
    pub downloads: AtomicUsize,
    pub async_uploads: AtomicUsize,
    pub math_calls: AtomicUsize,
}

impl StandInDevice {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    pub fn uploads(&self) -> usize {
        self.uploads.load(Ordering::SeqCst) + self.async_uploads.load(Ordering::SeqCst)
    }
    pub fn downloads(&self) -> usize {
        self.downloads.load(Ordering::SeqCst)
    }
    pub fn allocs(&self) -> usize {
        self.allocs.load(Ordering::SeqCst)
    }
    pub fn math_calls(&self) -> usize {
        self.math_calls.load(Ordering::SeqCst)
    }
}

fn mine(b: &dyn DeviceBuffer) -> &StandInBuffer {
    b.as_any().downcast_ref().expect("a stand-in buffer")
}
fn mine_mut(b: &mut dyn DeviceBuffer) -> &mut StandInBuffer {
    b.as_any_mut().downcast_mut().expect("a stand-in buffer")
}

macro_rules! typed {
    ($p:expr, $n:expr, $buf:expr, |$x:ident| $body:expr) => {
        match $p {
            Precision::F32 => {
                let $x: &[f32] = &bytemuck::cast_slice($buf.bytes())[..$n];
                $body
            }
            Precision::F64 => {
                let $x: &[f64] = &bytemuck::cast_slice($buf.bytes())[..$n];
                $body
            }
        }
    };
}

impl DeviceBackend for StandInDevice {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> String {
        "stand-in (host memory, test only)".into()
    }
    fn alloc_zeroed(&self, bytes: usize) -> Result<Box<dyn DeviceBuffer>, DeviceError> {
        self.allocs.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(StandInBuffer {
            words: vec![0; bytes.div_ceil(8)],
            len: bytes,
        }))
    }
    fn upload(&self, src: &[u8], dst: &mut dyn DeviceBuffer) -> Result<(), DeviceError> {
        self.uploads.fetch_add(1, Ordering::SeqCst);
        mine_mut(dst).bytes_mut().copy_from_slice(src);
        Ok(())
    }
    fn download(&self, src: &dyn DeviceBuffer, dst: &mut [u8]) -> Result<(), DeviceError> {
        self.downloads.fetch_add(1, Ordering::SeqCst);
        dst.copy_from_slice(mine(src).bytes());
        Ok(())
    }
    fn upload_async(
        &self,
        src: &[u8],
        dst: &mut dyn DeviceBuffer,
        stream: &dyn DeviceStream,
    ) -> Result<(), DeviceError> {
        stream
            .as_any()
            .downcast_ref::<StandInStream>()
            .ok_or_else(|| DeviceError::new("not a stand-in stream"))?;
        self.async_uploads.fetch_add(1, Ordering::SeqCst);
        mine_mut(dst).bytes_mut().copy_from_slice(src);
        Ok(())
    }
    fn copy(
        &self,
        bytes: usize,
        src: &dyn DeviceBuffer,
        dst: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError> {
        self.math_calls.fetch_add(1, Ordering::SeqCst);
        mine_mut(dst).bytes_mut()[..bytes].copy_from_slice(&mine(src).bytes()[..bytes]);
        Ok(())
    }
    fn axpy(
        &self,
        p: Precision,
        n: usize,
        alpha: f64,
        x: &dyn DeviceBuffer,
        y: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError> {
        self.math_calls.fetch_add(1, Ordering::SeqCst);
        let (x, y) = (mine(x), mine_mut(y));
        match p {
            Precision::F32 => cpu::axpy(
                alpha as f32,
                &bytemuck::cast_slice::<u8, f32>(x.bytes())[..n],
                &mut bytemuck::cast_slice_mut::<u8, f32>(y.bytes_mut())[..n],
            ),
            Precision::F64 => cpu::axpy(
                alpha,
                &bytemuck::cast_slice::<u8, f64>(x.bytes())[..n],
                &mut bytemuck::cast_slice_mut::<u8, f64>(y.bytes_mut())[..n],
            ),
        }
        Ok(())
    }
    fn scal(
        &self,
        p: Precision,
        n: usize,
        alpha: f64,
        x: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError> {
        self.math_calls.fetch_add(1, Ordering::SeqCst);
        let x = mine_mut(x);
        match p {
            Precision::F32 => cpu::scal(
                alpha as f32,
                &mut bytemuck::cast_slice_mut::<u8, f32>(x.bytes_mut())[..n],
            ),
            Precision::F64 => cpu::scal(
                alpha,
                &mut bytemuck::cast_slice_mut::<u8, f64>(x.bytes_mut())[..n],
            ),
        }
        Ok(())
    }
    fn asum(&self, p: Precision, n: usize, x: &dyn DeviceBuffer) -> Result<f64, DeviceError> {
        self.math_calls.fetch_add(1, Ordering::SeqCst);
        Ok(typed!(p, n, mine(x), |v| cpu::asum(v) as f64))
    }
    fn dot(
        &self,
        p: Precision,
        n: usize,
        x: &dyn DeviceBuffer,
        y: &dyn DeviceBuffer,
    ) -> Result<f64, DeviceError> {
        self.math_calls.fetch_add(1, Ordering::SeqCst);
        let y = mine(y);
        Ok(typed!(p, n, mine(x), |v| {
            let w = &bytemuck::cast_slice(y.bytes())[..n];
            cpu::dot(v, w) as f64
        }))
    }
}
