//! Caffe's `MemoryData` (`memory_data_layer.cpp`): batches from arrays
//! the program hands the layer, through the net
//! ([`Net::layer_mut`](blob_layers::net::Net::layer_mut)).

use blob_layers::{Arity, DynLayer, TopShape};
use blob_proto::ParamMessage;
use blob_runtime::{Blob, BlobError, MathElement};
use prost::Message;

use crate::transform::DataTransformer;

fn refused(detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "run MemoryData",
        detail: detail.into(),
    }
}

/// Caffe `MemoryData`: `batch_size` images of `channels` x `height` x
/// `width` and their labels at a time, from the arrays given to
/// [`reset`](Self::reset) (used as they are, as Caffe's `Reset`) or the
/// records given to [`add_datum_vector`](Self::add_datum_vector)
/// (through `transform_param`), round and round.
///
/// ```
/// use blob_data::{MemoryDataLayer, data_registry};
/// use blob_layers::net::{Net, NetState};
/// let mut net = Net::<f32>::builder().registry(&data_registry()).from_prototxt(
///     "layer { name: 'in' type: 'MemoryData' top: 'data' top: 'label'
///              memory_data_param { batch_size: 2 channels: 1 height: 1 width: 3 } }",
/// )?;
/// let feed = net.layer_mut::<MemoryDataLayer<f32>>("in").unwrap();
/// feed.reset(&[1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.], &[0., 1., 2., 3.], 4)?;
/// net.forward()?;
/// assert_eq!(net.blob("label").unwrap().to_vec()?, [0., 1.]);
/// net.forward()?;
/// assert_eq!(net.blob("data").unwrap().to_vec()?, [7., 8., 9., 10., 11., 12.]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct MemoryDataLayer<T: MathElement> {
    batch: usize,
    image: [usize; 3],
    data: Vec<T>,
    labels: Vec<T>,
    n: usize,
    pos: usize,
    /// Records added and not yet all served (Caffe's `has_new_data_`).
    has_new_data: bool,
    transformer: DataTransformer<T>,
}

impl<T: MathElement> MemoryDataLayer<T> {
    /// Reads `memory_data_param` (every size positive) and
    /// `transform_param`.
    pub fn from_param(layer: &ParamMessage) -> Result<Self, BlobError> {
        let p = layer
            .message("memory_data_param")
            .cloned()
            .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::MEMORY_DATA));
        let size = |f: &str| -> Result<usize, BlobError> {
            match p.uint(f) {
                0 => Err(BlobError::InvalidParameter {
                    op: "set up MemoryData",
                    detail: format!("memory_data_param.{f} must be positive"),
                }),
                v => Ok(v as usize),
            }
        };
        Ok(Self {
            batch: size("batch_size")?,
            image: [size("channels")?, size("height")?, size("width")?],
            data: Vec::new(),
            labels: Vec::new(),
            n: 0,
            pos: 0,
            has_new_data: false,
            transformer: DataTransformer::from_layer(layer)?,
        })
    }

    fn image_len(&self) -> usize {
        self.image.iter().product()
    }

    /// Caffe's `Reset(data, labels, n)`: `n` images (a multiple of the
    /// batch size) and their labels, served from the first on. No
    /// `transform_param` is applied to them, as in Caffe.
    pub fn reset(&mut self, data: &[T], labels: &[T], n: usize) -> Result<(), BlobError> {
        if n == 0 || !n.is_multiple_of(self.batch) {
            return Err(refused(format!(
                "n must be a multiple of batch size: {n} images for batches of {}",
                self.batch
            )));
        }
        let want = n * self.image_len();
        if data.len() != want || labels.len() != n {
            return Err(refused(format!(
                "{n} images of {} x {} x {} need {want} values and {n} labels, not {} and {}",
                self.image[0],
                self.image[1],
                self.image[2],
                data.len(),
                labels.len()
            )));
        }
        self.data = data.to_vec();
        self.labels = labels.to_vec();
        self.n = n;
        self.pos = 0;
        Ok(())
    }

    /// Caffe's `AddDatumVector`: serialized `Datum` records (raw or
    /// encoded), each transformed by `transform_param` into the layer's
    /// image shape, a multiple of the batch size of them, refused while
    /// the records added before are not all served.
    pub fn add_datum_vector(&mut self, records: &[Vec<u8>]) -> Result<(), BlobError> {
        if self.has_new_data {
            return Err(refused(
                "Can't add data until current data has been consumed.",
            ));
        }
        let n = records.len();
        if n == 0 || !n.is_multiple_of(self.batch) {
            return Err(refused(format!(
                "The added data must be a multiple of the batch size: {n} records for batches of {}",
                self.batch
            )));
        }
        let len = self.image_len();
        let mut data = vec![T::ZERO; n * len];
        let mut labels = Vec::with_capacity(n);
        for (i, (record, out)) in records.iter().zip(data.chunks_mut(len)).enumerate() {
            let example = crate::datum::decode_datum(record, self.transformer.color_mode())
                .map_err(|e| refused(format!("record {i}: {e}")))?;
            let shape = self
                .transformer
                .output_shape(&example)
                .map_err(|e| refused(format!("record {i}: {e}")))?;
            if shape != self.image {
                return Err(refused(format!(
                    "record {i} becomes {shape:?}, not the layer's {:?}",
                    self.image
                )));
            }
            self.transformer.transform(&example, out, &mut |n| {
                blob_kernels::cpu::rng_rand() % n.max(1)
            })?;
            labels.push(T::from_f64(f64::from(example.label)));
        }
        self.reset(&data, &labels, n)?;
        self.has_new_data = true;
        Ok(())
    }

    /// [`add_datum_vector`](Self::add_datum_vector) of `blob_proto::Datum`s.
    pub fn add_datums(&mut self, datums: &[blob_proto::Datum]) -> Result<(), BlobError> {
        let records: Vec<Vec<u8>> = datums.iter().map(Message::encode_to_vec).collect();
        self.add_datum_vector(&records)
    }

    /// Caffe's `set_batch_size`, refused while added records wait.
    pub fn set_batch_size(&mut self, batch: usize) -> Result<(), BlobError> {
        if self.has_new_data {
            return Err(refused(
                "Can't change batch_size until current data has been consumed.",
            ));
        }
        if batch == 0 {
            return Err(refused("the batch size must be positive"));
        }
        self.batch = batch;
        Ok(())
    }

    /// The images a forward pass serves.
    pub fn batch_size(&self) -> usize {
        self.batch
    }
}

impl<T: MathElement> DynLayer<T> for MemoryDataLayer<T> {
    fn type_name(&self) -> &str {
        "MemoryData"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(0)
    }

    fn tops(&self) -> Arity {
        Arity::exactly(2)
    }

    /// `(batch, C, H, W)` and the labels: `(batch)` before any data, as
    /// Caffe's set-up, `(batch, 1, 1, 1)` after, as its forward pass.
    fn reshape(
        &mut self,
        _bottoms: &[&Blob<T>],
        _tops: &[&Blob<T>],
    ) -> Result<Vec<TopShape>, BlobError> {
        let [c, h, w] = self.image;
        let labels = if self.n == 0 {
            vec![self.batch]
        } else {
            vec![self.batch, 1, 1, 1]
        };
        Ok(vec![
            TopShape::new(vec![self.batch, c, h, w]),
            TopShape::new(labels),
        ])
    }

    fn forward(&mut self, _bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<(), BlobError> {
        if self.n == 0 {
            return Err(refused(
                "MemoryDataLayer needs to be initialized by calling Reset (reset or \
                 add_datum_vector, through Net::layer_mut)",
            ));
        }
        let len = self.image_len();
        let (from, to) = (self.pos, self.pos + self.batch);
        tops[0]
            .mutable_cpu_data()?
            .copy_from_slice(&self.data[from * len..to * len]);
        tops[1]
            .mutable_cpu_data()?
            .copy_from_slice(&self.labels[from..to]);
        self.pos = to % self.n;
        if self.pos == 0 {
            self.has_new_data = false;
        }
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

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}
