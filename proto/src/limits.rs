//! How much the readers hold at most: counts far above any real Caffe
//! file, so that a file of millions of tiny items (3-byte layers, empty
//! `layer {}`) is refused instead of decoded into memory out of
//! proportion to it. [`ReadLimits::set`] raises them for the process.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::ProtoError;

/// The most layers a net may hold by default. The largest public Caffe
/// nets have a few thousand; a file of a million 6-byte layers would
/// otherwise decode into 300 MB.
pub const MAX_LAYERS: usize = 100_000;

/// The most fields (blobs included) one layer, or a net besides its
/// layers, or a binary message's strings, arrays and messages, may hold
/// by default: a real one has tens.
pub const MAX_FIELDS: usize = 100_000;

/// The most fields (values of repeated fields counted one by one) a text
/// message may hold by default, nested ones included. ResNet-152's
/// training net has about 15,000; a text of a million empty `layer {}`
/// (7 MB) would otherwise take 1.6 GB to hold.
pub const MAX_TEXT_FIELDS: usize = 200_000;

static LAYERS: AtomicUsize = AtomicUsize::new(MAX_LAYERS);
static FIELDS: AtomicUsize = AtomicUsize::new(MAX_FIELDS);
static TEXT_FIELDS: AtomicUsize = AtomicUsize::new(MAX_TEXT_FIELDS);

/// The readers' counts, for the whole process: [`MAX_LAYERS`],
/// [`MAX_FIELDS`] and [`MAX_TEXT_FIELDS`] unless raised.
///
/// ```
/// use blob_proto::ReadLimits;
/// let limits = ReadLimits::current();
/// assert!(limits.layers >= blob_proto::MAX_LAYERS);
/// // A net of a million layers, on purpose:
/// ReadLimits { layers: 1_000_000, ..limits }.set();
/// assert_eq!(ReadLimits::current().layers, 1_000_000);
/// ReadLimits::default().set();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// Layers of a net.
    pub layers: usize,
    /// Fields of one layer or one binary message.
    pub fields: usize,
    /// Fields of a text message.
    pub text_fields: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self {
            layers: MAX_LAYERS,
            fields: MAX_FIELDS,
            text_fields: MAX_TEXT_FIELDS,
        }
    }
}

impl ReadLimits {
    /// The limits the readers apply now.
    pub fn current() -> Self {
        Self {
            layers: LAYERS.load(Ordering::Relaxed),
            fields: FIELDS.load(Ordering::Relaxed),
            text_fields: TEXT_FIELDS.load(Ordering::Relaxed),
        }
    }

    /// Makes these the limits of every reader of the process.
    pub fn set(self) {
        LAYERS.store(self.layers, Ordering::Relaxed);
        FIELDS.store(self.fields, Ordering::Relaxed);
        TEXT_FIELDS.store(self.text_fields, Ordering::Relaxed);
    }
}

/// What a refusal says: the limit, why it exists, how to raise it.
pub(crate) fn over_limit(max: usize, what: &str) -> String {
    format!(
        "more than {max} {what}: no Caffe file holds that many, so it is refused rather than held in \
         memory out of proportion to it (blob_proto::ReadLimits raises the limit)"
    )
}

/// Refuses a message about to hold more than `max` of `what`.
pub(crate) fn within_limit(
    at: &str,
    what: &str,
    held: usize,
    max: usize,
) -> Result<(), ProtoError> {
    if held < max {
        return Ok(());
    }
    Err(ProtoError::Invalid {
        at: at.into(),
        detail: over_limit(max, what),
    })
}
