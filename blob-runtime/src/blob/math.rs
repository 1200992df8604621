//! Update, asum, sumsq and scale, dispatched on the head as Caffe does:
//! on the host when the head is at CPU, on the device when it is at GPU or
//! synced, and a no-op (or 0) when nothing was ever touched.

use blob_kernels::cpu;

use super::Blob;
use super::memory::{CpuMut, CpuRef};
use crate::element::MathElement;
use crate::error::{BlobError, Result};
use crate::head::Head;
use crate::synced_memory::SyncedMemory;

fn device_err(op: &'static str) -> impl FnOnce(crate::DeviceError) -> BlobError {
    move |source| BlobError::Device { op, source }
}

impl<T: MathElement> Blob<T> {
    /// `data -= diff` (Caffe `Update`), on the side of the data's head.
    /// Memory never touched is an error (Caffe aborts with "Syncedmem not
    /// initialized."); an empty blob is a no-op.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f64>::new(&[2])?;
    /// assert!(b.update().is_err()); // nothing written yet
    /// b.mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0]);
    /// b.mutable_cpu_diff()?.copy_from_slice(&[0.5, 0.5]);
    /// b.update()?;
    /// assert_eq!(&*b.cpu_data()?, &[0.5, 1.5]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn update(&self) -> Result<()> {
        let op = "update";
        if self.count == 0 {
            return Ok(());
        }
        match self.data.head() {
            Head::Uninitialized => Err(BlobError::Uninitialized { op }),
            Head::AtCpu => {
                let diff: CpuRef<'_, T> = self.cpu_diff()?;
                let mut data: CpuMut<'_, T> = self.mutable_cpu_data()?;
                cpu::axpy(-T::ONE, &diff, &mut data);
                Ok(())
            }
            Head::AtGpu | Head::Synced => {
                let diff = self.gpu_diff()?;
                let mut data = self.mutable_gpu_data()?;
                let backend = data.backend().clone();
                backend
                    .axpy(T::PRECISION, self.count, -1.0, &*diff, &mut *data)
                    .map_err(device_err(op))
            }
        }
    }

    /// [`update`](Self::update), waiting at most `timeout` for the guards
    /// alive on the data to go (readers on other threads that never pause
    /// would keep `update` refused, `Borrowed`, for as long as they read;
    /// retrying in a loop spins without getting in). New readers are
    /// refused while it waits.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = blob_runtime::Blob::<f32>::new(&[2])?;
    /// b.mutable_cpu_data()?.fill(1.0);
    /// b.mutable_cpu_diff()?.fill(0.25);
    /// b.update_within(Duration::from_secs(1))?;
    /// assert_eq!(b.to_vec()?, [0.75, 0.75]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn update_within(&self, timeout: std::time::Duration) -> Result<()> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            match self.update() {
                Err(BlobError::Borrowed { .. })
                    if self.data.wait_writable(
                        deadline.saturating_duration_since(std::time::Instant::now()),
                    ) => {}
                other => {
                    self.data.stop_waiting();
                    return other;
                }
            }
        }
    }

    fn reduce(
        &self,
        op: &'static str,
        mem: &SyncedMemory,
        on_cpu: fn(&[T]) -> T,
        square: bool,
    ) -> Result<T> {
        if self.count == 0 {
            return Ok(T::ZERO);
        }
        match mem.head() {
            Head::Uninitialized => Ok(T::ZERO),
            Head::AtCpu => {
                let guard = mem.cpu_data()?;
                let x: &[T] = &bytemuck::cast_slice(&guard)[..self.count];
                Ok(on_cpu(x))
            }
            Head::AtGpu | Head::Synced => {
                let x = mem.gpu_data()?;
                let b = x.backend().clone();
                let v = if square {
                    b.dot(T::PRECISION, self.count, &*x, &*x)
                } else {
                    b.asum(T::PRECISION, self.count, &*x)
                };
                v.map(T::from_f64).map_err(device_err(op))
            }
        }
    }

    /// Sum of `|data|` (Caffe `asum_data`); 0 for untouched memory.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// assert_eq!(b.asum_data().unwrap(), 0.0);
    /// b.mutable_cpu_data().unwrap().copy_from_slice(&[-1.0, 2.0]);
    /// assert_eq!(b.asum_data().unwrap(), 3.0);
    /// ```
    pub fn asum_data(&self) -> Result<T> {
        self.reduce("asum_data", &self.data, cpu::asum, false)
    }

    /// Sum of `|diff|` (Caffe `asum_diff`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// b.mutable_cpu_diff().unwrap().copy_from_slice(&[-1.0, 2.0]);
    /// assert_eq!(b.asum_diff().unwrap(), 3.0);
    /// ```
    pub fn asum_diff(&self) -> Result<T> {
        self.reduce("asum_diff", &self.diff, cpu::asum, false)
    }

    /// Sum of squares of the data (Caffe `sumsq_data`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// b.mutable_cpu_data().unwrap().copy_from_slice(&[3.0, 4.0]);
    /// assert_eq!(b.sumsq_data().unwrap(), 25.0);
    /// ```
    pub fn sumsq_data(&self) -> Result<T> {
        self.reduce("sumsq_data", &self.data, cpu::sumsq, true)
    }

    /// Sum of squares of the diff (Caffe `sumsq_diff`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f64>::new(&[1]).unwrap();
    /// b.mutable_cpu_diff().unwrap()[0] = 3.0;
    /// assert_eq!(b.sumsq_diff().unwrap(), 9.0);
    /// ```
    pub fn sumsq_diff(&self) -> Result<T> {
        self.reduce("sumsq_diff", &self.diff, cpu::sumsq, true)
    }

    fn scale_mem(&self, op: &'static str, mem: &SyncedMemory, factor: T) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        match mem.head() {
            Head::Uninitialized => Ok(()),
            Head::AtCpu => {
                let mut guard = mem.mutable_cpu_data()?;
                let x: &mut [T] = &mut bytemuck::cast_slice_mut(&mut guard)[..self.count];
                cpu::scal(factor, x);
                Ok(())
            }
            Head::AtGpu | Head::Synced => {
                let mut x = mem.mutable_gpu_data()?;
                let b = x.backend().clone();
                b.scal(T::PRECISION, self.count, factor.to_f64(), &mut *x)
                    .map_err(device_err(op))
            }
        }
    }

    /// Sets the diff to zero on the side of its head, as Caffe's
    /// `Net::ClearParamDiffs` does before each backward pass (`caffe_set`,
    /// or `caffe_gpu_set` on `mutable_gpu_diff`): a diff on the GPU stays
    /// there. Unlike `scale_diff(0.0)`, a NaN becomes zero too.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// b.mutable_cpu_diff().unwrap().copy_from_slice(&[f32::NAN, 2.0]);
    /// b.clear_diff().unwrap();
    /// assert_eq!(&*b.cpu_diff().unwrap(), &[0.0, 0.0]);
    /// ```
    pub fn clear_diff(&self) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        match self.diff.head() {
            // Zero-filled on first touch anyway.
            Head::Uninitialized => Ok(()),
            Head::AtCpu => {
                self.mutable_cpu_diff()?.fill(T::ZERO);
                Ok(())
            }
            Head::AtGpu | Head::Synced => {
                let mut x = self.diff.mutable_gpu_data()?;
                let b = x.backend().clone();
                b.zero(self.count * std::mem::size_of::<T>(), &mut *x)
                    .map_err(device_err("clear_diff"))
            }
        }
    }

    /// Multiplies the data by `factor` (Caffe `scale_data`), on the side of
    /// its head.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// b.mutable_cpu_data().unwrap().copy_from_slice(&[1.0, -2.0]);
    /// b.scale_data(3.0).unwrap();
    /// assert_eq!(&*b.cpu_data().unwrap(), &[3.0, -6.0]);
    /// ```
    pub fn scale_data(&self, factor: T) -> Result<()> {
        self.scale_mem("scale_data", &self.data, factor)
    }

    /// Multiplies the diff by `factor` (Caffe `scale_diff`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[1]).unwrap();
    /// b.mutable_cpu_diff().unwrap()[0] = 2.0;
    /// b.scale_diff(0.5).unwrap();
    /// assert_eq!(b.diff_at(&[0]), 1.0);
    /// ```
    pub fn scale_diff(&self, factor: T) -> Result<()> {
        self.scale_mem("scale_diff", &self.diff, factor)
    }
}
