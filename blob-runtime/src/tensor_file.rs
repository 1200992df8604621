//! `.safetensors` files (feature `safetensors`): blobs out to the format
//! other Rust and Python frameworks read, and tensors back into blobs with
//! their element type and shape checked.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, View};

use crate::blob::{Blob, shape_string};
use crate::element::{Element, MathElement};
use crate::error::{BlobError, Result};
use crate::proto::{read_file, write_file};
use crate::typed::{Shape, TypedBlob};
use crate::weights::CaffeModel;

const IN_MEMORY: &str = "<memory>";

fn dtype_of<T: Element>() -> Dtype {
    match T::NAME {
        "f32" => Dtype::F32,
        "f64" => Dtype::F64,
        "i32" => Dtype::I32,
        "u32" => Dtype::U32,
        other => unreachable!("Element is sealed; {other} has no safetensors dtype"),
    }
}

/// One blob's bytes, as the encoder wants them.
struct TensorBytes {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl View for &TensorBytes {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

fn tensor_bytes<T: Element>(blob: &Blob<T>) -> Result<TensorBytes> {
    Ok(TensorBytes {
        dtype: dtype_of::<T>(),
        shape: blob.shape().to_vec(),
        bytes: bytemuck::cast_slice(&blob.cpu_data()?).to_vec(),
    })
}

fn encode(path: &str, tensors: Vec<(String, TensorBytes)>) -> Result<Vec<u8>> {
    let views = tensors.iter().map(|(name, t)| (name.as_str(), t));
    safetensors::serialize(views, None).map_err(|e| BlobError::TensorFile {
        path: path.into(),
        source: Box::new(e),
    })
}

/// The `.safetensors` bytes of named blobs (data only; a diff is a
/// training state, not a weight). Names must be unique.
///
/// ```
/// let b = blob_runtime::Blob::<f64>::new(&[4])?;
/// let bytes = blob_runtime::write_tensors([("x", &b)])?;
/// assert_eq!(blob_runtime::TensorFile::from_bytes(bytes)?.names(), ["x"]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn write_tensors<'a, T: Element>(
    blobs: impl IntoIterator<Item = (&'a str, &'a Blob<T>)>,
) -> Result<Vec<u8>> {
    let tensors = blobs
        .into_iter()
        .map(|(name, blob)| Ok((name.to_string(), tensor_bytes(blob)?)))
        .collect::<Result<Vec<_>>>()?;
    encode(IN_MEMORY, tensors)
}

/// A layer's tensors under the frameworks' names ([`TensorNames::Framework`]).
fn framework_named(
    layer: &str,
    kind: &str,
    blobs: Vec<TensorBytes>,
) -> Result<Vec<(String, TensorBytes)>> {
    let named = |what: &str| format!("{layer}.{what}");
    if kind == "BatchNorm" && blobs.len() == 3 {
        // Caffe keeps the sums and their weight; frameworks the quotients
        // (0 where the weight is 0, as Caffe computes them).
        let factor = match blobs[2].dtype {
            Dtype::F64 => bytemuck::pod_read_unaligned::<f64>(&blobs[2].bytes[..8]),
            _ => f64::from(bytemuck::pod_read_unaligned::<f32>(&blobs[2].bytes[..4])),
        };
        let scale = if factor == 0.0 { 0.0 } else { 1.0 / factor };
        let scaled = |t: &TensorBytes| -> TensorBytes {
            let bytes = match t.dtype {
                Dtype::F64 => t
                    .bytes
                    .chunks_exact(8)
                    .flat_map(|c| (bytemuck::pod_read_unaligned::<f64>(c) * scale).to_le_bytes())
                    .collect(),
                _ => t
                    .bytes
                    .chunks_exact(4)
                    .flat_map(|c| {
                        (bytemuck::pod_read_unaligned::<f32>(c) * scale as f32).to_le_bytes()
                    })
                    .collect(),
            };
            TensorBytes {
                dtype: t.dtype,
                shape: t.shape.clone(),
                bytes,
            }
        };
        return Ok(vec![
            (named("running_mean"), scaled(&blobs[0])),
            (named("running_var"), scaled(&blobs[1])),
        ]);
    }
    let roles: &[&str] = match kind {
        "Convolution"
        | "Deconvolution"
        | "InnerProduct"
        | "Scale"
        | "Embed"
        | "PReLU"
        | "DepthwiseConvolution"
        | "ConvolutionDepthwise" => &["weight", "bias"],
        "Bias" => &["bias"],
        _ => &[],
    };
    Ok(blobs
        .into_iter()
        .enumerate()
        .map(|(index, t)| {
            let name = roles
                .get(index)
                .map_or_else(|| format!("{layer}.{index}"), |role| named(role));
            (name, t)
        })
        .collect())
}

/// How [`CaffeModel::to_safetensors_named`] names a model's tensors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TensorNames {
    /// `layer.index` in Caffe's blob order (`conv1.0`, `conv1.1`): every
    /// blob kept as Caffe holds it; [`TensorFile::to_caffemodel`] reads
    /// them back.
    #[default]
    Caffe,
    /// The names candle-nn, burn and PyTorch's `state_dict` look for:
    /// `layer.weight` and `layer.bias` (Convolution, Deconvolution,
    /// InnerProduct, Scale, PReLU, Embed, Bias's `layer.bias`), and a
    /// BatchNorm's `layer.running_mean` and `layer.running_var`: Caffe's
    /// sums divided by its third blob, the moving-average factor, which
    /// is left out (the statistics themselves, as frameworks keep them).
    /// Blobs of other layers keep `layer.index`.
    Framework,
}

impl CaffeModel {
    /// The model's learned blobs as `.safetensors` bytes (feature
    /// `safetensors`): one `f32` tensor per blob, named `layer.index` in
    /// Caffe's blob order (`conv1.0` the weights, `conv1.1` the bias), so
    /// that layers with more than two blobs (BatchNorm's three) keep every
    /// one. [`TensorFile::to_caffemodel`] reads them back.
    ///
    /// ```no_run
    /// let model = blob_runtime::CaffeModel::open("lenet_iter_10000.caffemodel")?;
    /// model.save_safetensors("lenet.safetensors")?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_safetensors(&self) -> Result<Vec<u8>> {
        self.to_safetensors_named(TensorNames::Caffe)
    }

    /// [`CaffeModel::to_safetensors`] with the tensors named as `names`
    /// says: Caffe's `layer.index` or the frameworks' `layer.weight`.
    ///
    /// ```no_run
    /// use blob_runtime::{CaffeModel, TensorFile, TensorNames};
    /// let model = CaffeModel::open("lenet_iter_10000.caffemodel")?;
    /// let bytes = model.to_safetensors_named(TensorNames::Framework)?;
    /// assert!(TensorFile::from_bytes(bytes)?.names().iter().any(|n| n == "conv1.weight"));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_safetensors_named(&self, names: TensorNames) -> Result<Vec<u8>> {
        let refuse = |detail: String| BlobError::InFile {
            path: self.source().to_string(),
            source: Box::new(BlobError::InvalidParameter {
                op: "convert to safetensors",
                detail,
            }),
        };
        let mut tensors = Vec::new();
        let mut owner: HashMap<&str, usize> = HashMap::new();
        for (i, layer) in self.layers().enumerate() {
            if layer.blobs().is_empty() {
                continue;
            }
            if let Some(first) = owner.insert(layer.name(), i) {
                return Err(refuse(format!(
                    "layers {first} and {i} are both named '{}' and both hold blobs: their tensors would share names; rename one",
                    blob_proto::excerpt(layer.name())
                )));
            }
            let blobs = self.blobs_of(layer)?;
            if names == TensorNames::Framework {
                tensors.extend(framework_named(layer.name(), layer.type_name(), blobs)?);
                continue;
            }
            for (index, proto) in blobs.into_iter().enumerate() {
                tensors.push((format!("{}.{index}", layer.name()), proto));
            }
        }
        if tensors.is_empty() {
            return Err(refuse(
                "no layer holds blobs: nothing to convert (a .binaryproto holds one blob, not a net; `blobflow inspect` reads it)".into(),
            ));
        }
        encode(IN_MEMORY, tensors)
    }

    /// A layer's blobs as tensors: `double_data` as F64 (nothing lost),
    /// the rest as F32.
    fn blobs_of(&self, layer: &blob_proto::LayerParameter) -> Result<Vec<TensorBytes>> {
        crate::weights::check_layer_values(self.source(), layer)?;
        layer
            .blobs()
            .iter()
            .map(|proto| {
                if proto.double_data.is_empty() {
                    tensor_bytes(&Blob::<f32>::from_proto(proto)?)
                } else {
                    tensor_bytes(&Blob::<f64>::from_proto(proto)?)
                }
            })
            .collect()
    }

    /// Writes [`CaffeModel::to_safetensors`] to `path`.
    ///
    /// ```no_run
    /// # let model = blob_runtime::CaffeModel::open("m.caffemodel")?;
    /// model.save_safetensors("m.safetensors")?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn save_safetensors(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), &self.to_safetensors()?)
    }
}

/// What a `.safetensors` file says of one tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name.
    pub name: String,
    /// Its element type as safetensors spells it (`F32`, `F64`, `I32`...).
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<usize>,
}

/// A `.safetensors` file (feature `safetensors`), its header checked on
/// opening; tensors come out as blobs with their element type, and for
/// typed blobs their shape, checked.
///
/// ```
/// use blob_runtime::{Blob, TensorFile, blob, write_tensors};
/// let w = Blob::<f32>::from_vec(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
/// let file = TensorFile::from_bytes(write_tensors([("fc.0", &w)])?)?;
/// let typed: blob!(f32; 2, 3) = file.typed("fc.0")?;
/// assert_eq!(typed.data_at([1, 2]), 6.0);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Debug)]
pub struct TensorFile {
    source: String,
    bytes: Vec<u8>,
    /// Each tensor, in the order of its data in the file: the header is
    /// parsed once, on opening (parsing it again for each tensor made a
    /// file of 4,000 tensors take over a minute).
    tensors: Vec<Tensor>,
    by_name: HashMap<String, usize>,
}

/// One tensor of the header: where its bytes lie in the file.
#[derive(Debug)]
struct Tensor {
    name: String,
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: std::ops::Range<usize>,
}

impl TensorFile {
    /// Reads and checks `path`.
    ///
    /// ```
    /// let err = blob_runtime::TensorFile::open("/no/such.safetensors").unwrap_err();
    /// assert!(err.to_string().starts_with("/no/such.safetensors: "));
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        Self::checked(path.display().to_string(), read_file(path)?)
    }

    /// Checks bytes already in memory.
    ///
    /// ```
    /// let err = blob_runtime::TensorFile::from_bytes(vec![1, 2, 3]).unwrap_err();
    /// assert!(err.to_string().starts_with("<memory>: not a valid .safetensors file"));
    /// ```
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::checked(IN_MEMORY.into(), bytes)
    }

    fn checked(source: String, bytes: Vec<u8>) -> Result<Self> {
        let parsed = SafeTensors::deserialize(&bytes).map_err(|e| BlobError::TensorFile {
            path: source.clone(),
            source: Box::new(e),
        })?;
        let start = bytes.as_ptr() as usize;
        let mut tensors: Vec<Tensor> = parsed
            .iter()
            .map(|(name, view)| {
                let at = view.data().as_ptr() as usize - start;
                Tensor {
                    name: name.to_string(),
                    dtype: view.dtype(),
                    shape: view.shape().to_vec(),
                    bytes: at..at + view.data().len(),
                }
            })
            .collect();
        // Data order; ties (empty tensors share an offset) by name.
        tensors.sort_by(|a, b| (a.bytes.start, &a.name).cmp(&(b.bytes.start, &b.name)));
        let by_name = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(Self {
            source,
            bytes,
            tensors,
            by_name,
        })
    }

    fn tensor(&self, name: &str) -> Result<&Tensor> {
        self.by_name
            .get(name)
            .map(|&i| &self.tensors[i])
            .ok_or_else(|| BlobError::TensorNotFound {
                path: self.source.clone(),
                name: name.into(),
                available: self.names().join(", "),
            })
    }

    /// The tensor names, in the order of their data in the file (the
    /// writer sorts them by element size, then name).
    ///
    /// ```
    /// # let b = blob_runtime::Blob::<f32>::new(&[1])?;
    /// let bytes = blob_runtime::write_tensors([("b", &b), ("a", &b)])?;
    /// assert_eq!(blob_runtime::TensorFile::from_bytes(bytes)?.names(), ["a", "b"]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn names(&self) -> Vec<String> {
        self.tensors.iter().map(|t| t.name.clone()).collect()
    }

    /// Each tensor's name, element type (safetensors' spelling: `F32`) and
    /// shape, in the order of [`TensorFile::names`].
    ///
    /// ```
    /// # let b = blob_runtime::Blob::<f64>::new(&[2, 3])?;
    /// let file = blob_runtime::TensorFile::from_bytes(blob_runtime::write_tensors([("w", &b)])?)?;
    /// let info = file.info();
    /// assert_eq!((info[0].name.as_str(), info[0].dtype.as_str(), info[0].shape.as_slice()), ("w", "F64", &[2, 3][..]));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn info(&self) -> Vec<TensorInfo> {
        self.tensors
            .iter()
            .map(|t| TensorInfo {
                name: t.name.clone(),
                dtype: format!("{:?}", t.dtype),
                shape: t.shape.clone(),
            })
            .collect()
    }

    /// Tensor `name` as a new blob of its shape; an error if it is missing
    /// or holds another element type than `T`.
    ///
    /// ```
    /// # let b = blob_runtime::Blob::<f32>::new(&[2])?;
    /// let file = blob_runtime::TensorFile::from_bytes(blob_runtime::write_tensors([("w", &b)])?)?;
    /// assert_eq!(file.blob::<f32>("w")?.shape(), &[2]);
    /// assert_eq!(
    ///     file.blob::<f64>("w").unwrap_err().to_string(),
    ///     "<memory>: tensor 'w' holds F32, not f64"
    /// );
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn blob<T: Element>(&self, name: &str) -> Result<Blob<T>> {
        let tensor = self.tensor(name)?;
        if tensor.dtype != dtype_of::<T>() {
            return Err(BlobError::TensorElement {
                path: self.source.clone(),
                name: name.into(),
                found: format!("{:?}", tensor.dtype),
                wanted: T::NAME,
            });
        }
        let data = &self.bytes[tensor.bytes.clone()];
        // The file's bytes need not be aligned for T: copy them into the
        // blob's values, which are.
        let blob = Blob::<T>::new(&tensor.shape)?;
        bytemuck::cast_slice_mut::<T, u8>(&mut blob.mutable_cpu_data()?).copy_from_slice(data);
        Ok(blob)
    }

    /// Tensor `name` as a typed blob of shape `S`; an error naming both
    /// shapes if the file's does not fit.
    ///
    /// ```
    /// use blob_runtime::{Blob, TensorFile, blob, write_tensors};
    /// blob_runtime::blob!(pub shape Ip2Weights = 10, 500);
    /// let w = Blob::<f32>::new(&[10, 499])?;
    /// let file = TensorFile::from_bytes(write_tensors([("ip2.0", &w)])?)?;
    /// let err = file.typed::<f32, Ip2Weights>("ip2.0").unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "<memory>: tensor 'ip2.0' has shape 10 499 (4990), but the target is Ip2Weights (10 500)"
    /// );
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn typed<T: Element, S: Shape>(&self, name: &str) -> Result<TypedBlob<T, S>> {
        let blob = self.blob::<T>(name)?;
        let found = shape_string(blob.shape());
        blob.try_into_static().map_err(|_| BlobError::TensorShape {
            path: self.source.clone(),
            name: name.into(),
            found,
            expected: S::describe(),
        })
    }

    /// Copies tensor `name` into `target`, whose shape must be the
    /// tensor's (Caffe's rule for loading weights).
    ///
    /// ```
    /// # let b = blob_runtime::Blob::<f32>::from_vec(&[2], vec![1.0, 2.0])?;
    /// let file = blob_runtime::TensorFile::from_bytes(blob_runtime::write_tensors([("b", &b)])?)?;
    /// let mut target = blob_runtime::Blob::<f32>::new(&[2])?;
    /// file.load_into("b", &mut target)?;
    /// assert_eq!(target.to_vec()?, vec![1.0, 2.0]);
    /// assert!(file.load_into("b", &mut blob_runtime::Blob::<f32>::new(&[3])?).is_err());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn load_into<T: Element>(&self, name: &str, target: &mut Blob<T>) -> Result<()> {
        let blob = self.blob::<T>(name)?;
        if blob.shape() != target.shape() {
            return Err(BlobError::TensorShape {
                path: self.source.clone(),
                name: name.into(),
                found: blob.shape_string(),
                expected: target.shape_string(),
            });
        }
        target.copy_from(&blob, false)
    }

    /// The file as a Caffe model: tensors named `layer.index` become the
    /// blobs of layer `layer`, in index order (layers in file order, type
    /// unknown, order by name), so [`CaffeModel::copy_layer_into`] and every net's
    /// weight loading read a converted model as they read the original.
    /// A name without `.index`, or a missing index, is an error.
    ///
    /// ```
    /// # let b = blob_runtime::Blob::<f32>::new(&[2])?;
    /// let bytes = blob_runtime::write_tensors([("ip.0", &b), ("ip.1", &b)])?;
    /// let model = blob_runtime::TensorFile::from_bytes(bytes)?.to_caffemodel::<f32>()?;
    /// assert_eq!(model.layer_blobs::<f32>("ip")?.len(), 2);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_caffemodel<T: MathElement>(&self) -> Result<CaffeModel> {
        let mut layers: Vec<(String, Vec<(usize, String)>)> = Vec::new();
        for name in self.names() {
            let parsed = name
                .rsplit_once('.')
                .and_then(|(layer, index)| Some((layer, index.parse::<usize>().ok()?)));
            let Some((layer, index)) = parsed else {
                return Err(self.not_caffe(&name, "is not named layer.index"));
            };
            match layers.iter_mut().find(|(l, _)| l == layer) {
                Some((_, blobs)) => blobs.push((index, name.clone())),
                None => layers.push((layer.to_string(), vec![(index, name.clone())])),
            }
        }
        let mut net = blob_proto::NetParameter::new("converted");
        for (layer, mut blobs) in layers {
            blobs.sort();
            let mut protos = Vec::new();
            for (expected, (index, name)) in blobs.iter().enumerate() {
                if *index != expected {
                    return Err(self.not_caffe(name, "leaves a gap in its layer's indices"));
                }
                protos.push(self.blob::<T>(name)?.to_proto(false)?);
            }
            net.push_layer(blob_proto::LayerParameter::new(&layer, "", protos));
        }
        Ok(CaffeModel::from_net(net))
    }

    fn not_caffe(&self, name: &str, why: &str) -> BlobError {
        BlobError::TensorFile {
            path: self.source.clone(),
            source: format!("tensor '{name}' {why}, as a Caffe model's tensors are").into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use blob_proto::{LayerParameter, NetParameter};

    use super::*;

    fn blob(shape: &[usize], values: &[f32]) -> blob_proto::BlobProto {
        Blob::from_vec(shape, values.to_vec())
            .and_then(|b| b.to_proto(false))
            .unwrap()
    }

    /// The frameworks' names, and a BatchNorm's statistics as the
    /// quotients Caffe computes from its sums.
    #[test]
    fn framework_names_give_weights_biases_and_batch_norm_statistics() {
        let mut net = NetParameter::new("n");
        net.push_layer(LayerParameter::new(
            "conv",
            "Convolution",
            vec![blob(&[2, 1, 1, 1], &[1.0, 2.0]), blob(&[2], &[0.5, -0.5])],
        ));
        net.push_layer(LayerParameter::new(
            "bn",
            "BatchNorm",
            vec![
                blob(&[2], &[4.0, 8.0]),
                blob(&[2], &[2.0, 6.0]),
                blob(&[1], &[2.0]),
            ],
        ));
        net.push_layer(LayerParameter::new(
            "odd",
            "Python",
            vec![blob(&[1], &[3.0])],
        ));
        let model = CaffeModel::from_net(net);
        let file =
            TensorFile::from_bytes(model.to_safetensors_named(TensorNames::Framework).unwrap())
                .unwrap();
        let mut names = file.names();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "bn.running_mean",
                "bn.running_var",
                "conv.bias",
                "conv.weight",
                "odd.0"
            ]
        );
        let values = |name: &str| file.blob::<f32>(name).unwrap().to_vec().unwrap();
        assert_eq!(values("bn.running_mean"), [2.0, 4.0]);
        assert_eq!(values("bn.running_var"), [1.0, 3.0]);
        assert_eq!(values("conv.weight"), [1.0, 2.0]);
        // Caffe's names keep every blob as it is.
        let caffe = TensorFile::from_bytes(model.to_safetensors().unwrap()).unwrap();
        assert_eq!(caffe.blob::<f32>("bn.2").unwrap().to_vec().unwrap(), [2.0]);
    }
}
