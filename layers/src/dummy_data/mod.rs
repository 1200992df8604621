//! Caffe's DummyData: tops of declared shapes that fill themselves
//! (constant, uniform, gaussian, ... fillers), for testing nets without
//! data.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

const OP: &str = "set up DummyData";

/// Caffe `DummyData`.
pub(crate) struct DummyDataLayer {
    shapes: Vec<Vec<usize>>,
    fillers: Vec<ParamMessage>,
}

/// One value per top from a list of 0 (`default`), 1 or `tops` entries.
fn per_top<X: Clone>(list: Vec<X>, tops: usize, what: &str, default: X) -> Result<Vec<X>> {
    match list.len() {
        0 => Ok(vec![default; tops]),
        1 => Ok(vec![list[0].clone(); tops]),
        n if n == tops => Ok(list),
        n => Err(bad_param(
            OP,
            format!("{n} {what} for {tops} tops: give one, or one per top"),
        )),
    }
}

impl DummyDataLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let tops = layer.strings("top").count();
        let p = sub_param(layer, "dummy_data_param");
        let given: Vec<Vec<i64>> = p.messages("shape").map(|s| s.ints("dim")).collect();
        let legacy = ["num", "channels", "height", "width"].map(|f| p.uints(f));
        let shapes: Vec<Vec<usize>> = if !given.is_empty() {
            if legacy.iter().any(|l| !l.is_empty()) {
                return Err(bad_param(
                    OP,
                    "give shape, or num/channels/height/width; not both",
                ));
            }
            per_top(given, tops, "shapes", Vec::new())?
                .into_iter()
                .map(|dims| {
                    dims.into_iter()
                        .map(|d| {
                            usize::try_from(d)
                                .map_err(|_| bad_param(OP, format!("dim {d} is negative")))
                        })
                        .collect()
                })
                .collect::<Result<_>>()?
        } else {
            let [n, c, h, w] = legacy.map(|l| per_top(l, tops, "legacy dims", 1));
            let (n, c, h, w) = (n?, c?, h?, w?);
            (0..tops)
                .map(|i| [n[i], c[i], h[i], w[i]].map(|d| d as usize).to_vec())
                .collect()
        };
        let fillers = per_top(
            p.messages("data_filler").cloned().collect(),
            tops,
            "data_fillers",
            ParamMessage::new(&blob_proto::schema::FILLER),
        )?;
        Ok(Self { shapes, fillers })
    }
}

impl<T: MathElement> DynLayer<T> for DummyDataLayer {
    fn type_name(&self) -> &str {
        "DummyData"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(0)
    }

    fn tops(&self) -> Arity {
        Arity::at_least(1)
    }

    fn reshape(&mut self, _bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        Ok(tops
            .iter()
            .zip(&self.shapes)
            .map(|(_, dims)| TopShape::new(dims.clone()))
            .collect())
    }

    /// Each top drawn from its filler again (Caffe refills all but
    /// constant fillers; a constant refill gives the same values).
    fn forward(&mut self, _bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        for (top, filler) in tops.iter().zip(&self.fillers) {
            crate::filler::fill(top, filler)?;
        }
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
