//! Caffe's Input layer, and the data layers, which a net built here
//! treats as inputs its caller fills.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

/// Caffe `Input`: tops the caller fills, shaped by `input_param.shape`
/// (one shape for all tops, one per top, or none: empty until the caller
/// reshapes them). A data layer (`Data`, `ImageData`, `HDF5Data`,
/// `MemoryData`, ...) becomes the same: its tops are inputs, and
/// [`Net::inputs`](crate::net::Net::inputs) names them.
pub(crate) struct InputLayer {
    type_name: String,
    shapes: Vec<Vec<usize>>,
}

impl InputLayer {
    /// Reads `input_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let tops = layer.strings("top").count();
        let p = sub_param(layer, "input_param");
        let mut shapes = Vec::new();
        for shape in p.messages("shape") {
            let dims = shape
                .ints("dim")
                .into_iter()
                .map(|d| {
                    usize::try_from(d).map_err(|_| {
                        bad_param("set up Input", format!("input dim {d} is negative"))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            shapes.push(dims);
        }
        if !(shapes.is_empty() || shapes.len() == 1 || shapes.len() == tops) {
            return Err(bad_param(
                "set up Input",
                format!(
                    "Must specify 'shape' once, once per top blob, or not at all: {} shapes for {tops} tops",
                    shapes.len()
                ),
            ));
        }
        Ok(Self {
            type_name: "Input".into(),
            shapes,
        })
    }

    /// A data layer (`Data`, `MemoryData`, ...) whose tops the caller
    /// fills; `MemoryData`'s declared batch, channels, height and width
    /// shape its first top.
    pub(crate) fn data_layer(layer: &ParamMessage) -> Result<Self> {
        let kind = layer.string("type").to_string();
        let mut shapes = Vec::new();
        if kind == "MemoryData" {
            let p = sub_param(layer, "memory_data_param");
            let dims = ["batch_size", "channels", "height", "width"].map(|d| p.uint(d) as usize);
            shapes.push(dims.to_vec());
            shapes.push(vec![dims[0]]);
        }
        Ok(Self {
            type_name: kind,
            shapes,
        })
    }
}

impl<T: MathElement> DynLayer<T> for InputLayer {
    fn type_name(&self) -> &str {
        &self.type_name
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(0)
    }

    fn tops(&self) -> Arity {
        Arity::at_least(1)
    }

    fn is_input(&self) -> bool {
        true
    }

    /// A top keeps the shape the caller gave it; one never shaped takes
    /// the declared shape. A data layer's top with neither is an error:
    /// only the caller knows what it will hold.
    fn reshape(&mut self, _bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        tops.iter()
            .enumerate()
            .map(|(i, top)| {
                let unshaped = top.num_axes() == 0 && top.count() == 0;
                let declared = match self.shapes.len() {
                    0 => None,
                    1 => self.shapes.first(),
                    _ => self.shapes.get(i),
                };
                match declared {
                    Some(dims) if unshaped => Ok(TopShape::new(dims.clone())),
                    None if unshaped && self.type_name != "Input" => Err(bad_param(
                        "set up a data layer",
                        format!(
                            "its top {i} is filled by the caller, who must give its shape (NetBuilder::input_shape) before the net is built"
                        ),
                    )),
                    _ => Ok(TopShape::new(top.shape().to_vec())),
                }
            })
            .collect()
    }

    fn forward(&mut self, _bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<()> {
        Ok(())
    }

    fn backward(
        &mut self,
        _tops: &[&Blob<T>],
        _down: &[bool],
        _bottoms: &[&Blob<T>],
    ) -> Result<()> {
        Ok(())
    }
}
