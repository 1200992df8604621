//! Caffe's `BasePrefetchingDataLayer`: a thread that fills batches from
//! a source of records, transformed, `prefetch` batches ahead of the
//! net; a forward pass copies the next one into the tops.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

use blob_layers::{Arity, DynLayer, TopShape};
use blob_runtime::{Blob, BlobError, MathElement};

use crate::annoset::{MOST_LANE_POINTS, MOST_LANES};
use crate::annotated_data::{Geometry, Object};
use crate::datum::Example;
use crate::lane_data::Lane;
use crate::transform::DataTransformer;

/// A record as its source read it, before decoding: a store's value, an
/// image file's bytes with the label its list gives, or an image's bytes
/// with the window to cut from it.
pub(crate) struct Raw {
    pub bytes: Vec<u8>,
    pub label: Option<i32>,
    pub cut: Option<crate::window_data::Cut>,
    /// The label image read with it (`DenseImageData`).
    pub pair: Option<crate::dense_image_data::PairRaw>,
}

/// A record decoded: its image and, where its label is an image of its
/// own, the label's plane, or where it is annotated, its objects (and
/// the YOLO fork's segmentation label image, one channel, where the
/// layer has a top for it), or the YOLO fork's lanes (LaneData).
pub(crate) struct Decoded {
    pub example: Example,
    pub label_plane: Option<LabelPlane>,
    pub objects: Option<Vec<Object>>,
    pub segmentation: Option<Example>,
    pub lanes: Option<Vec<Lane>>,
}

/// A label image's values, `height x width`.
pub(crate) struct LabelPlane {
    pub height: usize,
    pub width: usize,
    pub values: Vec<u8>,
}

impl From<Example> for Decoded {
    fn from(example: Example) -> Self {
        Decoded {
            example,
            label_plane: None,
            objects: None,
            segmentation: None,
            lanes: None,
        }
    }
}

/// Decodes a raw record; run on the decoding threads.
pub(crate) type Decoder = Arc<dyn Fn(Raw) -> Result<Decoded, String> + Send + Sync>;

/// Records one after another, started over after the last: an LMDB's,
/// an image list's.
pub(crate) trait Records: Send + 'static {
    /// Calls `visit(key, record)` for each record, starting over after
    /// the last, until `visit` returns `false`; a record that cannot be
    /// read is handed over as its error. The error returned is the
    /// source's own (a store that cannot be read).
    fn cycle(
        &mut self,
        visit: &mut dyn FnMut(&str, Result<Raw, String>) -> bool,
    ) -> Result<(), String>;

    /// How this source's records are decoded.
    fn decoder(&self) -> Decoder;

    /// Where the records come from, for errors (a store's folder, a
    /// list file).
    fn origin(&self) -> String;
}

/// One batch as the thread made it: the data's shape, its values and
/// its labels (one an item, or a label image's plane an item), and
/// AnnotatedData's segmentation labels where it has a third top.
struct Batch<T> {
    shape: Vec<usize>,
    data: Vec<T>,
    label_shape: Vec<usize>,
    labels: Vec<T>,
    segmentation_shape: Vec<usize>,
    segmentation: Vec<T>,
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
    /// AnnotatedData's expansion, sampling and resizing, before the
    /// transform.
    pub geometry: Option<Arc<Geometry>>,
}

/// A data layer whose batches a thread of its own makes ahead of the
/// net (Caffe's `BasePrefetchingDataLayer`): [`Data`](crate::data_layer()),
/// [`ImageData`](crate::image_data_layer()), [`WindowData`](crate::window_data_layer())
/// and [`DenseImageData`](crate::dense_image_data_layer()). Each batch takes the shape of
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
        op: match type_name {
            "Data" => "run Data",
            "WindowData" => "run WindowData",
            "DenseImageData" => "run DenseImageData",
            "AnnotatedData" => "run AnnotatedData",
            "LaneData" => "run LaneData",
            _ => "run ImageData",
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
            geometry: setup.geometry,
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
    geometry: Option<Arc<Geometry>>,
    batch_size: usize,
    sender: SyncSender<Made<T>>,
    free: Receiver<Batch<T>>,
}

/// The threads chosen by [`set_decoding_threads`] (0: automatic).
static DECODING_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets how many threads decode and transform each batch of the data
/// layers started from now on (0, the default: the machine's cores, up
/// to 4; `BLOBFLOW_DATA_THREADS` sets it for a process). JPEG decoding is
/// what keeps a GPU waiting, and Caffe gives it one thread; the batches
/// are the same whatever the number (each record draws its crop and
/// mirror from a generator seeded in record order).
///
/// ```
/// blob_data::set_decoding_threads(2);
/// # blob_data::set_decoding_threads(0);
/// ```
pub fn set_decoding_threads(threads: usize) {
    DECODING_THREADS.store(threads, std::sync::atomic::Ordering::Relaxed);
}

fn decoding_threads(batch_size: usize) -> usize {
    let chosen = match DECODING_THREADS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => std::env::var("BLOBFLOW_DATA_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4))),
        n => n,
    };
    chosen.min(batch_size).max(1)
}

/// One record of a batch being made: its key, what was read, and the
/// seed of its crops and mirrors.
type Pending = (String, Result<Raw, String>, u64);

impl<T: MathElement> Fill<T> {
    /// Runs until the layer is dropped (the queue closes) or a record is
    /// bad (the error is queued, and the layer reports it at the pass
    /// that needs the batch).
    fn run(self, mut records: impl Records, seed: u64) {
        blob_kernels::cpu::set_seed(seed);
        let origin = records.origin();
        let decoder = records.decoder();
        let threads = decoding_threads(self.batch_size);
        let mut pending: Vec<Pending> = Vec::with_capacity(self.batch_size);
        let mut failed: Option<BlobError> = None;
        // The YOLO fork's multi-scale training: a resize policy drawn
        // for each ten batches.
        let mut policy_rng = self
            .geometry
            .as_deref()
            .filter(|g| g.policies() > 1)
            .map(|_| blob_kernels::cpu::SeededRng::new(u64::from(blob_kernels::cpu::rng_rand())));
        let mut batches = 0usize;
        let mut policy = 0;
        let cycled = records.cycle(&mut |key, raw| {
            // Each record's draws come from a generator seeded in record
            // order: the same crops and mirrors on any number of threads.
            let seed = (u64::from(blob_kernels::cpu::rng_rand()) << 32)
                | u64::from(blob_kernels::cpu::rng_rand());
            pending.push((key.to_string(), raw, seed));
            if pending.len() < self.batch_size {
                return true;
            }
            let items = std::mem::take(&mut pending);
            let recycled = self.free.try_recv().ok();
            if let (Some(g), Some(rng)) = (self.geometry.as_deref(), policy_rng.as_mut())
                && batches.is_multiple_of(10)
            {
                policy = g.draw_policy(rng);
            }
            batches += 1;
            let shape = Shaping {
                type_name: self.type_name,
                transformer: &self.transformer,
                geometry: self.geometry.as_deref(),
                policy,
                batch_size: self.batch_size,
                origin: &origin,
            };
            match shape.batch(recycled, items, &decoder, threads) {
                // The layer was dropped: stop.
                Ok(batch) => self.sender.send(Ok(batch)).is_ok(),
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
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

/// One record of a batch as made: its boxes where it is annotated, its
/// segmentation label planes (or drawn lanes) where the layer makes
/// them, its lanes' label values (LaneData).
struct Item {
    boxes: Vec<Object>,
    segmentation: Vec<f32>,
    lane_labels: Vec<f32>,
}

/// What making a batch reads, shared by the decoding threads.
struct Shaping<'a, T: MathElement> {
    type_name: &'static str,
    transformer: &'a DataTransformer<T>,
    geometry: Option<&'a Geometry>,
    /// Which of the geometry's resize policies this batch takes.
    policy: usize,
    batch_size: usize,
    origin: &'a str,
}

impl<T: MathElement> Shaping<'_, T> {
    /// A batch of `items` (in `recycled`'s memory where there is one):
    /// the first decoded here to shape it, the rest decoded and
    /// transformed on `threads` threads; the first bad record in batch
    /// order is the error.
    fn batch(
        &self,
        recycled: Option<Batch<T>>,
        items: Vec<Pending>,
        decoder: &Decoder,
        threads: usize,
    ) -> Result<Batch<T>, BlobError> {
        let origin = self.origin;
        let error = |key: &str, detail: &dyn std::fmt::Display| {
            refused(self.type_name, format!("{origin}, {key}: {detail}"))
        };
        // A record decoded and, for AnnotatedData, expanded, sampled and
        // resized; the generator its transform goes on drawing from.
        let prepare = |key: &str, raw: Result<Raw, String>, seed: u64| {
            let mut rng = blob_kernels::cpu::SeededRng::new(seed);
            let mut decoded = raw.and_then(|r| decoder(r)).map_err(|e| error(key, &e))?;
            if let Some(geometry) = self.geometry {
                decoded = geometry
                    .apply(decoded, &mut rng, self.policy)
                    .map_err(|e| error(key, &e))?;
            }
            Ok::<_, BlobError>((decoded, rng))
        };
        let mut items = items.into_iter();
        let started = std::time::Instant::now();
        let (key, raw, seed) = items.next().expect("a batch has records");
        let (first, first_rng) = prepare(&key, raw, seed)?;
        let dims = self
            .transformer
            .output_shape(&first.example)
            .map_err(|e| error(&key, &e))?;
        let per_item: usize = dims.iter().product();
        // The first record's label plane sizes the batch's (the
        // transformer neither crops nor mirrors where there is one:
        // DenseImageData refuses it).
        let label_dims = first.label_plane.as_ref().map(|l| (l.height, l.width));
        let annotated = first.objects.is_some();
        let per_label = label_dims.map_or(1, |(h, w)| h * w);
        let segmentation = self.geometry.and_then(|g| g.segmentation.as_ref());
        let lanes = self.geometry.and_then(|g| g.lanes.as_ref());
        let planes = match (segmentation, lanes) {
            (Some(s), _) => Some((
                s.planes(),
                s.plane_size(dims[1], dims[2])
                    .map_err(|e| error(&key, &e))?,
            )),
            (None, Some(l)) => Some((
                1,
                l.plane_size(dims[1], dims[2])
                    .map_err(|e| error(&key, &e))?,
            )),
            (None, None) => None,
        };
        let mut batch = recycled.unwrap_or(Batch {
            shape: Vec::new(),
            data: Vec::new(),
            label_shape: Vec::new(),
            labels: Vec::new(),
            segmentation_shape: Vec::new(),
            segmentation: Vec::new(),
        });
        batch.segmentation_shape =
            planes.map_or_else(Vec::new, |(c, (h, w))| vec![self.batch_size, c, h, w]);
        batch.segmentation.clear();
        batch.shape = vec![self.batch_size, dims[0], dims[1], dims[2]];
        batch.label_shape = match label_dims {
            Some((h, w)) => vec![self.batch_size, 1, h, w],
            None => vec![self.batch_size],
        };
        batch.data.clear();
        batch.data.resize(self.batch_size * per_item, T::ZERO);
        batch.labels.clear();
        batch.labels.resize(self.batch_size * per_label, T::ZERO);
        // One record into its slot; an annotated record's boxes as the
        // transform left them, and its segmentation labels.
        let one = |key: &str,
                   decoded: Decoded,
                   mut rng: blob_kernels::cpu::SeededRng,
                   slot: &mut [T],
                   label: &mut [T]|
         -> Result<Item, BlobError> {
            let Decoded {
                example,
                label_plane,
                objects,
                segmentation: label_image,
                lanes: record_lanes,
            } = decoded;
            let here = self
                .transformer
                .output_shape(&example)
                .map_err(|e| error(key, &e))?;
            if here != dims {
                return Err(error(
                    key,
                    &format!(
                        "its image is {} x {} x {} but the batch's first was {} x {} x {}: \
                         records of several sizes need batch_size 1 or resizing",
                        here[0], here[1], here[2], dims[0], dims[1], dims[2]
                    ),
                ));
            }
            if objects.is_some() != annotated {
                return Err(error(
                    key,
                    &"Some datum misses AnnotationType: the batch mixes annotated records \
                      and records labelled by their datum",
                ));
            }
            let placement = self
                .transformer
                .transform_placed(&example, slot, &mut |n| rng.next_u32() % n)
                .map_err(|e| error(key, &e))?;
            match label_plane {
                // The label's values as they are (Caffe's
                // `preserve_pixel_vals`: no mean, no scale).
                Some(plane) if Some((plane.height, plane.width)) == label_dims => {
                    for (l, &v) in label.iter_mut().zip(&plane.values) {
                        *l = T::from_f64(f64::from(v));
                    }
                }
                Some(plane) => {
                    let (h, w) = label_dims.unwrap_or((1, 1));
                    return Err(error(
                        key,
                        &format!(
                            "its label image is {} x {} but the batch's first was {h} x {w}: \
                             label images of several sizes need batch_size 1 or resizing",
                            plane.height, plane.width
                        ),
                    ));
                }
                None if label.len() == 1 => label[0] = T::from_f64(f64::from(example.label)),
                None => {
                    return Err(error(
                        key,
                        &"it has no label image, but the batch's first record had one",
                    ));
                }
            }
            let (segmentation, lane_labels) = match (segmentation, lanes, planes) {
                (Some(s), _, Some((_, size))) => match label_image {
                    Some(image) => (s.make(&image, placement.mirrored, size), Vec::new()),
                    None => (Vec::new(), Vec::new()),
                },
                (None, Some(l), Some((_, size))) => {
                    let (rows, plane) = l.make(
                        record_lanes.as_deref().unwrap_or_default(),
                        placement.mirrored,
                        size,
                    );
                    (plane, rows)
                }
                _ => (Vec::new(), Vec::new()),
            };
            let boxes = match (objects, self.geometry) {
                (Some(objects), Some(geometry)) => {
                    let placed =
                        geometry.place_boxes(&objects, &placement, (example.height, example.width));
                    geometry.labels.kept(&placed).map_err(|e| error(key, &e))?;
                    placed
                }
                _ => Vec::new(),
            };
            Ok(Item {
                boxes,
                segmentation,
                lane_labels,
            })
        };
        let (first_slot, rest_slots) = batch.data.split_at_mut(per_item);
        let (first_label, rest_labels) = batch.labels.split_at_mut(per_label);
        let mut made = vec![one(&key, first, first_rng, first_slot, first_label)?];
        let rest: Vec<Pending> = items.collect();
        // Raw records take microseconds: threads would cost more than
        // they save below half a millisecond a batch.
        let threads =
            if started.elapsed() * (rest.len() as u32) < std::time::Duration::from_micros(500) {
                1
            } else {
                threads
            };
        let per_thread = rest.len().div_ceil(threads).max(1);
        let mut work = rest.into_iter();
        let chunk = |mine: Vec<Pending>, slots: &mut [T], labels: &mut [T]| {
            let mut made = Vec::with_capacity(mine.len());
            for (((key, raw, seed), slot), label) in mine
                .into_iter()
                .zip(slots.chunks_mut(per_item))
                .zip(labels.chunks_mut(per_label))
            {
                let (decoded, rng) = prepare(&key, raw, seed)?;
                made.push(one(&key, decoded, rng, slot, label)?);
            }
            Ok(made)
        };
        let mut parts = rest_slots
            .chunks_mut(per_item * per_thread)
            .zip(rest_labels.chunks_mut(per_label * per_thread));
        let outcomes: Vec<Result<Vec<Item>, BlobError>> = std::thread::scope(|scope| {
            // This thread takes the first part itself, helpers the others.
            let own = parts.next().map(|(slots, labels)| {
                let mine: Vec<Pending> = work.by_ref().take(labels.len() / per_label).collect();
                (mine, slots, labels)
            });
            let handles: Vec<_> = parts
                .map(|(slots, labels)| {
                    let mine: Vec<Pending> = work.by_ref().take(labels.len() / per_label).collect();
                    let chunk = &chunk;
                    scope.spawn(move || chunk(mine, slots, labels))
                })
                .collect();
            let mut outcomes = vec![own.map_or(Ok(Vec::new()), |(mine, slots, labels)| {
                chunk(mine, slots, labels)
            })];
            outcomes.extend(handles.into_iter().map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(error("a record", &"its decoding panicked")))
            }));
            outcomes
        });
        // Chunks are in batch order: the first error is the first bad record.
        for outcome in outcomes {
            made.extend(outcome?);
        }
        let mut boxes = Vec::with_capacity(made.len());
        let mut lane_labels = Vec::new();
        for item in made {
            boxes.push(item.boxes);
            batch
                .segmentation
                .extend(item.segmentation.iter().map(|&v| T::from_f64(f64::from(v))));
            lane_labels.extend(item.lane_labels);
        }
        if lanes.is_some() {
            batch.label_shape = vec![self.batch_size, MOST_LANES, MOST_LANE_POINTS, 3];
            batch.labels.clear();
            batch
                .labels
                .extend(lane_labels.iter().map(|&v| T::from_f64(f64::from(v))));
        }
        if let (true, Some(geometry)) = (annotated, self.geometry) {
            let (shape, values) = geometry.labels.top(&boxes);
            batch.label_shape = shape;
            batch.labels.clear();
            batch
                .labels
                .extend(values.iter().map(|&v| T::from_f64(f64::from(v))));
        }
        Ok(batch)
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
        if tops.len() >= 2 {
            shapes.push(TopShape::new(batch.label_shape.clone()));
        }
        if tops.len() == 3 {
            shapes.push(TopShape::new(batch.segmentation_shape.clone()));
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
        if let Some(segmentation) = tops.get(2) {
            segmentation
                .mutable_cpu_data()?
                .copy_from_slice(&batch.segmentation);
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
