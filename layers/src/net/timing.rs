//! Caffe's `caffe time` on a built net: each layer's forward and backward
//! milliseconds, and the multiply-adds a pass costs, for a net from a
//! prototxt or a typed declaration alike.

use std::time::Instant;

use blob_runtime::{BlobError, MathElement};

use super::Net;

/// One layer's average times over a [`Net::time`] run.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerTime {
    /// The layer's name.
    pub name: String,
    /// Its Caffe type.
    pub kind: String,
    /// Milliseconds of its forward pass.
    pub forward_ms: f64,
    /// Milliseconds of its backward pass (0 where it has none to run).
    pub backward_ms: f64,
    /// The layer whose forward pass applies this one (an in-place ReLU
    /// folded into the Convolution before it; for a Concat whose
    /// bottoms' layers write its top, those layers, comma-separated):
    /// its forward time is counted there, and this one's is 0.
    pub folded_into: Option<String>,
}

/// What [`Net::time`] measured: per layer, and the whole
/// forward-backward pass, averaged over `iterations`.
#[derive(Clone, Debug, PartialEq)]
pub struct NetTiming {
    /// Every layer, in the net's order.
    pub layers: Vec<LayerTime>,
    /// Passes averaged.
    pub iterations: usize,
    /// Milliseconds of one forward-backward pass, end to end (Caffe's
    /// "Average Forward-Backward").
    pub forward_backward_ms: f64,
}

impl NetTiming {
    /// Caffe's "Average Forward pass": the layers' forward times summed.
    pub fn forward_ms(&self) -> f64 {
        self.layers.iter().map(|l| l.forward_ms).sum()
    }

    /// Caffe's "Average Backward pass".
    pub fn backward_ms(&self) -> f64 {
        self.layers.iter().map(|l| l.backward_ms).sum()
    }
}

impl<T: MathElement> Net<T> {
    /// Caffe's `caffe time`: one warm-up pass, then `iterations` passes
    /// timing each layer's forward (in order) and backward (in reverse
    /// order), on whatever the inputs hold. The times are the net's alone.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let mut net = Net::<f32>::from_prototxt(
    ///     r#"input: "x" input_shape { dim: 8 dim: 16 }
    ///        layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" inner_product_param { num_output: 4 } }
    ///        layer { name: "relu" type: "ReLU" bottom: "ip" top: "ip" }"#,
    ///     NetState::test(),
    /// )?;
    /// let timing = net.time(3)?;
    /// let layers: Vec<_> = timing.layers.iter().map(|l| (l.name.as_str(), l.kind.as_str())).collect();
    /// assert_eq!(layers, [("input", "Input"), ("ip", "InnerProduct"), ("relu", "ReLU")]);
    /// assert!(timing.forward_ms() > 0.0 && timing.forward_backward_ms > 0.0);
    /// assert_eq!(net.multiply_adds("ip"), Some(8 * 4 * 16));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn time(&mut self, iterations: usize) -> Result<NetTiming, BlobError> {
        self.time_with(iterations, || Ok::<(), BlobError>(()))
    }

    /// [`time`](Self::time), calling `wait` after each layer's pass: on a
    /// GPU, the device's synchronize, so each layer's time is its own.
    pub fn time_with<E: From<BlobError>>(
        &mut self,
        iterations: usize,
        mut wait: impl FnMut() -> Result<(), E>,
    ) -> Result<NetTiming, E> {
        let n = self.layers.len();
        if n == 0 || iterations == 0 {
            return Err(BlobError::Net {
                at: format!("net '{}'", blob_proto::excerpt(&self.name)),
                detail: format!("nothing to time: {n} layers, {iterations} iterations"),
            }
            .into());
        }
        self.forward()?;
        self.backward()?;
        wait()?;
        let mut forward = vec![0f64; n];
        let mut backward = vec![0f64; n];
        let started = Instant::now();
        for _ in 0..iterations {
            let mut i = 0;
            while i < n {
                // A layer and those folded into it run as one pass.
                let last = (i + self.folds_after(i)).min(n - 1);
                let t = Instant::now();
                self.forward_from_to(i, last)?;
                wait()?;
                forward[i] += t.elapsed().as_secs_f64();
                i = last + 1;
            }
            for (i, b) in backward.iter_mut().enumerate().rev() {
                let t = Instant::now();
                self.backward_from_to(i, i)?;
                wait()?;
                *b += t.elapsed().as_secs_f64();
            }
        }
        let per = |s: f64| s * 1e3 / iterations as f64;
        let layers = self
            .layers
            .iter()
            .zip(forward.iter().zip(&backward))
            .enumerate()
            .map(|(at, (layer, (&f, &b)))| LayerTime {
                name: layer.name.clone(),
                kind: layer.layer.type_name().to_string(),
                forward_ms: per(f),
                backward_ms: per(b),
                folded_into: self.folded_into(at),
            })
            .collect();
        Ok(NetTiming {
            layers,
            iterations,
            forward_backward_ms: per(started.elapsed().as_secs_f64()),
        })
    }

    /// The multiply-adds of one forward pass of a Convolution,
    /// Deconvolution or InnerProduct layer at the blobs' current shapes
    /// (`None` for other layers): each output value of a convolution or
    /// inner product takes `weights / outputs` of them, each input value
    /// of a deconvolution `weights / inputs`.
    pub fn multiply_adds(&self, layer: &str) -> Option<u64> {
        let weights = self.layer_blobs(layer)?.first()?;
        let (first_axis, count) = (*weights.shape().first()?, weights.count());
        let blob = |names: Option<Vec<&str>>| self.blob(names?.first()?);
        let per = |n: usize| (n > 0).then(|| (count / n) as u64);
        match self.layer_type(layer)? {
            "Convolution" => {
                let top = blob(self.layer_tops(layer))?;
                Some(top.count() as u64 * per(first_axis)?)
            }
            "InnerProduct" => {
                let top = blob(self.layer_tops(layer))?;
                Some(top.count() as u64 * per(*top.shape().last()?)?)
            }
            "Deconvolution" => {
                let bottom = blob(self.layer_bottoms(layer))?;
                Some(bottom.count() as u64 * per(first_axis)?)
            }
            _ => None,
        }
    }
}
