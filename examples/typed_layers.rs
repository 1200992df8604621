//! Layers written on typed blobs: InnerProduct, ReLU and SoftmaxWithLoss,
//! forward and backward through data and diff, trained with SGD on a small
//! synthetic problem (three Gaussian clusters in 16 dimensions).
//!
//! Run: `cargo run --release --example typed_layers`
//!
//! Every blob's shape is a type. Wiring a layer wrongly does not compile;
//! for instance, giving the second InnerProduct the first one's weights,
//!
//! ```text
//! let logits = hidden.inner_product(&net.w1)?;
//! ```
//!
//! is refused with
//!
//! ```text
//! error[E0277]: cannot multiply (Dyn, D<32>) by weights (D<32>, D<16>):
//!               inputs must be (B, K) and weights (N, K) with the same K
//! ```

use blobflow::kernels::cpu::{self, Transpose};
use blobflow::prelude::*;
use blobflow::typed::{InnerProductOut, InnerProductWith, SameShapeAs, Shape};

const CLASSES: usize = 3;

type Input = blob!(f32; _, 16);
type Hidden = blob!(f32; _, 32);
type Logits = blob!(f32; _, 3);
type W1 = blob!(f32; 32, 16);
type W2 = blob!(f32; 3, 32);

struct Net {
    w1: W1,
    b1: blob!(f32; 32),
    w2: W2,
    b2: blob!(f32; 3),
}

/// y = x W^T + b (Caffe InnerProduct forward); the product's shape is
/// checked by `inner_product`, the bias by its type.
fn ip_forward<X, W: Shape>(
    x: &TypedBlob<f32, X>,
    w: &TypedBlob<f32, W>,
    b: &Blob<f32>,
) -> Result<TypedBlob<f32, InnerProductOut<X, W>>, BlobError>
where
    X: InnerProductWith<W>,
{
    let y = x.inner_product(w)?;
    {
        let bias = b.cpu_data()?;
        let mut out = y.mutable_cpu_data()?;
        for row in out.chunks_exact_mut(bias.len()) {
            cpu::add_inplace(row, &bias);
        }
    }
    Ok(y)
}

/// dW += dy^T x, db += sum(dy), dx = dy W (Caffe InnerProduct backward).
fn ip_backward(
    x: &Blob<f32>,
    w: &Blob<f32>,
    b: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<(), BlobError> {
    let (batch, k) = (x.shape()[0], x.shape()[1]);
    let n = w.shape()[0];
    let dy = y.cpu_diff()?;
    cpu::gemm(
        Transpose::Yes,
        Transpose::No,
        n,
        k,
        batch,
        1.0,
        &dy,
        &x.cpu_data()?,
        1.0,
        &mut w.mutable_cpu_diff()?,
    );
    {
        let mut db = b.mutable_cpu_diff()?;
        for row in dy.chunks_exact(n) {
            cpu::add_inplace(&mut db, row);
        }
    }
    cpu::gemm(
        Transpose::No,
        Transpose::No,
        batch,
        k,
        n,
        1.0,
        &dy,
        &w.cpu_data()?,
        0.0,
        &mut x.mutable_cpu_diff()?,
    );
    Ok(())
}

/// ReLU forward in place on any shape; backward masks the diff.
fn relu_forward<S: Shape>(x: &TypedBlob<f32, S>) -> Result<(), BlobError> {
    for v in x.mutable_cpu_data()?.iter_mut() {
        *v = v.max(0.0);
    }
    Ok(())
}

fn relu_backward<S: Shape, S2: SameShapeAs<S>>(
    out: &TypedBlob<f32, S>,
    grad_from: &TypedBlob<f32, S2>,
) -> Result<(), BlobError> {
    let data = out.cpu_data()?;
    let mut diff = grad_from.mutable_cpu_diff()?;
    for (d, &v) in diff.iter_mut().zip(data.iter()) {
        if v <= 0.0 {
            *d = 0.0;
        }
    }
    Ok(())
}

/// SoftmaxWithLoss: mean cross-entropy; writes d(loss)/d(logits) into the
/// logits' diff.
fn softmax_loss(logits: &Logits, labels: &[usize]) -> Result<f32, BlobError> {
    let batch = logits.shape()[0];
    let data = logits.cpu_data()?;
    let mut diff = logits.mutable_cpu_diff()?;
    let mut loss = 0.0;
    for ((row, drow), &label) in data
        .chunks_exact(CLASSES)
        .zip(diff.chunks_exact_mut(CLASSES))
        .zip(labels)
    {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for (d, &v) in drow.iter_mut().zip(row) {
            *d = (v - max).exp();
            sum += *d;
        }
        for d in drow.iter_mut() {
            *d /= sum;
        }
        loss -= drow[label].max(f32::MIN_POSITIVE).ln();
        drow[label] -= 1.0;
        cpu::scal(1.0 / batch as f32, drow);
    }
    Ok(loss / batch as f32)
}

fn synthetic_batch(batch: usize, step: u64) -> Result<(Input, Vec<usize>), BlobError> {
    let x = Input::with_dynamic(batch)?;
    cpu::set_seed(1000 + step);
    cpu::gaussian(0.0, 0.6, &mut x.mutable_cpu_data()?).expect("sigma > 0");
    let mut labels = vec![0usize; batch];
    let mut data = x.mutable_cpu_data()?;
    for (i, (row, label)) in data.chunks_exact_mut(16).zip(labels.iter_mut()).enumerate() {
        *label = i % CLASSES;
        row[*label * 5] += 2.0; // each class shifts its own coordinate
    }
    drop(data);
    Ok((x, labels))
}

fn main() -> Result<(), BlobError> {
    let net = Net {
        w1: W1::new()?,
        b1: <blob!(f32; 32)>::new()?,
        w2: W2::new()?,
        b2: <blob!(f32; 3)>::new()?,
    };
    cpu::set_seed(7);
    cpu::gaussian(0.0, 0.25, &mut net.w1.mutable_cpu_data()?).expect("sigma > 0");
    cpu::gaussian(0.0, 0.25, &mut net.w2.mutable_cpu_data()?).expect("sigma > 0");
    net.b1.mutable_cpu_data()?;
    net.b2.mutable_cpu_data()?;
    let params: [&Blob<f32>; 4] = [&net.w1, &net.b1, &net.w2, &net.b2];

    let lr = 0.2;
    for step in 0..200 {
        let (x, labels) = synthetic_batch(60, step)?;
        // Forward.
        let h: Hidden = ip_forward(&x, &net.w1, &net.b1)?;
        relu_forward(&h)?;
        let logits: Logits = ip_forward(&h, &net.w2, &net.b2)?;
        let loss = softmax_loss(&logits, &labels)?;
        // Backward: diffs flow from the loss to every parameter.
        for p in params {
            p.mutable_cpu_diff()?.fill(0.0);
        }
        ip_backward(&h, &net.w2, &net.b2, &logits)?;
        relu_backward(&h, &h)?;
        ip_backward(&x, &net.w1, &net.b1, &h)?;
        // SGD: diff *= lr, then Caffe's Update (data -= diff).
        for p in params {
            p.scale_diff(lr)?;
            p.update()?;
        }
        if step % 40 == 0 || step == 199 {
            let correct = logits
                .cpu_data()?
                .chunks_exact(CLASSES)
                .zip(&labels)
                .filter(|(row, l)| {
                    row.iter()
                        .enumerate()
                        .max_by(|a, b| a.1.total_cmp(b.1))
                        .map(|m| m.0)
                        == Some(**l)
                })
                .count();
            println!(
                "step {step:>3}: loss {loss:.4}, batch accuracy {:.0}%",
                100.0 * correct as f32 / 60.0
            );
        }
    }
    Ok(())
}
