//! Caffe's `Data` layer: batches of `Datum` records from an LMDB or a
//! LevelDB store.

use std::sync::Arc;

use blob_layers::Arity;
use blob_proto::ParamMessage;
use blob_runtime::{BlobError, MathElement};

use crate::datum::decode_datum;
use crate::prefetch::{Decoded, Decoder, PrefetchingDataLayer, Raw, Records, Setup};
use crate::store::{Backend, StoreReader};
use crate::transform::DataTransformer;

/// A store's records in key order, decoded by `decode`: `Datum`s for
/// Data, `AnnotatedDatum`s for AnnotatedData.
pub(crate) struct StoreRecords {
    reader: StoreReader,
    decode: Decoder,
    skip: u32,
}

impl Records for StoreRecords {
    fn cycle(
        &mut self,
        visit: &mut dyn FnMut(&str, Result<Raw, String>) -> bool,
    ) -> Result<(), String> {
        let skip = &mut self.skip;
        self.reader
            .cycle(
                &mut |key, value| {
                    if *skip > 0 {
                        *skip -= 1;
                        return true;
                    }
                    let key = String::from_utf8_lossy(&key[..key.len().min(64)]);
                    let raw = Raw {
                        bytes: value.to_vec(),
                        label: None,
                        cut: None,
                        pair: None,
                    };
                    visit(&format!("key {key:?}"), Ok(raw))
                },
                &mut || {},
            )
            .map_err(|e| e.to_string())
    }

    fn decoder(&self) -> Decoder {
        self.decode.clone()
    }

    fn origin(&self) -> String {
        self.reader.path().display().to_string()
    }
}

/// A store layer's `data_param`: its batch size and prefetch, and its
/// store opened, `rand_skip` drawn, records decoded by `decode`.
pub(crate) struct StoreSource {
    pub batch_size: usize,
    pub prefetch: usize,
    pub records: StoreRecords,
}

impl StoreSource {
    /// `layer`'s `data_param`, errors in the words of `refused`.
    pub(crate) fn open(
        layer: &ParamMessage,
        decode: Decoder,
        refused: fn(String) -> BlobError,
    ) -> Result<Self, BlobError> {
        let p = layer
            .message("data_param")
            .cloned()
            .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::DATA));
        let source = p.string("source").to_string();
        if source.is_empty() {
            return Err(refused(
                "data_param gives no source (the store's folder)".into(),
            ));
        }
        let batch_size = p.uint("batch_size") as usize;
        if batch_size == 0 {
            return Err(refused(format!(
                "data_param.batch_size must be at least 1 (source {source})"
            )));
        }
        let backend = Backend::from_caffe_name(p.enum_name("backend"))
            .ok_or_else(|| refused(format!("source {source}: unknown backend")))?;
        let reader = StoreReader::open(&source, backend).map_err(|e| refused(e.to_string()))?;
        let rand_skip = p.uint("rand_skip").min(u64::from(u32::MAX)) as u32;
        let skip = match rand_skip {
            0 => 0,
            n => blob_kernels::cpu::rng_rand() % n,
        };
        Ok(Self {
            batch_size,
            prefetch: p.uint("prefetch") as usize,
            records: StoreRecords {
                reader,
                decode,
                skip,
            },
        })
    }
}

fn refused(detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "set up Data",
        detail: detail.into(),
    }
}

/// Caffe `Data` (`data_param { source batch_size backend rand_skip
/// prefetch }` with `transform_param`): its first top holds
/// `batch_size` records of the store at `source` (an LMDB or, Caffe's
/// default `backend`, a LevelDB store; read from the folder the process
/// runs in, as Caffe reads it), in key order and started
/// over after the last, each transformed ([`DataTransformer`]); its
/// second top, where there is one, their labels. `rand_skip` skips a
/// random number of records below it first (Caffe's `DataReader`),
/// drawn, like the crops and mirrors, from the generator of the thread
/// that builds the net (seeded by `random_seed` in `blobflow train`,
/// by `blob_kernels::cpu::set_seed` in a program).
///
/// ```
/// use blob_data::{Backend, StoreWriter, data_registry};
/// use blob_layers::net::{Net, NetState};
/// use prost::Message;
/// let dir = std::env::temp_dir().join(format!("blobflow-data-doc-{}", std::process::id()));
/// let _ = std::fs::remove_dir_all(&dir);
/// let mut store = StoreWriter::create(&dir, Backend::Lmdb)?;
/// for i in 0..3u8 {
///     let d = blob_proto::Datum { channels: Some(1), height: Some(1), width: Some(2),
///         data: Some(vec![i, 2 * i]), label: Some(i32::from(i)), ..Default::default() };
///     store.put(format!("{i:08}").as_bytes(), &d.encode_to_vec())?;
/// }
/// store.finish()?;
/// let text = format!(r#"layer {{ name: "mnist" type: "Data" top: "data" top: "label"
///     transform_param {{ scale: 0.5 }}
///     data_param {{ source: "{}" batch_size: 2 backend: LMDB }} }}"#, dir.display());
/// let mut net = Net::<f32>::builder().registry(&data_registry()).from_prototxt(&text)?;
/// net.forward()?;
/// assert_eq!(net.blob("data").unwrap().to_vec()?, [0.0, 0.0, 0.5, 1.0]);
/// net.forward()?; // record 2, then the first again
/// assert_eq!(net.blob("label").unwrap().to_vec()?, [2.0, 0.0]);
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn data_layer<T: MathElement>(
    layer: &ParamMessage,
) -> Result<PrefetchingDataLayer<T>, BlobError> {
    let transformer = DataTransformer::<T>::from_layer(layer)?;
    let color = transformer.color_mode();
    let decode: Decoder =
        Arc::new(move |raw: Raw| decode_datum(&raw.bytes, color).map(Decoded::from));
    let store = StoreSource::open(layer, decode, refused)?;
    PrefetchingDataLayer::start(
        Setup {
            type_name: "Data",
            transformer,
            batch_size: store.batch_size,
            prefetch: store.prefetch,
            tops: Arity::range(1, 2),
            geometry: None,
        },
        store.records,
    )
}
