//! Caffe's InnerProduct as a run-time layer: `inner_product_param` read
//! when the net is built, the input flattened from `axis` on.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::InnerProductEngine;
use crate::dyn_layer::{DynLayer, TopShape, axis_of, bad_param, sub_param};
use crate::layer::Result;

const OP: &str = "set up InnerProduct";

/// Caffe `InnerProduct` (with bias): the input's axes before `axis` are
/// the batch `M`, the rest are flattened to `K`; weights `(N, K)` (`(K,
/// N)` with `transpose`), bias `(N)`, output `(dims before axis..., N)`.
pub(crate) struct InnerProductLayer<T: MathElement> {
    num_output: usize,
    transpose: bool,
    axis: i64,
    weight_filler: ParamMessage,
    bias_filler: ParamMessage,
    blobs: Vec<Blob<T>>,
    engine: InnerProductEngine<T>,
}

impl<T: MathElement> InnerProductLayer<T> {
    /// Reads the layer's `inner_product_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "inner_product_param");
        let num_output = p.uint("num_output") as usize;
        if num_output == 0 {
            return Err(bad_param(OP, "num_output must be set and positive"));
        }
        if !p.boolean("bias_term") {
            return Err(bad_param(OP, "bias_term: false is not supported yet"));
        }
        Ok(Self {
            num_output,
            transpose: p.boolean("transpose"),
            axis: p.int("axis"),
            weight_filler: sub_param(&p, "weight_filler"),
            bias_filler: sub_param(&p, "bias_filler"),
            blobs: Vec::new(),
            engine: InnerProductEngine::default(),
        })
    }

    /// `(M, K, N)` and the output's dims for an input.
    fn dims(&self, x: &Blob<T>) -> Result<((usize, usize, usize), Vec<usize>)> {
        let axis = axis_of(x, self.axis, "inner product")?;
        let m: usize = x.shape()[..axis].iter().product();
        let k: usize = x.shape()[axis..].iter().product();
        let k_axis = usize::from(!self.transpose);
        if let Some(w) = self.blobs.first()
            && w.shape()[k_axis] != k
        {
            return Err(bad_param(
                "inner product",
                format!(
                    "Input size incompatible with inner product parameters: the input {} has {k} values per item from axis {axis}, the weights {} take {}",
                    x.shape_string(),
                    w.shape_string(),
                    w.shape()[k_axis]
                ),
            ));
        }
        let mut out = x.shape()[..axis].to_vec();
        out.push(self.num_output);
        Ok(((m, k, self.num_output), out))
    }
}

impl<T: MathElement> DynLayer<T> for InnerProductLayer<T> {
    fn type_name(&self) -> &str {
        "InnerProduct"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let ((_, k, n), out) = self.dims(bottoms[0])?;
        if self.blobs.is_empty() {
            let weight = Blob::new(&if self.transpose { [k, n] } else { [n, k] })?;
            crate::filler::fill(&weight, &self.weight_filler)?;
            let bias = Blob::new(&[n])?;
            crate::filler::fill(&bias, &self.bias_filler)?;
            self.blobs = vec![weight, bias];
        }
        Ok(vec![TopShape::new(out)])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (mkn, _) = self.dims(bottoms[0])?;
        let (w, b) = (&self.blobs[0], &self.blobs[1]);
        self.engine
            .forward(mkn, self.transpose, bottoms[0], w, b, tops[0])
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        let (mkn, _) = self.dims(bottoms[0])?;
        let (w, b) = (&self.blobs[0], &self.blobs[1]);
        self.engine.backward(
            mkn,
            self.transpose,
            bottoms[0],
            w,
            b,
            tops[0],
            propagate_down[0],
        )
    }

    fn blobs(&self) -> &[Blob<T>] {
        &self.blobs
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut self.blobs
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
