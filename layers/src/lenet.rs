//! Caffe's LeNet (examples/mnist) on typed layers: conv1 (20, 5x5), max
//! pool 2x2/2, conv2 (50, 5x5), max pool 2x2/2, ip1 (500), ReLU, ip2 (10),
//! softmax. Every activation's shape is a declared type with a dynamic
//! batch, and every layer checks, when this crate compiles, that it reads
//! the shape before it and writes the shape declared after it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::filler;
use crate::solver::ParamSpec;
use crate::{
    Convolution, InnerProduct, Layer, PoolMethod, Pooling, ReLU, Softmax, SoftmaxWithLoss,
};
use blob_proto::{LayerParameter, NetParameter};
use blob_runtime::blob;
use blob_runtime::typed::{Dyn, SameShapeAs, Shape, TypedBlob};
use blob_runtime::{Blob, BlobError, CaffeModel, DeviceBackend};

type Result<T> = std::result::Result<T, BlobError>;

blob!(pub shape Digits = n: _, c: 1, h: 28, w: 28);
blob!(pub shape Conv1Out = _, 20, 24, 24);
blob!(pub shape Pool1Out = _, 20, 12, 12);
blob!(pub shape Conv2Out = _, 50, 8, 8);
blob!(pub shape Pool2Out = _, 50, 4, 4);
blob!(pub shape Ip1Out = _, 500);
blob!(pub shape Ip2Out = _, 10);
blob!(pub shape Ip1Weights = 500, 800);
blob!(pub shape Ip2Weights = 10, 500);

/// conv1: 1 -> 20 channels, 5x5.
pub type Conv1 = Convolution<f32, Digits, 20, 5>;
/// pool1: max 2x2, stride 2.
pub type Pool1 = Pooling<f32, Conv1Out, 2, 2>;
/// conv2: 20 -> 50 channels, 5x5.
pub type Conv2 = Convolution<f32, Pool1Out, 50, 5>;
/// pool2: max 2x2, stride 2.
pub type Pool2 = Pooling<f32, Conv2Out, 2, 2>;
/// ip1: 800 -> 500.
pub type Ip1 = InnerProduct<f32, Pool2Out, 500>;
/// relu1, in place on ip1's output.
pub type Relu1 = ReLU<f32, Ip1Out>;
/// ip2: 500 -> 10.
pub type Ip2 = InnerProduct<f32, Ip1Out, 10>;

/// The declared weight shapes are the layers' own (checked when this crate
/// compiles), so other code can load tensors into them by name.
const fn same_shape<A: SameShapeAs<B>, B: Shape>() {}
const _: () =
    same_shape::<Ip1Weights, (blob_runtime::typed::D<500>, blob_runtime::typed::D<800>)>();
const _: () = same_shape::<Ip2Weights, (blob_runtime::typed::D<10>, blob_runtime::typed::D<500>)>();

/// Names of the timed stages, in order.
pub const STAGES: [&str; 8] = [
    "conv1", "pool1", "conv2", "pool2", "ip1", "relu1", "ip2", "prob",
];

/// LeNet with its activations and parameters.
///
/// ```no_run
/// let mut net = blob_layers::lenet::LeNet::load("lenet_iter_10000.caffemodel", 64)?;
/// let images = vec![0.0f32; 64 * 28 * 28];
/// let labels = net.predict(&images)?;
/// assert_eq!(labels.len(), 64);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct LeNet {
    /// conv1: 1 -> 20 channels, 5x5.
    pub conv1: Conv1,
    /// pool1: max 2x2, stride 2.
    pub pool1: Pool1,
    /// conv2: 20 -> 50 channels, 5x5.
    pub conv2: Conv2,
    /// pool2: max 2x2, stride 2.
    pub pool2: Pool2,
    /// ip1: 800 -> 500.
    pub ip1: Ip1,
    /// relu1.
    pub relu1: Relu1,
    /// ip2: 500 -> 10.
    pub ip2: Ip2,
    softmax: Softmax<f32, Ip2Out>,
    loss: SoftmaxWithLoss<f32, Ip2Out>,
    labels: TypedBlob<f32, (Dyn,)>,
    data: TypedBlob<f32, Digits>,
    conv1_out: TypedBlob<f32, Conv1Out>,
    pool1_out: TypedBlob<f32, Pool1Out>,
    conv2_out: TypedBlob<f32, Conv2Out>,
    pool2_out: TypedBlob<f32, Pool2Out>,
    ip1_out: TypedBlob<f32, Ip1Out>,
    ip2_out: TypedBlob<f32, Ip2Out>,
    prob: TypedBlob<f32, Ip2Out>,
    /// Time spent in each of [`STAGES`] since the last reset.
    pub timings: [Duration; 8],
}

/// The class of each row of `scores` (`classes` per row): the first
/// maximum, as Caffe's Accuracy layer ranks ties.
pub(crate) fn first_max_classes(scores: &[f32], classes: usize) -> Vec<u8> {
    scores
        .chunks_exact(classes)
        .map(|row| {
            let mut best = 0;
            for (i, &v) in row.iter().enumerate() {
                if v > row[best] {
                    best = i;
                }
            }
            best as u8
        })
        .collect()
}

/// LeNet's `param` specs, in [`LeNet::params`] order, as Caffe's
/// `lenet_train_test.prototxt` gives them: `lr_mult` 1 for weights and 2
/// for biases, `decay_mult` 1 (Caffe's default) for both.
///
/// ```
/// use blob_layers::lenet::PARAM_SPECS;
/// assert_eq!((PARAM_SPECS[1].lr_mult, PARAM_SPECS[1].decay_mult), (2.0, 1.0));
/// ```
pub const PARAM_SPECS: [ParamSpec; 8] = {
    let weights = ParamSpec {
        lr_mult: 1.0,
        decay_mult: 1.0,
    };
    let biases = ParamSpec {
        lr_mult: 2.0,
        decay_mult: 1.0,
    };
    [
        weights, biases, weights, biases, weights, biases, weights, biases,
    ]
};

impl LeNet {
    /// LeNet with zero weights for batches of `batch` images.
    ///
    /// ```
    /// let net = blob_layers::lenet::LeNet::new(8)?;
    /// assert_eq!(net.input().shape(), &[8, 1, 28, 28]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn new(batch: usize) -> Result<Self> {
        Ok(Self {
            conv1: Conv1::new()?,
            pool1: Pool1::new(PoolMethod::Max),
            conv2: Conv2::new()?,
            pool2: Pool2::new(PoolMethod::Max),
            ip1: Ip1::new()?,
            relu1: Relu1::new(),
            ip2: Ip2::new()?,
            softmax: Softmax::new(),
            loss: SoftmaxWithLoss::new(),
            labels: TypedBlob::with_dynamic(batch)?,
            data: TypedBlob::with_dynamic(batch)?,
            conv1_out: TypedBlob::with_dynamic(batch)?,
            pool1_out: TypedBlob::with_dynamic(batch)?,
            conv2_out: TypedBlob::with_dynamic(batch)?,
            pool2_out: TypedBlob::with_dynamic(batch)?,
            ip1_out: TypedBlob::with_dynamic(batch)?,
            ip2_out: TypedBlob::with_dynamic(batch)?,
            prob: TypedBlob::with_dynamic(batch)?,
            timings: [Duration::ZERO; 8],
        })
    }

    /// LeNet with the weights of a `.caffemodel` (new, V1 or V0 format),
    /// loaded with Caffe's `CopyTrainedLayersFrom` rules.
    ///
    /// ```
    /// assert!(blob_layers::lenet::LeNet::load("/no/such.caffemodel", 1).is_err());
    /// ```
    pub fn load(path: impl AsRef<Path>, batch: usize) -> Result<Self> {
        let mut net = Self::new(batch)?;
        net.load_weights(&CaffeModel::open(path)?)?;
        Ok(net)
    }

    /// Copies conv1, conv2, ip1 and ip2 from a model; every one must be
    /// there with Caffe's shapes (a legacy 1x1x1xN bias fits (N)).
    ///
    /// ```
    /// let mut net = blob_layers::lenet::LeNet::new(1)?;
    /// let empty = blob_runtime::CaffeModel::from_net(blob_proto::NetParameter::new("x"));
    /// assert!(net.load_weights(&empty).is_err());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn load_weights(&mut self, model: &CaffeModel) -> Result<()> {
        fn load<W: Shape, B: Shape>(
            model: &CaffeModel,
            name: &str,
            w: &mut TypedBlob<f32, W>,
            b: &mut TypedBlob<f32, B>,
        ) -> Result<()> {
            // The file's shapes must equal these, so the types stay true.
            let (w, b) = (w.as_dyn_mut(), b.as_dyn_mut());
            let mut pair = [std::mem::take(w), std::mem::take(b)];
            let r = model.copy_layer_into(name, &mut pair);
            let [nw, nb] = pair;
            *w = nw;
            *b = nb;
            r
        }
        load(model, "conv1", &mut self.conv1.weight, &mut self.conv1.bias)?;
        load(model, "conv2", &mut self.conv2.weight, &mut self.conv2.bias)?;
        load(model, "ip1", &mut self.ip1.weight, &mut self.ip1.bias)?;
        load(model, "ip2", &mut self.ip2.weight, &mut self.ip2.bias)
    }

    /// Caffe's LeNet initialisation: xavier weights, constant 0 biases.
    ///
    /// ```
    /// let mut net = blob_layers::lenet::LeNet::new(1)?;
    /// blob_kernels::cpu::set_seed(1701);
    /// net.init_fillers()?;
    /// assert!(net.conv1.weight.asum_data()? > 0.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn init_fillers(&mut self) -> Result<()> {
        for pair in self.params().chunks_exact(2) {
            filler::xavier(pair[0])?;
            filler::constant(pair[1], 0.0)?;
        }
        Ok(())
    }

    /// Moves the net's parameters and activations to `device`: from then on
    /// each layer with a kernel for that device runs there (Caffe's
    /// `Forward_gpu`), reading and writing the same blobs, the blobs' heads
    /// moving the bytes where a step runs on the host (a layer without a
    /// kernel for the device) and when the host reads a result (`predict`
    /// reads the probabilities). Data and diffs are kept, so a loaded or
    /// trained net moves as it is.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use blob_layers::lenet::LeNet;
    /// use blob_runtime::{BlobError, DeviceBackend};
    ///
    /// /// Classifies a batch on `gpu` (with the `cuda` feature:
    /// /// `blob_runtime::cuda::CudaBackend::new(0)?`).
    /// fn classify_on(gpu: Arc<dyn DeviceBackend>, images: &[f32]) -> Result<Vec<u8>, BlobError> {
    ///     let mut net = LeNet::load("lenet_iter_10000.caffemodel", 64)?;
    ///     net.to_device(gpu)?;
    ///     net.predict(images)
    /// }
    /// ```
    pub fn to_device(&mut self, device: Arc<dyn DeviceBackend>) -> Result<()> {
        for blob in [
            self.conv1.weight.as_dyn_mut(),
            self.conv1.bias.as_dyn_mut(),
            self.conv2.weight.as_dyn_mut(),
            self.conv2.bias.as_dyn_mut(),
            self.ip1.weight.as_dyn_mut(),
            self.ip1.bias.as_dyn_mut(),
            self.ip2.weight.as_dyn_mut(),
            self.ip2.bias.as_dyn_mut(),
            self.data.as_dyn_mut(),
            self.conv1_out.as_dyn_mut(),
            self.pool1_out.as_dyn_mut(),
            self.conv2_out.as_dyn_mut(),
            self.pool2_out.as_dyn_mut(),
            self.ip1_out.as_dyn_mut(),
            self.ip2_out.as_dyn_mut(),
            self.prob.as_dyn_mut(),
            self.labels.as_dyn_mut(),
        ] {
            blob.move_to(device.clone())?;
        }
        Ok(())
    }

    /// Changes the batch size (activations only grow).
    ///
    /// ```
    /// let mut net = blob_layers::lenet::LeNet::new(4)?;
    /// net.set_batch(2)?;
    /// assert_eq!(net.batch(), 2);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn set_batch(&mut self, n: usize) -> Result<()> {
        self.data.set_dynamic(n)?;
        self.conv1_out.set_dynamic(n)?;
        self.pool1_out.set_dynamic(n)?;
        self.conv2_out.set_dynamic(n)?;
        self.pool2_out.set_dynamic(n)?;
        self.ip1_out.set_dynamic(n)?;
        self.ip2_out.set_dynamic(n)?;
        self.labels.set_dynamic(n)?;
        self.prob.set_dynamic(n)
    }

    /// The batch size.
    ///
    /// ```
    /// assert_eq!(blob_layers::lenet::LeNet::new(3)?.batch(), 3);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn batch(&self) -> usize {
        self.data.shape()[0]
    }

    /// The input blob: write scaled pixels into its data.
    ///
    /// ```
    /// let net = blob_layers::lenet::LeNet::new(1)?;
    /// net.input().mutable_cpu_data()?.fill(0.5);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn input(&self) -> &TypedBlob<f32, Digits> {
        &self.data
    }

    /// Class probabilities of the last forward pass, `(N, 10)`.
    ///
    /// ```
    /// let mut net = blob_layers::lenet::LeNet::new(1)?;
    /// net.forward()?;
    /// assert_eq!(net.prob().shape(), &[1, 10]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn prob(&self) -> &TypedBlob<f32, Ip2Out> {
        &self.prob
    }

    fn timed(&mut self, stage: usize, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let t = Instant::now();
        let r = f(self);
        self.timings[stage] += t.elapsed();
        r
    }

    /// Forward through ip2 (logits), without the softmax.
    fn forward_logits(&mut self) -> Result<()> {
        self.timed(0, |n| n.conv1.forward(&n.data, &n.conv1_out))?;
        self.timed(1, |n| n.pool1.forward(&n.conv1_out, &n.pool1_out))?;
        self.timed(2, |n| n.conv2.forward(&n.pool1_out, &n.conv2_out))?;
        self.timed(3, |n| n.pool2.forward(&n.conv2_out, &n.pool2_out))?;
        self.timed(4, |n| n.ip1.forward(&n.pool2_out, &n.ip1_out))?;
        self.timed(5, |n| n.relu1.forward(&n.ip1_out, &n.ip1_out))?;
        self.timed(6, |n| n.ip2.forward(&n.ip1_out, &n.ip2_out))
    }

    /// Forward pass of the input to class probabilities.
    ///
    /// ```
    /// let mut net = blob_layers::lenet::LeNet::new(2)?;
    /// net.forward()?;
    /// // Zero weights: every class equally likely.
    /// assert!((net.prob().data_at([0, 3]) - 0.1).abs() < 1e-6);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn forward(&mut self) -> Result<()> {
        self.forward_logits()?;
        self.timed(7, |n| n.softmax.forward(&n.ip2_out, &n.prob))
    }

    /// Classifies a batch of scaled images (784 values each), resizing the
    /// net to their number; no images, no classes.
    ///
    /// ```
    /// let mut net = blob_layers::lenet::LeNet::new(2)?;
    /// let err = net.predict(&[0.0; 5]).unwrap_err();
    /// assert!(err.to_string().contains("not whole 28 x 28 digits"), "{err}");
    /// assert_eq!(net.predict(&[0.0; 3 * 784])?.len(), 3);
    /// assert!(net.predict(&[])?.is_empty());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn predict(&mut self, images: &[f32]) -> Result<Vec<u8>> {
        let per = 28 * 28;
        if !images.len().is_multiple_of(per) {
            return Err(BlobError::InvalidParameter {
                op: "predict",
                detail: format!(
                    "{} values are not whole 28 x 28 digits (784 values each)",
                    images.len()
                ),
            });
        }
        if images.is_empty() {
            return Ok(Vec::new());
        }
        let n = images.len() / per;
        if n != self.batch() {
            self.set_batch(n)?;
        }
        self.data.mutable_cpu_data()?.copy_from_slice(images);
        self.forward()?;
        let prob = self.prob.cpu_data()?;
        Ok(first_max_classes(&prob, 10))
    }

    /// The learnable blobs in Caffe's order: conv1 w, b, conv2 w, b, ip1
    /// w, b, ip2 w, b.
    ///
    /// ```
    /// assert_eq!(blob_layers::lenet::LeNet::new(1)?.params()[4].shape(), &[500, 800]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn params(&self) -> [&Blob<f32>; 8] {
        [
            self.conv1.weight.as_dyn(),
            self.conv1.bias.as_dyn(),
            self.conv2.weight.as_dyn(),
            self.conv2.bias.as_dyn(),
            self.ip1.weight.as_dyn(),
            self.ip1.bias.as_dyn(),
            self.ip2.weight.as_dyn(),
            self.ip2.bias.as_dyn(),
        ]
    }

    /// Forward with Caffe's `SoftmaxWithLoss` on `labels`, then backward:
    /// every parameter's diff holds its gradient afterwards (zeroed first).
    /// Returns the loss (Caffe `ForwardBackward`), read once the backward
    /// pass is queued: on a GPU the step's one wait comes last.
    ///
    /// ```
    /// let mut net = blob_layers::lenet::LeNet::new(2)?;
    /// let loss = net.forward_backward(&[3, 7])?;
    /// assert!((loss - 10f32.ln()).abs() < 1e-5);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn forward_backward(&mut self, labels: &[u8]) -> Result<f32> {
        self.backprop(labels)?;
        self.loss()
    }

    /// As [`forward_backward`](Self::forward_backward), without reading
    /// the loss: on a GPU the host queues the whole pass and goes on,
    /// without waiting for the device. [`loss`](Self::loss) reads it
    /// later (a training loop that shows the loss every so many
    /// iterations, as Caffe's `display`, reads it only then).
    ///
    /// ```
    /// let mut net = blob_layers::lenet::LeNet::new(2)?;
    /// net.backprop(&[3, 7])?;
    /// assert!(net.params()[7].asum_diff()? > 0.0); // ip2's bias gradient
    /// assert!((net.loss()? - 10f32.ln()).abs() < 1e-5);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn backprop(&mut self, labels: &[u8]) -> Result<()> {
        if labels.len() != self.batch() {
            return Err(BlobError::CountMismatch {
                op: "softmax loss",
                what: "labels".into(),
                got: labels.len(),
                want: self.batch(),
            });
        }
        for (slot, &label) in self.labels.mutable_cpu_data()?.iter_mut().zip(labels) {
            *slot = f32::from(label);
        }
        self.forward_logits()?;
        self.loss.forward(&self.ip2_out, &self.labels)?;
        for p in self.params() {
            p.clear_diff()?;
        }
        self.loss.backward(&self.ip2_out, &self.labels)?;
        self.ip2.backward(&self.ip1_out, &self.ip2_out, true)?;
        self.relu1.backward(&self.ip1_out, &self.ip1_out, true)?;
        self.ip1.backward(&self.pool2_out, &self.ip1_out, true)?;
        self.pool2
            .backward(&self.conv2_out, &self.pool2_out, true)?;
        self.conv2
            .backward(&self.pool1_out, &self.conv2_out, true)?;
        self.pool1
            .backward(&self.conv1_out, &self.pool1_out, true)?;
        self.conv1.backward(&self.data, &self.conv1_out, false)
    }

    /// The loss of the last [`backprop`](Self::backprop) or
    /// [`forward_backward`](Self::forward_backward); 0 before either.
    ///
    /// ```
    /// let mut net = blob_layers::lenet::LeNet::new(1)?;
    /// assert_eq!(net.loss()?, 0.0);
    /// net.backprop(&[4])?;
    /// assert!(net.loss()? > 0.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn loss(&self) -> Result<f32> {
        self.loss.value()
    }

    /// The net as a `.caffemodel` Caffe reads (layer names and types of
    /// Caffe's lenet_train_test, with the learned blobs).
    ///
    /// ```
    /// let net = blob_layers::lenet::LeNet::new(1)?;
    /// let model = net.to_caffemodel()?;
    /// assert_eq!(model.layers().count(), 9);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_caffemodel(&self) -> Result<CaffeModel> {
        let mut net = NetParameter::new("LeNet");
        let p = self.params();
        let blobs = |w: &Blob<f32>, b: &Blob<f32>| -> Result<Vec<_>> {
            Ok(vec![w.to_proto(false)?, b.to_proto(false)?])
        };
        for (name, kind, blobs) in [
            ("mnist", "Data", vec![]),
            ("conv1", "Convolution", blobs(p[0], p[1])?),
            ("pool1", "Pooling", vec![]),
            ("conv2", "Convolution", blobs(p[2], p[3])?),
            ("pool2", "Pooling", vec![]),
            ("ip1", "InnerProduct", blobs(p[4], p[5])?),
            ("relu1", "ReLU", vec![]),
            ("ip2", "InnerProduct", blobs(p[6], p[7])?),
            ("loss", "SoftmaxWithLoss", vec![]),
        ] {
            net.push_layer(LayerParameter::new(name, kind, blobs));
        }
        Ok(CaffeModel::from_net(net))
    }
}
