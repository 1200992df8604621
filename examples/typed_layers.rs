//! A net of typed layers with one written by the user: InnerProduct, a
//! learnable per-channel scale (the user's layer, `ChannelScale`), ReLU,
//! InnerProduct and SoftmaxWithLoss, trained with SGD on a small synthetic
//! problem (three Gaussian clusters in 16 dimensions).
//!
//! Run: `cargo run --release --example typed_layers`
//!
//! `ChannelScale` implements the same [`Layer`] trait as the built-in
//! layers: Caffe's Forward and Backward on the blobs, its parameter among
//! `params()`. The typed `forward`/`backward` come with it, so wiring it
//! wrongly does not compile; feeding it the logits instead of the hidden
//! layer is refused with
//!
//! ```text
//! error[E0277]: layer ChannelScale<f32, Hidden> reads Hidden, but is fed Logits
//! ```

use blobflow::kernels::cpu;
use blobflow::layers::{InnerProduct, Labels, Layer, ReLU, SoftmaxWithLoss, accuracy};
use blobflow::prelude::*;
use blobflow::typed::{DimList, Rank2, Shape};

const CLASSES: usize = 3;

blob!(pub shape Input = _, 16);
blob!(pub shape Hidden = _, 32);
blob!(pub shape Logits = _, CLASSES);

/// The user's layer: `y[b, c] = x[b, c] * gamma[c]`, with `gamma`
/// learned (Caffe's Scale layer with one axis, no bias).
struct ChannelScale<T: MathElement, S: Shape>
where
    S::Dims: Rank2,
{
    /// One factor per channel: its type is the shape's channel dim.
    gamma: TypedBlob<T, (<S::Dims as Rank2>::A1,)>,
}

impl<T: MathElement, S: Shape> ChannelScale<T, S>
where
    S::Dims: Rank2,
{
    /// Factors of one: the layer starts as the identity.
    fn new() -> Result<Self, BlobError> {
        let channels = S::Dims::STATIC_DIMS[1].expect("a static channel dim");
        let gamma = TypedBlob::from_shape(&[channels])?;
        gamma.mutable_cpu_data()?.fill(T::ONE);
        Ok(Self { gamma })
    }
}

impl<T: MathElement, S: Shape> Layer for ChannelScale<T, S>
where
    S::Dims: Rank2,
{
    type Elem = T;
    type Input = S;
    type Output = S;
    const TYPE: &'static str = "Scale";

    fn forward_blobs(&mut self, x: &Blob<T>, y: &Blob<T>) -> Result<(), BlobError> {
        let gamma = self.gamma.cpu_data()?;
        let xd = x.cpu_data()?;
        let mut yd = y.mutable_cpu_data()?;
        for (out, row) in yd
            .chunks_exact_mut(gamma.len())
            .zip(xd.chunks_exact(gamma.len()))
        {
            for ((o, &v), &g) in out.iter_mut().zip(row).zip(gamma.iter()) {
                *o = v * g;
            }
        }
        Ok(())
    }

    /// `dgamma[c] += sum_b dy[b, c] * x[b, c]`; `dx = dy * gamma`.
    fn backward_blobs(
        &mut self,
        x: &Blob<T>,
        y: &Blob<T>,
        propagate_down: bool,
    ) -> Result<(), BlobError> {
        let channels = self.gamma.count();
        let (xd, dy) = (x.cpu_data()?, y.cpu_diff()?);
        {
            let mut dgamma = self.gamma.mutable_cpu_diff()?;
            for (row, grow) in xd.chunks_exact(channels).zip(dy.chunks_exact(channels)) {
                for ((dg, &v), &g) in dgamma.iter_mut().zip(row).zip(grow) {
                    *dg += v * g;
                }
            }
        }
        if propagate_down {
            let gamma = self.gamma.cpu_data()?;
            let mut dx = x.mutable_cpu_diff()?;
            for (drow, grow) in dx.chunks_exact_mut(channels).zip(dy.chunks_exact(channels)) {
                for ((d, &g), &s) in drow.iter_mut().zip(grow).zip(gamma.iter()) {
                    *d = g * s;
                }
            }
        }
        Ok(())
    }

    fn params(&self) -> Vec<&Blob<T>> {
        vec![self.gamma.as_dyn()]
    }
}

/// The net: every layer's input and output named, checked when this
/// example compiles.
struct Net {
    ip1: InnerProduct<f32, Input, 32>,
    scale: ChannelScale<f32, Hidden>,
    relu: ReLU<f32, Hidden>,
    ip2: InnerProduct<f32, Hidden, CLASSES>,
    loss: SoftmaxWithLoss<f32, Logits>,
}

impl Net {
    /// Every learnable blob, in the order of the layers.
    fn params(&self) -> Vec<&Blob<f32>> {
        [self.ip1.params(), self.scale.params(), self.ip2.params()].concat()
    }
}

/// A batch of inputs and their labels.
type Batch = (TypedBlob<f32, Input>, TypedBlob<f32, Labels<Logits>>);

fn synthetic_batch(batch: usize, step: u64) -> Result<Batch, BlobError> {
    let x = TypedBlob::<f32, Input>::with_dynamic(batch)?;
    cpu::set_seed(1000 + step);
    cpu::gaussian(0.0, 0.6, &mut x.mutable_cpu_data()?).expect("sigma > 0");
    let labels = TypedBlob::<f32, Labels<Logits>>::with_dynamic(batch)?;
    {
        let mut data = x.mutable_cpu_data()?;
        let mut l = labels.mutable_cpu_data()?;
        for (i, (row, label)) in data.chunks_exact_mut(16).zip(l.iter_mut()).enumerate() {
            let class = i % CLASSES;
            *label = class as f32;
            row[class * 5] += 2.0; // each class shifts its own coordinate
        }
    }
    Ok((x, labels))
}

fn main() -> Result<(), BlobError> {
    let mut net = Net {
        ip1: InnerProduct::new()?,
        scale: ChannelScale::new()?,
        relu: ReLU::new(),
        ip2: InnerProduct::new()?,
        loss: SoftmaxWithLoss::new(),
    };
    cpu::set_seed(7);
    cpu::gaussian(0.0, 0.25, &mut net.ip1.weight.mutable_cpu_data()?).expect("sigma > 0");
    cpu::gaussian(0.0, 0.25, &mut net.ip2.weight.mutable_cpu_data()?).expect("sigma > 0");
    let batch = 60;
    let (h, scaled) = (
        TypedBlob::<f32, Hidden>::with_dynamic(batch)?,
        TypedBlob::<f32, Hidden>::with_dynamic(batch)?,
    );
    let logits = TypedBlob::<f32, Logits>::with_dynamic(batch)?;

    let lr = 0.2;
    for step in 0..200 {
        let (x, labels) = synthetic_batch(batch, step)?;
        net.ip1.forward(&x, &h)?;
        net.scale.forward(&h, &scaled)?;
        net.relu.forward(&scaled, &scaled)?;
        net.ip2.forward(&scaled, &logits)?;
        let loss = net.loss.forward(&logits, &labels)?;
        for p in net.params() {
            p.clear_diff()?;
        }
        net.loss.backward(&logits, &labels)?;
        net.ip2.backward(&scaled, &logits, true)?;
        net.relu.backward(&scaled, &scaled, true)?;
        net.scale.backward(&h, &scaled, true)?;
        net.ip1.backward(&x, &h, false)?;
        // SGD: diff *= lr, then Caffe's Update (data -= diff).
        for p in net.params() {
            p.scale_diff(lr)?;
            p.update()?;
        }
        if step % 40 == 0 || step == 199 {
            println!(
                "step {step:>3}: loss {loss:.4}, batch accuracy {:.0}%",
                100.0 * accuracy(&logits, &labels)?
            );
        }
    }
    let gamma = net.scale.gamma.to_vec()?;
    println!(
        "learned scales: min {:.3}, max {:.3}",
        gamma.iter().copied().fold(f32::INFINITY, f32::min),
        gamma.iter().copied().fold(f32::NEG_INFINITY, f32::max)
    );
    Ok(())
}
