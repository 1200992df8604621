//! Caffe's `BasePrefetchingDataLayer`: a thread that fills batches from
//! a source of records, transformed, `prefetch` batches ahead of the
//! net; a forward pass copies the next one into the tops.

use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

use blob_layers::{Arity, DynLayer, TopShape};
use blob_runtime::{Blob, BlobError, MathElement};

use crate::datum::Example;
use crate::transform::DataTransformer;

/// Records one after another, started over after the last: an LMDB's,
/// an image list's.
pub(crate) trait Records: Send + 'static {
    /// Calls `visit(key, record)` for each record, starting over after
    /// the last, until `visit` returns `false`; a record that cannot be
    /// read is handed over as its error. The error returned is the
    /// source's own (a store that cannot be read).
    fn cycle(
        &mut self,
        visit: &mut dyn FnMut(&str, Result<Example, String>) -> bool,
    ) -> Result<(), String>;

    /// Where the records come from, for errors (a store's folder, a
    /// list file).
    fn origin(&self) -> String;
}

/// One batch as the thread made it: the data's shape, its values and
/// one label per item.
struct Batch<T> {
    shape: Vec<usize>,
    data: Vec<T>,
    labels: Vec<T>,
}

type Made<T> = Result<Batch<T>, BlobError>;

/// How a prefetching layer is set up.
pub(crate) struct Setup<T: MathElement> {
    /// Caffe's type name (`Data`, `ImageData`).
    pub type_name: &'static str,
    pub transformer: DataTransformer<T>,
    pub batch_size: usize,
    pub prefetch: usize,
    /// Whether the layer has a label top always (ImageData) or may
    /// leave it out (Data).
    pub tops: Arity,
}

/// A data layer whose batches a thread of its own makes ahead of the
/// net (Caffe's `BasePrefetchingDataLayer`): [`Data`](crate::data_layer())
/// and [`ImageData`](crate::image_data_layer()). Each batch takes the shape of
/// its first record (Caffe's `InferBlobShape`), so batches of different
/// sizes may follow each other; within a batch a record of another shape
/// is an error naming it. A record that cannot be read stops the layer
/// with an error naming the source, the record and what is wrong, at the
/// forward pass that would have used it. Dropping the layer stops its
/// thread.
pub struct PrefetchingDataLayer<T: MathElement> {
    type_name: &'static str,
    tops: Arity,
    batches: Option<Receiver<Made<T>>>,
    recycle: Sender<Batch<T>>,
    held: Option<Batch<T>>,
    worker: Option<JoinHandle<()>>,
}

fn refused(type_name: &str, detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: if type_name == "Data" {
            "run Data"
        } else {
            "run ImageData"
        },
        detail: detail.into(),
    }
}

impl<T: MathElement> PrefetchingDataLayer<T> {
    /// Starts the thread over `records` and waits for its first batch, so
    /// that a source with no readable first record is an error here, as
    /// in Caffe's `SetUp`. The thread's generator (crops, mirrors) is
    /// seeded from the calling thread's.
    pub(crate) fn start(setup: Setup<T>, records: impl Records) -> Result<Self, BlobError> {
        let seed = (u64::from(blob_kernels::cpu::rng_rand()) << 32)
            | u64::from(blob_kernels::cpu::rng_rand());
        let (sender, batches) = std::sync::mpsc::sync_channel(setup.prefetch.max(1));
        let (recycle, free) = std::sync::mpsc::channel();
        let fill = Fill {
            type_name: setup.type_name,
            transformer: setup.transformer,
            batch_size: setup.batch_size,
            sender,
            free,
        };
        let worker = std::thread::Builder::new()
            .name(format!("{} prefetch", setup.type_name))
            .spawn(move || fill.run(records, seed))
            .map_err(|e| {
                refused(
                    setup.type_name,
                    format!("cannot start the prefetch thread: {e}"),
                )
            })?;
        let mut layer = Self {
            type_name: setup.type_name,
            tops: setup.tops,
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
                        self.type_name,
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
struct Fill<T: MathElement> {
    type_name: &'static str,
    transformer: DataTransformer<T>,
    batch_size: usize,
    sender: SyncSender<Made<T>>,
    free: Receiver<Batch<T>>,
}

impl<T: MathElement> Fill<T> {
    /// Runs until the layer is dropped (the queue closes) or a record is
    /// bad (the error is queued, and the layer reports it at the pass
    /// that needs the batch).
    fn run(self, mut records: impl Records, seed: u64) {
        blob_kernels::cpu::set_seed(seed);
        let origin = records.origin();
        let record_error = |key: &str, detail: &dyn std::fmt::Display| {
            refused(self.type_name, format!("{origin}, {key}: {detail}"))
        };
        let mut batch: Option<Batch<T>> = None;
        let mut item = 0;
        let mut failed: Option<BlobError> = None;
        let mut rand = |n: u32| blob_kernels::cpu::rng_rand() % n;
        let cycled = records.cycle(&mut |key, record| {
            let example = match record {
                Ok(e) => e,
                Err(e) => {
                    failed = Some(record_error(key, &e));
                    return false;
                }
            };
            let dims = match self.transformer.output_shape(&example) {
                Ok(d) => d,
                Err(e) => {
                    failed = Some(record_error(key, &e));
                    return false;
                }
            };
            let per_item: usize = dims.iter().product();
            let current = batch.get_or_insert_with(|| {
                let mut b = self.free.try_recv().unwrap_or(Batch {
                    shape: Vec::new(),
                    data: Vec::new(),
                    labels: Vec::new(),
                });
                b.shape = vec![self.batch_size, dims[0], dims[1], dims[2]];
                b.data.clear();
                b.data.resize(self.batch_size * per_item, T::ZERO);
                b.labels.clear();
                b.labels.resize(self.batch_size, T::ZERO);
                b
            });
            if current.shape[1..] != dims {
                let first = &current.shape[1..];
                failed = Some(record_error(
                    key,
                    &format!(
                        "its image is {} x {} x {} but the batch's first was {} x {} x {}: \
                         records of several sizes need batch_size 1 or resizing",
                        dims[0], dims[1], dims[2], first[0], first[1], first[2]
                    ),
                ));
                return false;
            }
            let slot = &mut current.data[item * per_item..(item + 1) * per_item];
            if let Err(e) = self.transformer.transform(&example, slot, &mut rand) {
                failed = Some(record_error(key, &e));
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
        });
        let error = match cycled {
            Err(e) => Some(refused(self.type_name, e)),
            Ok(()) => failed,
        };
        if let Some(e) = error {
            let _ = self.sender.send(Err(e));
        }
    }
}

impl<T: MathElement> Drop for PrefetchingDataLayer<T> {
    /// Closes the queue (the thread's next send fails and it returns),
    /// then waits for the thread.
    fn drop(&mut self) {
        self.batches = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl<T: MathElement> DynLayer<T> for PrefetchingDataLayer<T> {
    fn type_name(&self) -> &str {
        self.type_name
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(0)
    }

    fn tops(&self) -> Arity {
        self.tops
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
            return Err(refused(
                self.type_name,
                format!(
                    "its top is {shape:?}, not the batch's shape: reshape the net before a forward pass"
                ),
            ));
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
