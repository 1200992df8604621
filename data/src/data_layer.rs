//! Caffe's `Data` layer: batches of records from an LMDB, transformed,
//! made by a thread of their own while the net runs (Caffe's
//! `BasePrefetchingDataLayer` with `prefetch` batches in its queue).

use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

use blob_layers::{Arity, DynLayer, TopShape};
use blob_proto::ParamMessage;
use blob_runtime::{Blob, BlobError, MathElement};

use crate::datum::decode_datum;
use crate::store::LmdbReader;
use crate::transform::DataTransformer;

/// One batch as the thread made it: the data's shape, its values and
/// one label per item.
struct Batch<T> {
    shape: Vec<usize>,
    data: Vec<T>,
    labels: Vec<T>,
}

type Made<T> = Result<Batch<T>, BlobError>;

/// Caffe `Data` (`data_param { source batch_size backend rand_skip
/// prefetch }` with `transform_param`): its first top holds `batch_size`
/// records of the LMDB at `source`, read in key order and started over
/// after the last, each transformed ([`DataTransformer`]); its second
/// top, where there is one, their labels. Each batch takes the shape of
/// its first record (Caffe's `InferBlobShape`), so batches of different
/// sizes may follow each other; within a batch a record of another shape
/// is an error naming its key.
///
/// A thread reads, decodes and transforms up to `prefetch` (default 4)
/// batches ahead of the net; a forward pass copies the next one into the
/// tops. A bad record stops the layer with an error naming the store,
/// the key and what is wrong, at the forward pass that would have used
/// it. `rand_skip` skips a random number of records below it first
/// (Caffe's `DataReader`), drawn, like the crops and mirrors, from the
/// generator of the thread that builds the net (seed it with
/// `blob_kernels::cpu::set_seed`, as `random_seed` does).
///
/// ```
/// use blob_data::{LmdbWriter, data_registry};
/// use blob_layers::net::{Net, NetState};
/// use prost::Message;
/// let dir = std::env::temp_dir().join(format!("blobflow-data-doc-{}", std::process::id()));
/// let _ = std::fs::remove_dir_all(&dir);
/// let mut store = LmdbWriter::create(&dir)?;
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
pub struct DataLayer<T: MathElement> {
    batches: Option<Receiver<Made<T>>>,
    recycle: Sender<Batch<T>>,
    held: Option<Batch<T>>,
    worker: Option<JoinHandle<()>>,
}

fn refused(detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "set up Data",
        detail: detail.into(),
    }
}

impl<T: MathElement> DataLayer<T> {
    /// Reads `data_param` and `transform_param`, opens the store, starts
    /// the thread and waits for its first batch (so a missing store or a
    /// bad first record is an error here, as in Caffe's `SetUp`).
    pub fn from_param(layer: &ParamMessage) -> Result<Self, BlobError> {
        let p = layer
            .message("data_param")
            .cloned()
            .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::DATA));
        let source = p.string("source").to_string();
        if source.is_empty() {
            return Err(refused("data_param gives no source (the store's folder)"));
        }
        let batch_size = p.uint("batch_size") as usize;
        if batch_size == 0 {
            return Err(refused(format!(
                "data_param.batch_size must be at least 1 (source {source})"
            )));
        }
        if p.enum_name("backend") != "LMDB" {
            return Err(refused(format!(
                "source {source}: backend {} is not read yet; LMDB is (`backend: LMDB`)",
                p.enum_name("backend")
            )));
        }
        let prefetch = (p.uint("prefetch") as usize).max(1);
        let rand_skip = p.uint("rand_skip").min(u64::from(u32::MAX)) as u32;
        let transformer = DataTransformer::<T>::from_layer(layer)?;
        let reader = LmdbReader::open(&source).map_err(|e| refused(e.to_string()))?;
        let seed = u64::from(blob_kernels::cpu::rng_rand()) << 32
            | u64::from(blob_kernels::cpu::rng_rand());
        let (sender, batches) = std::sync::mpsc::sync_channel(prefetch);
        let (recycle, free) = std::sync::mpsc::channel();
        let worker = std::thread::Builder::new()
            .name(format!("data {source}"))
            .spawn(move || {
                Prefetch {
                    transformer,
                    batch_size,
                    sender,
                    free,
                    skip: 0,
                }
                .run(&reader, seed, rand_skip)
            })
            .map_err(|e| refused(format!("cannot start the prefetch thread: {e}")))?;
        let mut layer = Self {
            batches: Some(batches),
            recycle,
            held: None,
            worker: Some(worker),
        };
        layer.next_batch()?;
        Ok(layer)
    }

    /// The next batch, waiting for the thread where it is behind.
    fn next_batch(&mut self) -> Result<&Batch<T>, BlobError> {
        if self.held.is_none() {
            let queue = self.batches.as_ref().expect("open until dropped");
            let batch = match queue.recv() {
                Ok(made) => made?,
                Err(_) => {
                    return Err(refused(
                        "the prefetch thread stopped after an error reported before",
                    ));
                }
            };
            self.held = Some(batch);
        }
        Ok(self.held.as_ref().expect("held above"))
    }
}

/// The thread's side: fills batches and queues them.
struct Prefetch<T: MathElement> {
    transformer: DataTransformer<T>,
    batch_size: usize,
    sender: SyncSender<Made<T>>,
    free: Receiver<Batch<T>>,
    skip: u32,
}

/// The error of a record, naming the store and the key.
fn record_error(reader: &LmdbReader, key: &[u8], detail: impl std::fmt::Display) -> BlobError {
    BlobError::InvalidParameter {
        op: "read a record",
        detail: format!(
            "{}, key {:?}: {detail}",
            reader.path().display(),
            String::from_utf8_lossy(&key[..key.len().min(64)])
        ),
    }
}

impl<T: MathElement> Prefetch<T> {
    /// Runs until the layer is dropped (the queue closes) or a record is
    /// bad (the error is queued, and the layer reports it at the pass
    /// that needs the batch).
    fn run(mut self, reader: &LmdbReader, seed: u64, rand_skip: u32) {
        blob_kernels::cpu::set_seed(seed);
        if rand_skip > 0 {
            self.skip = blob_kernels::cpu::rng_rand() % rand_skip;
        }
        let mut batch: Option<Batch<T>> = None;
        let mut item = 0;
        let mut failed: Option<BlobError> = None;
        let mut rand = |n: u32| blob_kernels::cpu::rng_rand() % n;
        let cycled = reader.cycle(
            &mut |key, value| {
                if self.skip > 0 {
                    self.skip -= 1;
                    return true;
                }
                let example = match decode_datum(value, self.transformer.color_mode()) {
                    Ok(e) => e,
                    Err(e) => {
                        failed = Some(record_error(reader, key, e));
                        return false;
                    }
                };
                let dims = match self.transformer.output_shape(&example) {
                    Ok(d) => d,
                    Err(e) => {
                        failed = Some(record_error(reader, key, e));
                        return false;
                    }
                };
                let current = batch.get_or_insert_with(|| {
                    let mut b = self.free.try_recv().unwrap_or(Batch {
                        shape: Vec::new(),
                        data: Vec::new(),
                        labels: Vec::new(),
                    });
                    b.shape = vec![self.batch_size, dims[0], dims[1], dims[2]];
                    b.data.clear();
                    b.data
                        .resize(self.batch_size * dims.iter().product::<usize>(), T::ZERO);
                    b.labels.clear();
                    b.labels.resize(self.batch_size, T::ZERO);
                    b
                });
                if current.shape[1..] != dims {
                    failed = Some(record_error(
                        reader,
                        key,
                        format!(
                            "its image is {} x {} x {} but the batch's first was {} x {} x {}: \
                             records of several sizes need batch_size 1 or resizing",
                            dims[0],
                            dims[1],
                            dims[2],
                            current.shape[1],
                            current.shape[2],
                            current.shape[3]
                        ),
                    ));
                    return false;
                }
                let per_item = dims.iter().product::<usize>();
                let slot = &mut current.data[item * per_item..(item + 1) * per_item];
                if let Err(e) = self.transformer.transform(&example, slot, &mut rand) {
                    failed = Some(record_error(reader, key, e));
                    return false;
                }
                current.labels[item] = T::from_f64(f64::from(example.label));
                item += 1;
                if item == self.batch_size {
                    item = 0;
                    let full = batch.take().expect("filled above");
                    // The layer was dropped: stop.
                    return self.sender.send(Ok(full)).is_ok();
                }
                true
            },
            &mut || {},
        );
        let error = match cycled {
            Err(e) => Some(refused(e.to_string())),
            Ok(()) => failed,
        };
        if let Some(e) = error {
            let _ = self.sender.send(Err(e));
        }
    }
}

impl<T: MathElement> Drop for DataLayer<T> {
    /// Closes the queue (the thread's next send fails and it returns),
    /// then waits for the thread.
    fn drop(&mut self) {
        self.batches = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl<T: MathElement> DynLayer<T> for DataLayer<T> {
    fn type_name(&self) -> &str {
        "Data"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(0)
    }

    fn tops(&self) -> Arity {
        Arity::range(1, 2)
    }

    /// The shape of the batch the next forward pass gives.
    fn reshape(
        &mut self,
        _bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
    ) -> Result<Vec<TopShape>, BlobError> {
        let batch = self.next_batch()?;
        let mut shapes = vec![TopShape::new(batch.shape.clone())];
        if tops.len() == 2 {
            shapes.push(TopShape::new(vec![batch.shape[0]]));
        }
        Ok(shapes)
    }

    fn forward(&mut self, _bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<(), BlobError> {
        self.next_batch()?;
        let batch = self.held.take().expect("taken by next_batch");
        if tops[0].shape() != batch.shape.as_slice() {
            let shape = tops[0].shape().to_vec();
            self.held = Some(batch);
            return Err(refused(format!(
                "its top is {shape:?}, not the batch's shape: reshape the net before a forward pass"
            )));
        }
        tops[0].mutable_cpu_data()?.copy_from_slice(&batch.data);
        if let Some(labels) = tops.get(1) {
            labels.mutable_cpu_data()?.copy_from_slice(&batch.labels);
        }
        let _ = self.recycle.send(batch);
        Ok(())
    }

    fn backward(
        &mut self,
        _tops: &[&Blob<T>],
        _down: &[bool],
        _bottoms: &[&Blob<T>],
    ) -> Result<(), BlobError> {
        Ok(())
    }
}
