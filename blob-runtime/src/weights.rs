//! Caffe model files: open, list layers, load weights into blobs with
//! Caffe's `CopyTrainedLayersFrom` rules, change them, and write back.

use std::path::{Path, PathBuf};

use blob_proto::{BlobProto, LayerParameter, NetFormat, NetParameter, SolverState};

use crate::blob::Blob;
use crate::element::MathElement;
use crate::error::{BlobError, Result};
use crate::proto::{proto_err, proto_shape_string, read_file, write_file};

/// What [`CaffeModel::copy_trained_layers_into`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Target layers whose blobs were loaded, in file order.
    pub copied: Vec<String>,
    /// Layers in the file with no target of that name (Caffe ignores them).
    pub ignored: Vec<String>,
    /// Targets the file has no layer for (left as they were).
    pub missing: Vec<String>,
}

/// A `.caffemodel` file in memory: any of Caffe's three net formats, with
/// every field blobflow does not model kept for writing back.
///
/// ```no_run
/// use blob_runtime::{Blob, CaffeModel};
/// let model = CaffeModel::open("lenet_iter_10000.caffemodel")?;
/// for layer in model.layers() {
///     println!("{} {} {}", layer.name(), layer.type_name(), layer.blobs().len());
/// }
/// let mut conv1 = vec![Blob::<f32>::new(&[20, 1, 5, 5])?, Blob::<f32>::new(&[20])?];
/// model.copy_layer_into("conv1", &mut conv1)?;
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Clone, Debug)]
pub struct CaffeModel {
    net: NetParameter,
    source: String,
}

impl CaffeModel {
    /// Reads a model file. The file's bytes are dropped once decoded, so
    /// memory peaks at the file plus its decoded blobs.
    ///
    /// ```
    /// let err = blob_runtime::CaffeModel::open("/no/such.caffemodel").unwrap_err();
    /// assert!(err.to_string().starts_with("/no/such.caffemodel:"), "{err}");
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = read_file(path)?;
        let net = NetParameter::decode(&bytes).map_err(|e| {
            // Another of Caffe's files (a mean .binaryproto, a
            // .solverstate) fails as a net: say what it is instead.
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            match blob_proto::detect_format(&bytes, name.as_deref()) {
                Ok(
                    f @ (blob_proto::FileFormat::BlobProto
                    | blob_proto::FileFormat::BlobProtoVector
                    | blob_proto::FileFormat::SolverState),
                ) => BlobError::InFile {
                    path: path.display().to_string(),
                    source: Box::new(BlobError::InvalidParameter {
                        op: "read a model",
                        detail: format!("this is a {} file, not a net (.caffemodel)", f.name()),
                    }),
                },
                _ => proto_err(path)(e),
            }
        })?;
        Ok(Self {
            net,
            source: path.display().to_string(),
        })
    }

    /// Reads a model from bytes.
    ///
    /// ```
    /// let m = blob_runtime::CaffeModel::from_bytes(&[0x0a, 0x01, b'n']).unwrap();
    /// assert_eq!(m.name(), Some("n"));
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let net = NetParameter::decode(bytes).map_err(proto_err(Path::new("<bytes>")))?;
        Ok(Self {
            net,
            source: "<bytes>".into(),
        })
    }

    /// A model made from a net built in memory.
    ///
    /// ```
    /// let m = blob_runtime::CaffeModel::from_net(blob_proto::NetParameter::new("x"));
    /// assert_eq!(m.layers().count(), 0);
    /// ```
    pub fn from_net(net: NetParameter) -> Self {
        Self {
            net,
            source: "<memory>".into(),
        }
    }

    /// The net's name.
    ///
    /// ```
    /// # let m = blob_runtime::CaffeModel::from_net(blob_proto::NetParameter::new("x"));
    /// assert_eq!(m.name(), Some("x"));
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.net.name()
    }

    /// The file's net format (new, V1, V0).
    ///
    /// ```
    /// # let m = blob_runtime::CaffeModel::from_net(blob_proto::NetParameter::new("x"));
    /// assert_eq!(m.format(), blob_proto::NetFormat::New);
    /// ```
    pub fn format(&self) -> NetFormat {
        self.net.format()
    }

    /// The layers in file order.
    ///
    /// ```
    /// # let m = blob_runtime::CaffeModel::from_net(blob_proto::NetParameter::new("x"));
    /// assert!(m.layers().next().is_none());
    /// ```
    pub fn layers(&self) -> impl Iterator<Item = &LayerParameter> {
        self.net.iter_layers()
    }

    /// The underlying net, for fields beyond name, type and blobs.
    ///
    /// ```
    /// # let m = blob_runtime::CaffeModel::from_net(blob_proto::NetParameter::new("x"));
    /// assert_eq!(m.net().layers().len(), 0);
    /// ```
    pub fn net(&self) -> &NetParameter {
        &self.net
    }

    /// Where the model came from (its path, or `<memory>`).
    #[cfg(feature = "safetensors")]
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// The layer `name` means: the one of that name holding blobs (a
    /// weightless layer may share the name of one with weights, as a
    /// `data` layer with a `data` Scale), else the first of that name.
    /// Two of that name holding blobs are ambiguous: an error naming both.
    fn find(&self, name: &str) -> Result<&LayerParameter> {
        let mut named = self.layers().enumerate().filter(|(_, l)| l.name() == name);
        let Some((first_at, first)) = named.next() else {
            return Err(BlobError::LayerNotFound {
                path: self.source.clone(),
                layer: blob_proto::excerpt(name),
            });
        };
        let mut holder = (!first.blobs().is_empty()).then_some((first_at, first));
        for (at, layer) in named.filter(|(_, l)| !l.blobs().is_empty()) {
            if let Some((before, _)) = holder {
                return Err(BlobError::InFile {
                    path: self.source.clone(),
                    source: Box::new(BlobError::InvalidParameter {
                        op: "find a layer's blobs",
                        detail: format!(
                            "layers {before} and {at} are both named '{}' and both hold blobs; which is meant is ambiguous",
                            blob_proto::excerpt(name)
                        ),
                    }),
                });
            }
            holder = Some((at, layer));
        }
        Ok(holder.map_or(first, |(_, l)| l))
    }

    /// A layer's blobs as new blobs of the file's shapes. A blob whose
    /// shape and stored values disagree is an error naming the file, the
    /// layer, the blob's index and both counts.
    ///
    /// ```
    /// use blob_proto::{BlobProto, BlobShape, LayerParameter, NetParameter};
    /// let mut net = NetParameter::new("n");
    /// let short = BlobProto { shape: Some(BlobShape { dim: vec![3] }), data: vec![1.0], ..Default::default() };
    /// net.push_layer(LayerParameter::new("ip", "InnerProduct", vec![short]));
    /// let m = blob_runtime::CaffeModel::from_net(net);
    /// assert_eq!(
    ///     m.layer_blobs::<f32>("ip").unwrap_err().to_string(),
    ///     "<memory>: layer 'ip' blob 0: shape 3 has 3 values but the file stores 1 (in data)"
    /// );
    /// assert!(m.layer_blobs::<f32>("conv1").is_err()); // no such layer
    /// ```
    pub fn layer_blobs<T: MathElement>(&self, name: &str) -> Result<Vec<Blob<T>>> {
        let layer = self.find(name)?;
        check_layer_values(&self.source, layer)?;
        layer.blobs().iter().map(Blob::from_proto).collect()
    }

    /// Loads the file's layer `name` into `targets` with Caffe's rules: the
    /// numbers of blobs must match, and each target's shape must equal the
    /// file's (legacy 4-D shapes compare right-aligned, so a V1 bias of
    /// 1x1x1xN loads into a blob of shape (N)). A missing layer is an error.
    ///
    /// ```
    /// use blob_proto::{BlobProto, BlobShape, LayerParameter, NetParameter};
    /// let mut net = NetParameter::new("n");
    /// let bias = BlobProto { num: Some(1), channels: Some(1), height: Some(1), width: Some(2), data: vec![0.5, 1.5], ..Default::default() };
    /// net.push_layer(LayerParameter::new("ip", "InnerProduct", vec![bias]));
    /// let model = blob_runtime::CaffeModel::from_net(net);
    /// let mut target = vec![blob_runtime::Blob::<f32>::new(&[2])?];
    /// model.copy_layer_into("ip", &mut target)?;
    /// assert_eq!(&*target[0].cpu_data()?, &[0.5, 1.5]);
    /// let mut wrong = vec![blob_runtime::Blob::<f32>::new(&[3])?];
    /// assert!(model.copy_layer_into("ip", &mut wrong).unwrap_err().to_string().contains("shape mismatch"));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn copy_layer_into<T: MathElement>(
        &self,
        name: &str,
        targets: &mut [Blob<T>],
    ) -> Result<()> {
        copy_layer(&self.source, self.find(name)?, targets)
    }

    /// Loads the file's layer `name` into blobs that live elsewhere (a
    /// layer's `blobs()`, typed blobs' `as_dyn()`), with the rules
    /// of [`copy_layer_into`](Self::copy_layer_into): as many blobs as the
    /// file's, each of the file's shape; an error names the layer and
    /// blob otherwise, and nothing is written.
    ///
    /// ```
    /// use blob_proto::{BlobProto, BlobShape, LayerParameter, NetParameter};
    /// use blob_runtime::{blob, typed::TypedBlob};
    /// let mut net = NetParameter::new("n");
    /// let w = BlobProto { shape: Some(BlobShape { dim: vec![2, 2] }), data: vec![1.0, 2.0, 3.0, 4.0], ..Default::default() };
    /// let b = BlobProto { shape: Some(BlobShape { dim: vec![2] }), data: vec![0.5, -0.5], ..Default::default() };
    /// net.push_layer(LayerParameter::new("ip", "InnerProduct", vec![w, b]));
    /// let model = blob_runtime::CaffeModel::from_net(net);
    /// let weight = <blob!(f32; 2, 2)>::new()?;
    /// let bias = <blob!(f32; 2)>::new()?;
    /// model.load_layer("ip", &[weight.as_dyn(), bias.as_dyn()])?;
    /// assert_eq!(weight.data_at([1, 0]), 3.0);
    /// assert_eq!(bias.to_vec()?, [0.5, -0.5]);
    /// assert!(model.load_layer("ip", &[weight.as_dyn()]).is_err()); // 1 blob, the file has 2
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn load_layer<T: MathElement>(&self, name: &str, targets: &[&Blob<T>]) -> Result<()> {
        let layer = self.find(name)?;
        check_load(&self.source, layer, targets)?;
        let values = layer
            .blobs()
            .iter()
            .map(Blob::<T>::from_proto)
            .collect::<Result<Vec<_>>>()?;
        for (value, target) in values.iter().zip(targets) {
            target
                .mutable_cpu_data()?
                .copy_from_slice(&value.cpu_data()?);
        }
        Ok(())
    }

    /// Caffe's `Net::CopyTrainedLayersFrom`: for each layer of the file in
    /// order, the target of the same name gets its blobs; file layers with
    /// no target are ignored, and targets with no file layer are left as
    /// they are. The report says which was which.
    ///
    /// ```
    /// # let m = blob_runtime::CaffeModel::from_net(blob_proto::NetParameter::new("x"));
    /// let mut ip = vec![blob_runtime::Blob::<f32>::new(&[2])?];
    /// let report = m.copy_trained_layers_into(&mut [("ip", ip.as_mut_slice())])?;
    /// assert_eq!(report.missing, ["ip"]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn copy_trained_layers_into<T: MathElement>(
        &self,
        targets: &mut [(&str, &mut [Blob<T>])],
    ) -> Result<CopyReport> {
        let mut report = CopyReport::default();
        let mut done = vec![false; targets.len()];
        for layer in self.layers() {
            match targets.iter_mut().position(|(n, _)| *n == layer.name()) {
                Some(i) => {
                    copy_layer(&self.source, layer, targets[i].1)?;
                    done[i] = true;
                    report.copied.push(layer.name().into());
                }
                None => report.ignored.push(layer.name().into()),
            }
        }
        report.missing = targets
            .iter()
            .zip(done)
            .filter(|(_, d)| !d)
            .map(|((n, _), _)| n.to_string())
            .collect();
        Ok(report)
    }

    /// Replaces a layer's blobs with `blobs` (Caffe `ToProto`, with diff if
    /// `write_diff`); every other field of the layer is kept. A blob that
    /// replaces one stored in Caffe's legacy num/channels/height/width
    /// fields (V1 files) is written the same way when its shape, aligned
    /// to the right, is the stored one: Caffe compares legacy shapes
    /// right-aligned but new-style shapes exactly, so a V1 bias of
    /// `1 1 1 20` written back as a 4-D `shape` would no longer load into
    /// a bias of `20`. A changed shape is written as `shape`.
    ///
    /// ```
    /// use blob_proto::{LayerParameter, NetParameter};
    /// let mut net = NetParameter::new("n");
    /// net.push_layer(LayerParameter::new("ip", "InnerProduct", vec![]));
    /// let mut m = blob_runtime::CaffeModel::from_net(net);
    /// let w = blob_runtime::Blob::<f32>::new(&[2, 2])?;
    /// m.set_layer_blobs("ip", &[&w], false)?;
    /// assert_eq!(m.layer_blobs::<f32>("ip")?[0].shape(), &[2, 2]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn set_layer_blobs<T: MathElement>(
        &mut self,
        name: &str,
        blobs: &[&Blob<T>],
        write_diff: bool,
    ) -> Result<()> {
        let stored = self.find(name)?.blobs();
        let protos = blobs
            .iter()
            .enumerate()
            .map(|(j, b)| {
                let mut proto = b.to_proto(write_diff)?;
                if let Some(old) = stored.get(j) {
                    keep_legacy_dims(old, b.shape(), &mut proto);
                }
                Ok(proto)
            })
            .collect::<Result<Vec<_>>>()?;
        let layer = self
            .net
            .layer_mut(name)
            .expect("found by name above; names do not change");
        *layer.blobs_mut() = protos;
        Ok(())
    }

    /// The model's bytes (Caffe `WriteProtoToBinaryFile`); unchanged parts
    /// are byte-identical to what was read.
    ///
    /// ```
    /// let m = blob_runtime::CaffeModel::from_bytes(&[0x0a, 0x01, b'n']).unwrap();
    /// assert_eq!(m.to_bytes().unwrap(), [0x0a, 0x01, b'n']);
    /// ```
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.net
            .encode_to_vec()
            .map_err(proto_err(Path::new(&self.source)))
    }

    /// Writes the model to a file Caffe reads.
    ///
    /// ```no_run
    /// # let m = blob_runtime::CaffeModel::from_net(blob_proto::NetParameter::new("x"));
    /// m.save("out.caffemodel")?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let bytes = self.net.encode_to_vec().map_err(proto_err(path))?;
        write_file(path, &bytes)
    }
}

/// Writes `proto` (made with a `shape`) in `old`'s legacy fields instead,
/// when `old` used them and `shape`, right-aligned in four dims, is the
/// shape `old` stores.
fn keep_legacy_dims(old: &BlobProto, shape: &[usize], proto: &mut BlobProto) {
    if !old.has_legacy_dims() || shape.len() > 4 {
        return;
    }
    let mut dims = [1i64; 4];
    for (d, &s) in dims[4 - shape.len()..].iter_mut().zip(shape) {
        *d = s as i64;
    }
    if dims[..] != old.stored_shape()[..] {
        return;
    }
    // Equal to dims stored as i32, so each fits.
    let legacy = |present: Option<i32>, d: i64| present.map(|_| d as i32);
    proto.num = legacy(old.num, dims[0]);
    proto.channels = legacy(old.channels, dims[1]);
    proto.height = legacy(old.height, dims[2]);
    proto.width = legacy(old.width, dims[3]);
    proto.shape = None;
}

/// Fails on the first blob of `layer` whose shape and stored values
/// disagree, naming the file, the layer and the blob.
pub(crate) fn check_layer_values(path: &str, layer: &LayerParameter) -> Result<()> {
    for (j, proto) in layer.blobs().iter().enumerate() {
        proto
            .check_values(&format!("layer '{}' blob {j}", layer.name()))
            .map_err(|source| BlobError::Proto {
                path: path.to_string(),
                source,
            })?;
    }
    Ok(())
}

fn copy_layer<T: MathElement>(
    path: &str,
    layer: &LayerParameter,
    targets: &mut [Blob<T>],
) -> Result<()> {
    check_load(path, layer, &targets.iter().collect::<Vec<_>>())?;
    for (proto, target) in layer.blobs().iter().zip(targets.iter_mut()) {
        target.load_proto(proto, false)?;
    }
    Ok(())
}

/// Caffe's rules for loading a layer's blobs into `targets`: as many,
/// each of the file's shape, every value present.
fn check_load<T: MathElement>(
    path: &str,
    layer: &LayerParameter,
    targets: &[&Blob<T>],
) -> Result<()> {
    let source = layer.blobs();
    if source.len() != targets.len() {
        return Err(BlobError::IncompatibleBlobCount {
            layer: layer.name().into(),
            source_count: source.len(),
            target_count: targets.len(),
        });
    }
    for (j, (proto, target)) in source.iter().zip(targets).enumerate() {
        if !target.shape_equals(proto) {
            return Err(BlobError::WeightShapeMismatch {
                layer: layer.name().into(),
                param: j,
                source_shape: proto_shape_string(proto),
                target_shape: target.shape_string(),
            });
        }
    }
    check_layer_values(path, layer)
}

/// Reads a `.solverstate` snapshot.
///
/// ```no_run
/// let state = blob_runtime::read_solver_state("lenet_iter_500.solverstate")?;
/// println!("iteration {}", state.iter.unwrap_or(0));
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn read_solver_state(path: impl AsRef<Path>) -> Result<SolverState> {
    let path = path.as_ref();
    let bytes = read_file(path)?;
    blob_proto::decode_message("SolverState", &bytes).map_err(proto_err(path))
}

/// Writes a `.solverstate` snapshot Caffe reads.
///
/// ```no_run
/// let state = blob_proto::SolverState { iter: Some(500), ..Default::default() };
/// blob_runtime::write_solver_state("lenet_iter_500.solverstate", &state)?;
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn write_solver_state(path: impl AsRef<Path>, state: &SolverState) -> Result<()> {
    let path: PathBuf = path.as_ref().into();
    let bytes = blob_proto::encode_message("SolverState", state).map_err(proto_err(&path))?;
    write_file(&path, &bytes)
}
