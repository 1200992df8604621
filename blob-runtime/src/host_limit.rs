//! The process's budget of host memory for blobs: every [`HostBuffer`]
//! counts against it, and an allocation that would exceed it is an error
//! naming the sizes, not an abort or a visit from the out-of-memory
//! killer.
//!
//! A 40-byte `.prototxt` can declare a blob of a billion values, and a
//! `.caffemodel` header a layer of any size; Caffe allocates whatever a
//! file asks for. Memory here is allocated lazily and zero-filled by the
//! kernel, so an over-large blob would fail only when written, as a
//! killed process. The limit turns that into a [`BlobError`] at the
//! allocation, which the net wraps with the layer and blob.
//!
//! [`HostBuffer`]: crate::HostBuffer
//! [`BlobError`]: crate::BlobError

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{BlobError, Result};

/// 0: not set, the default applies.
static LIMIT: AtomicUsize = AtomicUsize::new(0);
static IN_USE: AtomicUsize = AtomicUsize::new(0);

/// The most bytes of host memory all blobs together may hold: the
/// machine's physical memory (or the cgroup's limit, where lower) unless
/// [`set_host_memory_limit`] changed it.
///
/// ```
/// assert!(blob_runtime::host_memory_limit() > 0);
/// ```
pub fn host_memory_limit() -> usize {
    match LIMIT.load(Ordering::Relaxed) {
        0 => default_limit(),
        set => set,
    }
}

/// Sets the most bytes of host memory all blobs together may hold
/// (`usize::MAX`: no limit beyond the allocator's; 0: back to the
/// default). Buffers already held stay; only new allocations are refused.
///
/// ```
/// use blob_runtime::{host_memory_limit, set_host_memory_limit};
/// set_host_memory_limit(64 << 30); // 64 GiB, whatever the machine has
/// assert_eq!(host_memory_limit(), 64 << 30);
/// set_host_memory_limit(0); // the default again
/// ```
///
/// An allocation over the limit is refused with the sizes:
/// `allocate blob memory: 4.0 MiB more host memory would take blobs to 4.1 MiB,
/// above the limit of 1.0 MiB (blob_runtime::set_host_memory_limit)`.
pub fn set_host_memory_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
}

/// Bytes of host memory all live blobs (every [`HostBuffer`]) hold now.
///
/// ```
/// let blob = blob_runtime::Blob::<f64>::from_vec(&[4], vec![0.0; 4])?;
/// assert!(blob_runtime::host_memory_in_use() >= 32); // at least its 4 values
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
///
/// [`HostBuffer`]: crate::HostBuffer
pub fn host_memory_in_use() -> usize {
    IN_USE.load(Ordering::Relaxed)
}

/// Whether `bytes` more would fit under the limit, without taking them:
/// for scratch buffers a layer keeps outside any blob, and for memory
/// that another allocator makes before it is counted.
///
/// ```
/// assert!(blob_runtime::check_host_room("scratch", 16).is_ok());
/// assert!(blob_runtime::check_host_room("scratch", usize::MAX).is_err());
/// ```
pub fn check_host_room(op: &'static str, bytes: usize) -> Result<()> {
    let (in_use, limit) = (host_memory_in_use(), host_memory_limit());
    match in_use.checked_add(bytes) {
        Some(total) if total <= limit => Ok(()),
        _ => Err(refusal(op, bytes, in_use, limit)),
    }
}

/// Takes `bytes` from the budget, or refuses if they do not fit.
pub(crate) fn take(op: &'static str, bytes: usize) -> Result<()> {
    let limit = host_memory_limit();
    let mut in_use = IN_USE.load(Ordering::Relaxed);
    loop {
        let total = in_use
            .checked_add(bytes)
            .filter(|&total| total <= limit)
            .ok_or_else(|| refusal(op, bytes, in_use, limit))?;
        match IN_USE.compare_exchange_weak(in_use, total, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(now) => in_use = now,
        }
    }
}

/// Counts `bytes` already allocated (adopted memory): never refused.
pub(crate) fn count(bytes: usize) {
    IN_USE.fetch_add(bytes, Ordering::Relaxed);
}

/// Gives back what [`take`] or [`count`] counted.
pub(crate) fn give_back(bytes: usize) {
    IN_USE.fetch_sub(bytes, Ordering::Relaxed);
}

fn refusal(op: &'static str, bytes: usize, in_use: usize, limit: usize) -> BlobError {
    BlobError::HostMemoryLimit {
        op,
        bytes,
        in_use,
        limit,
    }
}

fn default_limit() -> usize {
    static DEFAULT: OnceLock<usize> = OnceLock::new();
    // Miri runs without the file system: no limit but the allocator's.
    if cfg!(miri) {
        return usize::MAX;
    }
    *DEFAULT.get_or_init(|| {
        [physical_memory(), cgroup_limit()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(usize::MAX)
    })
}

/// `MemTotal` of `/proc/meminfo` (Linux); `None` elsewhere.
fn physical_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A cgroup v2 memory limit (`memory.max`), where one is set.
fn cgroup_limit() -> Option<usize> {
    let max = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok()?;
    max.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_a_real_size() {
        let limit = default_limit();
        assert!(limit >= 1 << 26, "{limit}");
    }
}
