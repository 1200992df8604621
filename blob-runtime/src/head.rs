//! Where a [`crate::SyncedMemory`]'s current bytes are: its own idea, so
//! that errors can name a head without depending on the memory itself.

/// Which side holds the current bytes (Caffe `SyncedMemory::SyncedHead`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Head {
    /// Nothing allocated or touched yet (`UNINITIALIZED`).
    Uninitialized,
    /// The host copy is current, the device copy stale (`HEAD_AT_CPU`).
    AtCpu,
    /// The device copy is current, the host copy stale (`HEAD_AT_GPU`).
    AtGpu,
    /// Both copies are equal (`SYNCED`).
    Synced,
}
