//! blobflow for Python: pycaffe's `Net` and `Blob`, with the blobs'
//! memory shared through DLPack instead of copied through NumPy.
//!
//! ```python
//! import numpy as np, blobflow
//! net = blobflow.Net("lenet.prototxt", "lenet_iter_10000.caffemodel")
//! out = net.forward(data=np.zeros((64, 1, 28, 28), np.float32))
//! prob = np.from_dlpack(out["prob"])   # the net's own memory, no copy
//! ```
//!
//! With the `cuda` feature, `Net(..., device="cuda")` runs the net on a
//! GPU; its blobs are read back to the host when they are lent.
//!
//! A blob lent to NumPy (or PyTorch, JAX, CuPy) stays borrowed until the
//! array that holds it is gone; blobflow touching it meanwhile raises
//! `BufferError`, never races with the array.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

use blob_layers::net::{Net, NetState};
use blob_runtime::dlpark::ffi::{DLDevice, DLManagedTensor, DLManagedTensorVersioned};
use blob_runtime::dlpark::python::{
    DlpackExporter, ExportRequest, ImportedDlpack, export_dlpack, from_dlpack,
};
use blob_runtime::dlpark::{DlpackFlags, Managed};
use blob_runtime::{Blob, BlobError, CaffeModel, DlpackAccess};
use pyo3::exceptions::{PyBufferError, PyKeyError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

pyo3::create_exception!(
    blobflow,
    BlobflowError,
    PyRuntimeError,
    "What blobflow refused: a file, a layer, a shape, with the reason."
);

/// `BufferError` where the cause, however deep (a layer's pass), is memory
/// lent to an array still alive, as Python's buffer protocol says it;
/// `BlobflowError` otherwise.
fn to_py(err: BlobError) -> PyErr {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(at) = cause {
        // A wrapped cause is a `Box<BlobError>` to `downcast_ref`.
        let blob_error = at
            .downcast_ref::<BlobError>()
            .or_else(|| at.downcast_ref::<Box<BlobError>>().map(|b| &**b));
        if let Some(BlobError::Borrowed { .. }) = blob_error {
            return PyBufferError::new_err(err.to_string());
        }
        cause = at.source();
    }
    BlobflowError::new_err(err.to_string())
}

/// Caffe's `Blob` of float32, as pycaffe's `net.blobs[name]`: NumPy and
/// the other DLPack consumers see its data with `np.from_dlpack(blob)`.
#[pyclass(name = "Blob", module = "blobflow")]
struct PyBlob {
    blob: Blob<f32>,
}

impl PyBlob {
    /// A Python handle on `blob`'s data memory (shared, not copied).
    fn sharing(blob: &Blob<f32>) -> PyResult<Self> {
        let mut view = Blob::new(blob.shape()).map_err(to_py)?;
        view.share_data(blob).map_err(to_py)?;
        Ok(Self { blob: view })
    }
}

fn import(object: &Bound<'_, PyAny>) -> PyResult<ImportedDlpack> {
    from_dlpack(object.as_borrowed(), None, None)
}

#[pymethods]
impl PyBlob {
    /// `Blob(shape)`: zeros of float32 (Caffe `Blob(shape)`).
    #[new]
    fn new(shape: Vec<usize>) -> PyResult<Self> {
        Ok(Self {
            blob: Blob::new(&shape).map_err(to_py)?,
        })
    }

    /// A blob whose data is `array`'s memory (any DLPack producer: a NumPy
    /// array, a torch tensor on the CPU), without a copy.
    #[staticmethod]
    fn from_dlpack(array: &Bound<'_, PyAny>) -> PyResult<Self> {
        let blob = match import(array)? {
            ImportedDlpack::Legacy(tensor) => Blob::from_dlpack(tensor),
            ImportedDlpack::Versioned(tensor) => Blob::from_dlpack(tensor),
        };
        Ok(Self {
            blob: blob.map_err(to_py)?,
        })
    }

    /// Copies `array`'s values in, taking its shape (pycaffe's
    /// `blob.data[...] = array`, reshaping as `blob.reshape` would).
    fn copy_from(&mut self, array: &Bound<'_, PyAny>) -> PyResult<()> {
        copy_into(&mut self.blob, array)
    }

    /// The shape, as a tuple-like list (Caffe `shape()`).
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.blob.shape().to_vec()
    }

    /// The element count (Caffe `count()`).
    #[getter]
    fn count(&self) -> usize {
        self.blob.count()
    }

    /// The address of the first element of the host data: the same
    /// number NumPy's `array.ctypes.data` gives for an array over it.
    fn data_ptr(&self) -> PyResult<usize> {
        let data = self.blob.cpu_data().map_err(to_py)?;
        Ok(data.as_ptr() as usize)
    }

    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let request = ExportRequest::parse(stream.as_ref(), max_version, dl_device, copy)?;
        export_dlpack(self, py, request)
    }

    fn __dlpack_device__(&self) -> (u32, i32) {
        DLDevice::CPU.into()
    }

    fn __repr__(&self) -> String {
        format!("Blob(shape={:?})", self.blob.shape())
    }
}

impl DlpackExporter for PyBlob {
    fn device(&self) -> DLDevice {
        DLDevice::CPU
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, _py: Python<'_>, _request: &ExportRequest<'_>) -> PyResult<()> {
        Ok(())
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.blob
            .to_dlpack_as(DlpackAccess::ReadWrite)
            .map_err(to_py)
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.blob
            .to_dlpack_as(DlpackAccess::ReadWrite)
            .map_err(to_py)
    }
}

fn copy_into(blob: &mut Blob<f32>, array: &Bound<'_, PyAny>) -> PyResult<()> {
    match import(array)? {
        ImportedDlpack::Legacy(tensor) => blob.copy_from_dlpack(tensor),
        ImportedDlpack::Versioned(tensor) => blob.copy_from_dlpack(tensor),
    }
    .map_err(to_py)
}

/// Caffe's `Net` of float32, as pycaffe's `caffe.Net(model, weights,
/// caffe.TEST)`: `blobs`, `params`, `inputs`, `outputs`, `forward`.
#[pyclass(name = "Net", module = "blobflow")]
struct PyNet {
    /// A net's layers may be used from one thread at a time (they are
    /// `Send`, not `Sync`); Python threads take turns here, and a forward
    /// pass runs with the GIL released.
    net: Mutex<Net<f32>>,
    /// Where it runs: `cpu`, or `cuda:N` and the GPU's name.
    device: String,
}

/// Moves `net` to the device `device` names (`cpu`, `cuda` or `cuda:N`)
/// and says which it is.
fn place(net: &mut Net<f32>, device: &str) -> PyResult<String> {
    let ordinal: usize = match device {
        "cpu" => return Ok("cpu".to_owned()),
        "cuda" => 0,
        other => other
            .strip_prefix("cuda:")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "device '{other}': a device is \"cpu\", \"cuda\" or \"cuda:N\""
                ))
            })?,
    };
    #[cfg(feature = "cuda")]
    {
        let gpu = blob_runtime::cuda::CudaBackend::new(ordinal).map_err(to_py)?;
        let name = format!("cuda:{ordinal} ({})", gpu.gpu().name());
        net.to_device(gpu).map_err(to_py)?;
        Ok(name)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (net, ordinal);
        Err(PyRuntimeError::new_err(
            "this blobflow module was built without CUDA: build it with the `cuda` feature \
             (maturin build --features cuda) to run a net on a GPU",
        ))
    }
}

impl PyNet {
    fn net(&self) -> MutexGuard<'_, Net<f32>> {
        // A pass that panicked left the net as its layers left it, which
        // the next pass reshapes and overwrites.
        self.net.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl PyNet {
    /// `Net(model, weights=None, phase="test", device="cpu")`: the
    /// `.prototxt` built with the built-in layers, its weights copied from
    /// the `.caffemodel` by layer name (Caffe `CopyTrainedLayersFrom`),
    /// on the CPU or (`"cuda"`, `"cuda:N"`; the `cuda` feature) a GPU
    /// (pycaffe's `caffe.set_mode_gpu()`).
    #[new]
    #[pyo3(signature = (model, weights=None, phase="test", device="cpu"))]
    fn new(model: &str, weights: Option<&str>, phase: &str, device: &str) -> PyResult<Self> {
        let state = match phase.to_ascii_lowercase().as_str() {
            "test" => NetState::test(),
            "train" => NetState::train(),
            other => {
                return Err(PyValueError::new_err(format!(
                    "phase '{other}': a net's phase is \"test\" or \"train\""
                )));
            }
        };
        let mut net = Net::from_file(model, state).map_err(to_py)?;
        if let Some(weights) = weights {
            let model = CaffeModel::open(weights).map_err(to_py)?;
            net.copy_from(&model).map_err(to_py)?;
        }
        let device = place(&mut net, device)?;
        Ok(Self {
            net: Mutex::new(net),
            device,
        })
    }

    /// Where the net runs: `"cpu"`, or `"cuda:N (its name)"`.
    #[getter]
    fn device(&self) -> String {
        self.device.clone()
    }

    /// The net's name (Caffe `name()`).
    #[getter]
    fn name(&self) -> String {
        self.net().name().to_owned()
    }

    /// The input blobs' names (Caffe `input_blob_names`).
    #[getter]
    fn inputs(&self) -> Vec<String> {
        self.net().inputs().into_iter().map(str::to_owned).collect()
    }

    /// The output blobs' names (Caffe `output_blob_names`).
    #[getter]
    fn outputs(&self) -> Vec<String> {
        self.net()
            .outputs()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// Every blob by name, sharing the net's memory (pycaffe's
    /// `net.blobs`). A forward pass at another input shape may give the
    /// net new memory: ask again after it.
    #[getter]
    fn blobs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let blobs = PyDict::new(py);
        let net = self.net();
        for name in net.blob_names() {
            let blob = net.blob(name).expect("a name the net listed");
            blobs.set_item(name, PyBlob::sharing(blob)?)?;
        }
        Ok(blobs)
    }

    /// Each layer's learnable blobs by layer name, sharing the net's
    /// memory (pycaffe's `net.params`): writing them changes the net.
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let params = PyDict::new(py);
        let net = self.net();
        for layer in net.layer_names() {
            let blobs = net.layer_blobs(layer).unwrap_or_default();
            if blobs.is_empty() {
                continue;
            }
            let shared = blobs
                .iter()
                .map(PyBlob::sharing)
                .collect::<PyResult<Vec<_>>>()?;
            params.set_item(layer, shared)?;
        }
        Ok(params)
    }

    /// Runs the net (Caffe `Forward`), first copying each keyword's array
    /// (any DLPack producer) into the input blob of that name, reshaping
    /// the net where its shape changed (pycaffe's `forward(data=...)`).
    /// Returns the outputs by name, sharing the net's memory.
    #[pyo3(signature = (**inputs))]
    fn forward<'py>(
        &self,
        py: Python<'py>,
        inputs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let names: HashSet<String> = self.inputs().into_iter().collect();
        let mut reshaped = false;
        for (key, array) in inputs.into_iter().flatten() {
            let name: String = key.extract()?;
            let mut net = self.net();
            if !names.contains(&name) {
                let mut known: Vec<_> = names.iter().map(String::as_str).collect();
                known.sort_unstable();
                return Err(PyKeyError::new_err(format!(
                    "'{name}' is not an input of net '{}'; its inputs are: {}",
                    net.name(),
                    known.join(", ")
                )));
            }
            let blob = net.blob_mut(&name).expect("an input the net listed");
            let before = blob.shape().to_vec();
            copy_into(blob, &array)?;
            reshaped |= blob.shape() != before;
        }
        py.detach(|| {
            let mut net = self.net();
            if reshaped {
                net.reshape()?;
            }
            net.forward().map(drop)
        })
        .map_err(to_py)?;
        let outputs = PyDict::new(py);
        let net = self.net();
        for name in net.outputs() {
            let blob = net.blob(name).expect("an output the net listed");
            outputs.set_item(name, PyBlob::sharing(blob)?)?;
        }
        Ok(outputs)
    }

    fn __repr__(&self) -> String {
        let net = self.net();
        format!(
            "Net(name={:?}, inputs={:?}, outputs={:?})",
            net.name(),
            net.inputs(),
            net.outputs()
        )
    }
}

/// A blob over `array`'s memory, without a copy (the array API's
/// `from_dlpack`).
#[pyfunction(name = "from_dlpack")]
fn blob_from_dlpack(array: &Bound<'_, PyAny>) -> PyResult<PyBlob> {
    PyBlob::from_dlpack(array)
}

#[pymodule]
#[pyo3(name = "blobflow")]
fn blobflow_module(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyBlob>()?;
    module.add_class::<PyNet>()?;
    module.add_function(wrap_pyfunction!(blob_from_dlpack, module)?)?;
    module.add("BlobflowError", module.py().get_type::<BlobflowError>())?;
    // Whether `Net(..., device="cuda")` can be asked for (the `cuda` feature).
    module.add("CUDA", cfg!(feature = "cuda"))?;
    Ok(())
}
