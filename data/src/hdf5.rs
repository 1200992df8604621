//! Caffe's `HDF5Data` and `HDF5Output` (`hdf5_data_layer.cpp`,
//! `hdf5_output_layer.cpp`): rows of the datasets named by the layer's
//! tops, from the HDF5 files a list names, and a net's blobs written as
//! an HDF5 file's `data` and `label`. Through the HDF5 C library
//! (`hdf5-metno`, feature `hdf5`).

use std::path::Path;

use blob_layers::{Arity, DynLayer, TopShape};
use blob_proto::ParamMessage;
use blob_runtime::{Blob, BlobError, MathElement};

use crate::order::shuffle;

/// A problem with an HDF5 file, naming it and the dataset.
fn refused(op: &'static str, detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op,
        detail: detail.into(),
    }
}

/// One file's datasets, one per top: their shapes and values.
struct Rows {
    shapes: Vec<Vec<usize>>,
    values: Vec<Vec<f64>>,
}

impl Rows {
    /// Caffe's `LoadHDF5FileData`: each top's dataset (float or integer,
    /// at least one axis), all with the same number of rows.
    fn load(path: &str, tops: &[String]) -> Result<Self, BlobError> {
        let op = "load an HDF5Data file";
        let file = hdf5_metno::File::open(path)
            .map_err(|e| refused(op, format!("Failed opening HDF5 file: {path}: {e}")))?;
        let mut shapes = Vec::new();
        let mut values = Vec::new();
        for name in tops {
            let set = file.dataset(name).map_err(|e| {
                refused(
                    op,
                    format!("{path}: Failed to find HDF5 dataset {name}: {e}"),
                )
            })?;
            let shape = set.shape();
            if shape.is_empty() {
                return Err(refused(op, format!("{path}: dataset {name} has no axis")));
            }
            let class = set
                .dtype()
                .and_then(|t| t.to_descriptor())
                .map_err(|e| refused(op, format!("{path}: dataset {name}: {e}")))?;
            use hdf5_metno::types::TypeDescriptor as D;
            if !matches!(class, D::Float(_) | D::Integer(_) | D::Unsigned(_)) {
                return Err(refused(
                    op,
                    format!(
                        "{path}: dataset {name} holds {class:?}; Caffe reads float or integer data"
                    ),
                ));
            }
            let count: usize = shape.iter().product();
            // The values are read whole: refused here if the host limit
            // cannot hold them, before the read.
            let bytes = count.checked_mul(8).ok_or_else(|| {
                refused(
                    op,
                    format!("{path}: dataset {name} of {shape:?} is too large"),
                )
            })?;
            blob_runtime::check_host_room(op, bytes)
                .map_err(|e| refused(op, format!("{path}: dataset {name} of {shape:?}: {e}")))?;
            let data: Vec<f64> = set
                .read_raw::<f64>()
                .map_err(|e| refused(op, format!("{path}: Failed to read dataset {name}: {e}")))?;
            shapes.push(shape);
            values.push(data);
        }
        let rows = shapes[0][0];
        if rows == 0 {
            return Err(refused(
                op,
                format!("{path}: dataset {} has no rows", tops[0]),
            ));
        }
        if let Some((name, s)) = tops.iter().zip(&shapes).find(|(_, s)| s[0] != rows) {
            return Err(refused(
                op,
                format!(
                    "{path}: dataset {name} has {} rows, {} has {rows}; every top's dataset needs the same",
                    s[0], tops[0]
                ),
            ));
        }
        Ok(Self { shapes, values })
    }

    fn rows(&self) -> usize {
        self.shapes[0][0]
    }
}

/// Caffe `HDF5Data`: `batch_size` rows at a time from the datasets
/// named by the layer's tops, file after file of `source`'s list, with
/// `shuffle` the files' and rows' order drawn anew each round.
pub struct Hdf5DataLayer {
    files: Vec<String>,
    tops: Vec<String>,
    batch: usize,
    shuffle: bool,
    file_order: Vec<usize>,
    current_file: usize,
    rows: Rows,
    row_order: Vec<usize>,
    current_row: usize,
}

impl Hdf5DataLayer {
    /// Caffe's `LayerSetUp`: the list of files read, the first loaded.
    ///
    /// ```no_run
    /// let text = "name: 'd' type: 'HDF5Data' top: 'data' top: 'label'
    ///             hdf5_data_param { source: 'train.txt' batch_size: 10 }";
    /// let param = blob_proto::ParamMessage::from_text(
    ///     &blob_proto::schema::LAYER_PARAMETER,
    ///     &blob_proto::TextMessage::parse(text)?,
    /// )?;
    /// let layer = blob_data::Hdf5DataLayer::from_param(&param)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_param(layer: &ParamMessage) -> Result<Self, BlobError> {
        let op = "set up HDF5Data";
        if layer.has("transform_param") {
            return Err(refused(
                op,
                "HDF5Data does not transform data (no transform_param)",
            ));
        }
        let p = layer
            .message("hdf5_data_param")
            .cloned()
            .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::HDF5_DATA));
        let source = p.string("source");
        let list = blob_runtime::read_text_file(source)
            .map_err(|e| refused(op, format!("Failed to open source file: {e}")))?;
        let files: Vec<String> = list.split_whitespace().map(String::from).collect();
        if files.is_empty() {
            return Err(refused(
                op,
                format!("Must have at least 1 HDF5 filename listed in {source}"),
            ));
        }
        let tops: Vec<String> = layer.strings("top").map(String::from).collect();
        if tops.is_empty() {
            return Err(refused(op, "HDF5Data needs a top per dataset it reads"));
        }
        let batch = p.uint("batch_size") as usize;
        if batch == 0 {
            return Err(refused(op, "hdf5_data_param.batch_size must be positive"));
        }
        let shuffled = p.boolean("shuffle");
        let mut file_order: Vec<usize> = (0..files.len()).collect();
        if shuffled {
            shuffle(&mut file_order);
        }
        let rows = Rows::load(&files[file_order[0]], &tops)?;
        let mut layer = Self {
            files,
            tops,
            batch,
            shuffle: shuffled,
            file_order,
            current_file: 0,
            row_order: Vec::new(),
            rows,
            current_row: 0,
        };
        layer.order_rows();
        Ok(layer)
    }

    fn order_rows(&mut self) {
        self.row_order = (0..self.rows.rows()).collect();
        if self.shuffle {
            shuffle(&mut self.row_order);
        }
    }

    /// Past the last row: the next file (or the first again, reshuffled).
    fn next_file(&mut self) -> Result<(), BlobError> {
        if self.files.len() > 1 {
            self.current_file += 1;
            if self.current_file == self.files.len() {
                self.current_file = 0;
                if self.shuffle {
                    shuffle(&mut self.file_order);
                }
            }
            let path = &self.files[self.file_order[self.current_file]];
            let rows = Rows::load(path, &self.tops)?;
            if rows
                .shapes
                .iter()
                .zip(&self.rows.shapes)
                .any(|(a, b)| a[1..] != b[1..])
            {
                return Err(refused(
                    "run HDF5Data",
                    format!("{path}: its rows are not the shape of the first file's"),
                ));
            }
            self.rows = rows;
        }
        self.current_row = 0;
        self.order_rows();
        Ok(())
    }
}

impl<T: MathElement> DynLayer<T> for Hdf5DataLayer {
    fn type_name(&self) -> &str {
        "HDF5Data"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(0)
    }

    fn tops(&self) -> Arity {
        Arity::at_least(1)
    }

    fn reshape(
        &mut self,
        _bottoms: &[&Blob<T>],
        _tops: &[&Blob<T>],
    ) -> Result<Vec<TopShape>, BlobError> {
        Ok(self
            .rows
            .shapes
            .iter()
            .map(|s| {
                let mut dims = s.clone();
                dims[0] = self.batch;
                TopShape::new(dims)
            })
            .collect())
    }

    fn forward(&mut self, _bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<(), BlobError> {
        let mut outs = tops
            .iter()
            .map(|t| t.mutable_cpu_data())
            .collect::<Result<Vec<_>, _>>()?;
        for i in 0..self.batch {
            if self.current_row == self.rows.rows() {
                self.next_file()?;
            }
            let row = self.row_order[self.current_row];
            for (out, values) in outs.iter_mut().zip(&self.rows.values) {
                let width = out.len() / self.batch;
                let src = values.get(row * width..(row + 1) * width).ok_or_else(|| {
                    refused(
                        "run HDF5Data",
                        "a file's rows are not the shape of the first file's",
                    )
                })?;
                for (o, &v) in out[i * width..(i + 1) * width].iter_mut().zip(src) {
                    *o = T::from_f64(v);
                }
            }
            self.current_row += 1;
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
}

/// Caffe `HDF5Output`: each forward pass writes its two bottoms as the
/// datasets `data` and `label` (4-D, as Caffe's) of `file_name`, the file
/// whole or absent (written aside, then renamed over the last one).
pub struct Hdf5OutputLayer {
    file: String,
}

impl Hdf5OutputLayer {
    /// Reads `hdf5_output_param.file_name`.
    pub fn from_param(layer: &ParamMessage) -> Result<Self, BlobError> {
        let file = layer
            .message("hdf5_output_param")
            .map(|p| p.string("file_name").to_string())
            .unwrap_or_default();
        if file.is_empty() {
            return Err(refused(
                "set up HDF5Output",
                "hdf5_output_param.file_name is required",
            ));
        }
        Ok(Self { file })
    }

    fn write<T: MathElement>(&self, data: &Blob<T>, label: &Blob<T>) -> Result<(), BlobError> {
        let op = "write an HDF5Output file";
        let target = Path::new(&self.file);
        let aside = target.with_file_name(format!(
            ".{}.partial-{}",
            target
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            std::process::id()
        ));
        let written = (|| -> hdf5_metno::Result<()> {
            let file = hdf5_metno::File::create(&aside)?;
            for (name, blob) in [("data", data), ("label", label)] {
                // Caffe's (num, channels, height, width).
                let s = blob.shape();
                let dim = |i: usize| s.get(i).copied().unwrap_or(1);
                let shape = [dim(0), dim(1), dim(2), dim(3)];
                let values: Vec<f32> = blob
                    .to_vec()
                    .map_err(|e| hdf5_metno::Error::from(e.to_string().as_str()))?
                    .iter()
                    .map(|v| v.to_f64() as f32)
                    .collect();
                file.new_dataset::<f32>()
                    .shape(shape)
                    .create(name)?
                    .write_raw(&values)?;
            }
            file.close()
        })();
        let done = written
            .map_err(|e| refused(op, format!("{}: {e}", self.file)))
            .and_then(|()| {
                std::fs::rename(&aside, target)
                    .map_err(|e| refused(op, format!("{}: {e}", self.file)))
            });
        if done.is_err() {
            let _ = std::fs::remove_file(&aside);
        }
        done
    }
}

impl<T: MathElement> DynLayer<T> for Hdf5OutputLayer {
    fn type_name(&self) -> &str {
        "HDF5Output"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn tops(&self) -> Arity {
        Arity::exactly(0)
    }

    fn reshape(
        &mut self,
        bottoms: &[&Blob<T>],
        _tops: &[&Blob<T>],
    ) -> Result<Vec<TopShape>, BlobError> {
        let (a, b) = (bottoms[0].shape(), bottoms[1].shape());
        if a.first() != b.first() || a.len() > 4 || b.len() > 4 {
            return Err(refused(
                "set up HDF5Output",
                format!(
                    "data {} and label {} must have the same number of rows and at most 4 axes",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string()
                ),
            ));
        }
        Ok(Vec::new())
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<(), BlobError> {
        self.write(bottoms[0], bottoms[1])
    }

    fn backward(
        &mut self,
        _tops: &[&Blob<T>],
        _down: &[bool],
        _bottoms: &[&Blob<T>],
    ) -> Result<(), BlobError> {
        Ok(())
    }

    fn allow_force_backward(&self, _bottom: usize) -> bool {
        false
    }
}
