//! Caffe's Embed: each input index picks a learned row (a word's
//! vector), plus a learned bias; Caffe's LRCN and language models.

#[cfg(feature = "cuda")]
mod cuda;

#[cfg(feature = "cuda")]
pub(crate) use cuda::EMBED;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, indices_below, sub_param};
use crate::layer::Result;

/// Caffe `Embed`: indices in `[0, input_dim)` of any shape in, the
/// shape with `num_output` appended out; weights `(input_dim,
/// num_output)` and, with `bias_term`, a bias of `num_output`.
pub(crate) struct EmbedLayer<T: MathElement> {
    num_output: usize,
    input_dim: usize,
    bias_term: bool,
    weight_filler: ParamMessage,
    bias_filler: ParamMessage,
    blobs: Vec<Blob<T>>,
}

impl<T: MathElement> EmbedLayer<T> {
    /// Reads `embed_param`: `num_output` and `input_dim` are required.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "embed_param");
        let (num_output, input_dim) = (p.uint("num_output"), p.uint("input_dim"));
        if num_output == 0 || input_dim == 0 {
            return Err(bad_param(
                "set up Embed",
                format!(
                    "embed_param.num_output and input_dim must be positive, not {num_output} and {input_dim}"
                ),
            ));
        }
        Ok(Self {
            num_output: num_output as usize,
            input_dim: input_dim as usize,
            bias_term: p.boolean("bias_term"),
            weight_filler: sub_param(&p, "weight_filler"),
            bias_filler: sub_param(&p, "bias_filler"),
            blobs: Vec::new(),
        })
    }

    /// The GPU the layer runs on: its input's, where its output and
    /// parameters are there too.
    #[cfg(feature = "cuda")]
    fn gpu(
        &self,
        x: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<Option<std::sync::Arc<blob_kernels::cuda::Gpu>>> {
        let mut others = vec![("output", y), ("weights", &self.blobs[0])];
        if let Some(bias) = self.blobs.get(1) {
            others.push(("bias", bias));
        }
        crate::gpu::gpu_for("Embed", x, &others)
    }

    /// Each input value as a row index, checked.
    fn indices(&self, x: &Blob<T>) -> Result<Vec<usize>> {
        let dim = self.input_dim;
        indices_below("Embed", x, dim, |i, v| {
            format!("input {i} is {v}, not an index below input_dim {dim}")
        })
    }
}

impl<T: MathElement> DynLayer<T> for EmbedLayer<T> {
    fn type_name(&self) -> &str {
        "Embed"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if self.blobs.is_empty() {
            let weight = Blob::new(&[self.input_dim, self.num_output])?;
            crate::filler::fill(&weight, &self.weight_filler)?;
            self.blobs.push(weight);
            if self.bias_term {
                let bias = Blob::new(&[self.num_output])?;
                crate::filler::fill(&bias, &self.bias_filler)?;
                self.blobs.push(bias);
            }
        }
        let mut dims = bottoms[0].shape().to_vec();
        dims.push(self.num_output);
        Ok(vec![TopShape::new(dims)])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let rows = self.indices(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = self.gpu(bottoms[0], tops[0])? {
            use crate::gpu::{as_f32, read, write};
            let (count, n) = (rows.len(), self.num_output);
            let (index, w, mut y) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(&self.blobs[0]).gpu_data()?,
                as_f32(tops[0]).mutable_gpu_data()?,
            );
            let bias = match self.blobs.get(1) {
                Some(b) => Some(as_f32(b).gpu_data()?),
                None => None,
            };
            let bias = match &bias {
                Some(b) => Some(read(b, n)?),
                None => None,
            };
            let views = (
                &read(&index, count)?,
                &read(&w, self.input_dim * n)?,
                bias.as_ref(),
            );
            return cuda::forward(&gpu, (count, n), views, &mut write(&mut y, count * n)?);
        }
        let w = self.blobs[0].cpu_data()?;
        let bias = match self.blobs.get(1) {
            Some(b) => Some(b.cpu_data()?),
            None => None,
        };
        let n = self.num_output;
        let mut y = tops[0].mutable_cpu_data()?;
        for (out, &row) in y.chunks_mut(n).zip(&rows) {
            out.copy_from_slice(&w[row * n..][..n]);
            if let Some(b) = &bias {
                for (o, &bv) in out.iter_mut().zip(b.iter()) {
                    *o += bv;
                }
            }
        }
        Ok(())
    }

    /// The weights' and bias' gradients; none to the indices (Caffe
    /// refuses one).
    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if propagate_down[0] {
            return Err(bad_param(
                "Embed backward",
                "Can't backpropagate to EmbedLayer input.",
            ));
        }
        let rows = self.indices(bottoms[0])?;
        let n = self.num_output;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = self.gpu(bottoms[0], tops[0])? {
            use crate::gpu::{as_f32, read, write};
            let count = rows.len();
            let (index, dy, mut dw) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(tops[0]).gpu_diff()?,
                as_f32(&self.blobs[0]).mutable_gpu_diff()?,
            );
            let mut db = match self.blobs.get(1) {
                Some(b) => Some(as_f32(b).mutable_gpu_diff()?),
                None => None,
            };
            let mut db = match &mut db {
                Some(b) => Some(write(b, n)?),
                None => None,
            };
            let views = (&read(&index, count)?, &read(&dy, count * n)?);
            let mut dw = write(&mut dw, self.input_dim * n)?;
            return cuda::backward(&gpu, (count, n), views, &mut dw, db.as_mut());
        }
        let dy = tops[0].cpu_diff()?;
        {
            let mut dw = self.blobs[0].mutable_cpu_diff()?;
            for (g, &row) in dy.chunks(n).zip(&rows) {
                for (d, &v) in dw[row * n..][..n].iter_mut().zip(g) {
                    *d += v;
                }
            }
        }
        if let Some(bias) = self.blobs.get(1) {
            let mut db = bias.mutable_cpu_diff()?;
            for g in dy.chunks(n) {
                for (d, &v) in db.iter_mut().zip(g) {
                    *d += v;
                }
            }
        }
        Ok(())
    }

    fn blobs(&self) -> &[Blob<T>] {
        &self.blobs
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut self.blobs
    }

    fn allow_force_backward(&self, _bottom: usize) -> bool {
        false
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
