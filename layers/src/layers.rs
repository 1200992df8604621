//! Caffe's layers for LeNet-style nets, forward and backward, on blobs:
//! data in the blob's data, gradients in its diff.
//!
//! Each layer owns its learnable blobs (weights, bias) and reusable
//! scratch buffers, so a forward or backward pass allocates nothing once
//! the batch size is known.

use blob_kernels::cpu::{self, Transpose};

use blob_runtime::{Blob, BlobError};

type Result<T> = std::result::Result<T, BlobError>;

fn mismatch(op: &'static str, what: &str, got: usize, want: usize) -> BlobError {
    BlobError::CountMismatch {
        op,
        what: what.to_string(),
        got,
        want,
    }
}

/// Grows `buf` to `n` elements without shrinking (Caffe's grow-only
/// buffers).
fn ensure(buf: &mut Vec<f32>, n: usize) {
    if buf.len() < n {
        buf.resize(n, 0.0);
    }
}

/// Caffe `Convolution` (no padding, square kernel, one group), computed as
/// im2col followed by one gemm per round of images sized to stay in cache.
///
/// ```
/// use blob_layers::Convolution;
/// use blob_runtime::Blob;
/// let mut conv = Convolution::new(1, 2, 3, 1)?;
/// conv.weight.mutable_cpu_data()?.fill(1.0);
/// let x = Blob::<f32>::new(&[1, 1, 4, 4])?;
/// x.mutable_cpu_data()?.fill(1.0);
/// let y = Blob::<f32>::new(&[1, 2, 2, 2])?;
/// conv.forward(&x, &y)?;
/// assert_eq!(&*y.cpu_data()?, &[9.0; 8]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct Convolution {
    /// Input channels.
    pub channels_in: usize,
    /// Output channels (Caffe `num_output`).
    pub channels_out: usize,
    /// Kernel size.
    pub kernel: usize,
    /// Stride.
    pub stride: usize,
    /// Weights, `(channels_out, channels_in, kernel, kernel)`.
    pub weight: Blob<f32>,
    /// Bias, `(channels_out)`.
    pub bias: Blob<f32>,
    col: Vec<f32>,
    tmp: Vec<f32>,
    dcol: Vec<f32>,
}

impl Convolution {
    /// A convolution with zero-filled weights and bias.
    ///
    /// ```
    /// let c = blob_layers::Convolution::new(1, 20, 5, 1)?;
    /// assert_eq!(c.weight.shape(), &[20, 1, 5, 5]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn new(
        channels_in: usize,
        channels_out: usize,
        kernel: usize,
        stride: usize,
    ) -> Result<Self> {
        Ok(Self {
            channels_in,
            channels_out,
            kernel,
            stride: stride.max(1),
            weight: Blob::new(&[channels_out, channels_in, kernel, kernel])?,
            bias: Blob::new(&[channels_out])?,
            col: Vec::new(),
            dcol: Vec::new(),
            tmp: Vec::new(),
        })
    }

    /// The output height (or width) for an input height (Caffe's formula
    /// without padding).
    ///
    /// ```
    /// assert_eq!(blob_layers::Convolution::new(1, 1, 5, 1)?.output_size(28), 24);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn output_size(&self, input: usize) -> usize {
        (input.saturating_sub(self.kernel)) / self.stride + 1
    }

    fn geometry(&self, x: &Blob<f32>, y: &Blob<f32>) -> Result<ConvDims> {
        let s = x.shape();
        if s.len() != 4 || s[1] != self.channels_in || s[2] < self.kernel || s[3] < self.kernel {
            return Err(BlobError::ShapeMismatch {
                op: "convolve",
                src: x.shape_string(),
                dst: format!("(N, {}, >= {k}, >= {k})", self.channels_in, k = self.kernel),
            });
        }
        let (b, h, w) = (s[0], s[2], s[3]);
        let (oh, ow) = (self.output_size(h), self.output_size(w));
        let want = [b, self.channels_out, oh, ow];
        if y.shape() != want {
            return Err(BlobError::ShapeMismatch {
                op: "write convolution output",
                src: blob_runtime::shape_string(&want),
                dst: y.shape_string(),
            });
        }
        Ok(ConvDims {
            batch: b,
            h,
            w,
            oh,
            ow,
            patch: self.channels_in * self.kernel * self.kernel,
            kernel: self.kernel,
            stride: self.stride,
            channels_in: self.channels_in,
        })
    }

    /// Images per im2col + gemm round: enough columns for gemm to run at
    /// speed, few enough that the column buffer stays in the core's cache
    /// (a whole-batch im2col of conv2 at batch 1000 is 128 MB and leaves
    /// gemm waiting on memory).
    fn images_per_round(&self, batch: usize, patch: usize) -> usize {
        const COLUMN_BUFFER_FLOATS: usize = 1 << 17;
        (COLUMN_BUFFER_FLOATS / patch.max(1)).clamp(1, batch.max(1))
    }

    /// `y = conv(x) + bias` (Caffe `Forward_cpu`), as im2col + one gemm
    /// per round of images.
    ///
    /// ```
    /// # use blob_layers::Convolution;
    /// # use blob_runtime::Blob;
    /// let mut c = Convolution::new(1, 1, 2, 2)?;
    /// let (x, y) = (Blob::new(&[1, 1, 3, 3])?, Blob::new(&[1, 1, 1, 1])?);
    /// c.forward(&x, &y)?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn forward(&mut self, x: &Blob<f32>, y: &Blob<f32>) -> Result<()> {
        let dims = self.geometry(x, y)?;
        let (cout, p, ckk) = (self.channels_out, dims.oh * dims.ow, dims.patch);
        let round = self.images_per_round(dims.batch, ckk * p);
        ensure(&mut self.col, ckk * round * p);
        ensure(&mut self.tmp, cout * round * p);
        let xd = x.cpu_data()?;
        let weight = self.weight.cpu_data()?;
        let bias = self.bias.cpu_data()?;
        let mut yd = y.mutable_cpu_data()?;
        for first in (0..dims.batch).step_by(round) {
            let count = round.min(dims.batch - first);
            let cols = count * p;
            dims.im2col(&xd, first, count, &mut self.col);
            let tmp = &mut self.tmp[..cout * cols];
            cpu::gemm(
                Transpose::No,
                Transpose::No,
                cout,
                cols,
                ckk,
                1.0,
                &weight,
                &self.col[..ckk * cols],
                0.0,
                tmp,
            );
            // (cout, image, p) to (image, cout, p), adding the bias.
            for img in 0..count {
                for co in 0..cout {
                    let src = &tmp[co * cols + img * p..][..p];
                    let dst = &mut yd[((first + img) * cout + co) * p..][..p];
                    let bv = bias[co];
                    for (d, &v) in dst.iter_mut().zip(src) {
                        *d = v + bv;
                    }
                }
            }
        }
        Ok(())
    }

    /// Accumulates weight and bias gradients from `y`'s diff, and writes
    /// `x`'s diff when `propagate_down` (Caffe `Backward_cpu`). Like
    /// Caffe, it recomputes the im2col of `x` rather than keeping the
    /// forward pass's.
    ///
    /// ```
    /// # use blob_layers::Convolution;
    /// # use blob_runtime::Blob;
    /// let mut c = Convolution::new(1, 1, 2, 1)?;
    /// let (x, y) = (Blob::new(&[1, 1, 3, 3])?, Blob::new(&[1, 1, 2, 2])?);
    /// c.forward(&x, &y)?;
    /// y.mutable_cpu_diff()?.fill(1.0);
    /// c.backward(&x, &y, true)?;
    /// assert_eq!(c.bias.cpu_diff()?[0], 4.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn backward(&mut self, x: &Blob<f32>, y: &Blob<f32>, propagate_down: bool) -> Result<()> {
        let dims = self.geometry(x, y)?;
        let (cout, p, ckk) = (self.channels_out, dims.oh * dims.ow, dims.patch);
        let round = self.images_per_round(dims.batch, ckk * p);
        ensure(&mut self.col, ckk * round * p);
        ensure(&mut self.tmp, cout * round * p);
        if propagate_down {
            ensure(&mut self.dcol, ckk * round * p);
        }
        let xd = x.cpu_data()?;
        let dy = y.cpu_diff()?;
        let weight = self.weight.cpu_data()?;
        let mut db = self.bias.mutable_cpu_diff()?;
        let mut dw = self.weight.mutable_cpu_diff()?;
        let mut dx = if propagate_down {
            let mut dx = x.mutable_cpu_diff()?;
            dx.fill(0.0);
            Some(dx)
        } else {
            None
        };
        for first in (0..dims.batch).step_by(round) {
            let count = round.min(dims.batch - first);
            let cols = count * p;
            dims.im2col(&xd, first, count, &mut self.col);
            let tmp = &mut self.tmp[..cout * cols];
            for img in 0..count {
                for co in 0..cout {
                    let src = &dy[((first + img) * cout + co) * p..][..p];
                    tmp[co * cols + img * p..][..p].copy_from_slice(src);
                    db[co] += src.iter().sum::<f32>();
                }
            }
            let col = &self.col[..ckk * cols];
            cpu::gemm(
                Transpose::No,
                Transpose::Yes,
                cout,
                ckk,
                cols,
                1.0,
                tmp,
                col,
                1.0,
                &mut dw,
            );
            let Some(dx) = dx.as_deref_mut() else {
                continue;
            };
            // dcol = W^T dy, then col2im into x's diff.
            let dcol = &mut self.dcol[..ckk * cols];
            cpu::gemm(
                Transpose::Yes,
                Transpose::No,
                ckk,
                cols,
                cout,
                1.0,
                &weight,
                tmp,
                0.0,
                dcol,
            );
            dims.col2im_add(dcol, first, count, dx);
        }
        Ok(())
    }
}

/// A convolution's sizes for one input: batch, input and output planes,
/// and the im2col patch length `channels_in * kernel * kernel`.
#[derive(Clone, Copy)]
struct ConvDims {
    batch: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    patch: usize,
    kernel: usize,
    stride: usize,
    channels_in: usize,
}

impl ConvDims {
    /// Calls `run(col_offset, input_offset)` for every run of `ow` column
    /// entries of images `first..first + count`: column entries
    /// `col_offset..col_offset + ow` pair with input pixels `input_offset +
    /// q * stride`. im2col and its inverse walk the same pairs.
    fn for_each_run(&self, first: usize, count: usize, mut run: impl FnMut(usize, usize)) {
        let ConvDims {
            h,
            w,
            oh,
            ow,
            kernel: k,
            stride: s,
            channels_in: cin,
            ..
        } = *self;
        let p = oh * ow;
        let cols = count * p;
        for c in 0..cin {
            for ki in 0..k {
                for kj in 0..k {
                    let row = ((c * k + ki) * k + kj) * cols;
                    for img in 0..count {
                        let plane = ((first + img) * cin + c) * h * w;
                        for r in 0..oh {
                            run(row + img * p + r * ow, plane + (r * s + ki) * w + kj);
                        }
                    }
                }
            }
        }
    }

    /// im2col of images `first..first + count` of `xd` into `col`: row
    /// `(c, ki, kj)`, column `(image, oh, ow)`.
    fn im2col(&self, xd: &[f32], first: usize, count: usize, col: &mut [f32]) {
        let (ow, s) = (self.ow, self.stride);
        self.for_each_run(first, count, |co, xo| {
            let dst = &mut col[co..co + ow];
            if s == 1 {
                dst.copy_from_slice(&xd[xo..xo + ow]);
            } else {
                for (q, d) in dst.iter_mut().enumerate() {
                    *d = xd[xo + q * s];
                }
            }
        });
    }

    /// The inverse of [`Self::im2col`]: adds each column entry of `col`
    /// (images `first..first + count`) back onto the input pixel it was
    /// copied from in `dx`.
    fn col2im_add(&self, col: &[f32], first: usize, count: usize, dx: &mut [f32]) {
        let (ow, s) = (self.ow, self.stride);
        self.for_each_run(first, count, |co, xo| {
            for (q, &v) in col[co..co + ow].iter().enumerate() {
                dx[xo + q * s] += v;
            }
        });
    }
}

/// Caffe `Pooling` with `pool: MAX`, no padding.
///
/// ```
/// use blob_layers::MaxPool;
/// use blob_runtime::Blob;
/// let mut pool = MaxPool::new(2, 2);
/// let x = Blob::<f32>::new(&[1, 1, 2, 2])?;
/// x.mutable_cpu_data()?.copy_from_slice(&[1.0, 4.0, 3.0, 2.0]);
/// let y = Blob::<f32>::new(&[1, 1, 1, 1])?;
/// pool.forward(&x, &y)?;
/// assert_eq!(y.data_at(&[0, 0, 0, 0]), 4.0);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct MaxPool {
    /// Window size.
    pub kernel: usize,
    /// Stride.
    pub stride: usize,
    argmax: Vec<u32>,
}

impl MaxPool {
    /// A max pooling layer.
    ///
    /// ```
    /// assert_eq!(blob_layers::MaxPool::new(2, 2).output_size(24), 12);
    /// ```
    pub fn new(kernel: usize, stride: usize) -> Self {
        Self {
            kernel: kernel.max(1),
            stride: stride.max(1),
            argmax: Vec::new(),
        }
    }

    /// Caffe's output size: `ceil((input - kernel) / stride) + 1`.
    ///
    /// ```
    /// assert_eq!(blob_layers::MaxPool::new(3, 2).output_size(8), 4);
    /// ```
    pub fn output_size(&self, input: usize) -> usize {
        input.saturating_sub(self.kernel).div_ceil(self.stride) + 1
    }

    /// `y = max over each window of x`; remembers where each max was.
    ///
    /// ```
    /// # use blob_layers::MaxPool;
    /// # use blob_runtime::Blob;
    /// let mut p = MaxPool::new(2, 2);
    /// assert!(p.forward(&Blob::new(&[1, 1, 4, 4])?, &Blob::new(&[1, 1, 3, 3])?).is_err());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn forward(&mut self, x: &Blob<f32>, y: &Blob<f32>) -> Result<()> {
        let s = x.shape();
        if s.len() != 4 {
            return Err(BlobError::ShapeMismatch {
                op: "pool",
                src: x.shape_string(),
                dst: "(N, C, H, W)".into(),
            });
        }
        let (planes, h, w) = (s[0] * s[1], s[2], s[3]);
        let (oh, ow) = (self.output_size(h), self.output_size(w));
        let want = [s[0], s[1], oh, ow];
        if y.shape() != want {
            return Err(BlobError::ShapeMismatch {
                op: "write pooling output",
                src: blob_runtime::shape_string(&want),
                dst: y.shape_string(),
            });
        }
        self.argmax.resize(planes * oh * ow, 0);
        let xd = x.cpu_data()?;
        let mut yd = y.mutable_cpu_data()?;
        if self.kernel == 2 && self.stride == 2 && h % 2 == 0 && w % 2 == 0 {
            pool_2x2(&xd, &mut yd, &mut self.argmax, planes, h, w);
            return Ok(());
        }
        for pl in 0..planes {
            let plane = &xd[pl * h * w..][..h * w];
            for r in 0..oh {
                let (h0, h1) = (r * self.stride, (r * self.stride + self.kernel).min(h));
                for q in 0..ow {
                    let (w0, w1) = (q * self.stride, (q * self.stride + self.kernel).min(w));
                    let mut best = f32::NEG_INFINITY;
                    let mut at = h0 * w + w0;
                    for hh in h0..h1 {
                        for ww in w0..w1 {
                            let v = plane[hh * w + ww];
                            if v > best {
                                best = v;
                                at = hh * w + ww;
                            }
                        }
                    }
                    let o = (pl * oh + r) * ow + q;
                    yd[o] = best;
                    self.argmax[o] = at as u32;
                }
            }
        }
        Ok(())
    }

    /// Routes each output gradient to the input that was the max.
    ///
    /// ```
    /// # use blob_layers::MaxPool;
    /// # use blob_runtime::Blob;
    /// let mut p = MaxPool::new(2, 2);
    /// let (x, y) = (Blob::<f32>::new(&[1, 1, 2, 2])?, Blob::<f32>::new(&[1, 1, 1, 1])?);
    /// x.mutable_cpu_data()?.copy_from_slice(&[0.0, 0.0, 5.0, 0.0]);
    /// p.forward(&x, &y)?;
    /// y.mutable_cpu_diff()?.fill(1.0);
    /// p.backward(&x, &y)?;
    /// assert_eq!(&*x.cpu_diff()?, &[0.0, 0.0, 1.0, 0.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn backward(&self, x: &Blob<f32>, y: &Blob<f32>) -> Result<()> {
        let s = x.shape();
        let plane_in = s[2] * s[3];
        let plane_out = y.count() / (s[0] * s[1]).max(1);
        if self.argmax.len() != y.count() {
            return Err(mismatch(
                "pooling backward",
                "positions of the forward pass",
                self.argmax.len(),
                y.count(),
            ));
        }
        let dy = y.cpu_diff()?;
        let mut dx = x.mutable_cpu_diff()?;
        dx.fill(0.0);
        for (o, (&g, &at)) in dy.iter().zip(&self.argmax).enumerate() {
            let pl = o / plane_out;
            dx[pl * plane_in + at as usize] += g;
        }
        Ok(())
    }
}

/// The common 2x2, stride 2 window over even planes, without the general
/// loop's bounds: the same maxima and first-maximum ties as Caffe.
fn pool_2x2(x: &[f32], y: &mut [f32], argmax: &mut [u32], planes: usize, h: usize, w: usize) {
    let (oh, ow) = (h / 2, w / 2);
    for pl in 0..planes {
        let plane = &x[pl * h * w..][..h * w];
        for r in 0..oh {
            let top = &plane[2 * r * w..][..w];
            let bottom = &plane[(2 * r + 1) * w..][..w];
            let out = &mut y[(pl * oh + r) * ow..][..ow];
            let arg = &mut argmax[(pl * oh + r) * ow..][..ow];
            for q in 0..ow {
                let c = [top[2 * q], top[2 * q + 1], bottom[2 * q], bottom[2 * q + 1]];
                let at = [
                    2 * r * w + 2 * q,
                    2 * r * w + 2 * q + 1,
                    (2 * r + 1) * w + 2 * q,
                    (2 * r + 1) * w + 2 * q + 1,
                ];
                let mut best = 0;
                for i in 1..4 {
                    if c[i] > c[best] {
                        best = i;
                    }
                }
                out[q] = c[best];
                arg[q] = at[best] as u32;
            }
        }
    }
}

/// Caffe `InnerProduct` (`transpose: false`): `y = x W^T + b` with `x`
/// flattened to `(N, K)`.
///
/// ```
/// use blob_layers::InnerProduct;
/// use blob_runtime::Blob;
/// let mut ip = InnerProduct::new(3, 2)?;
/// ip.weight.mutable_cpu_data()?.copy_from_slice(&[1.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
/// let x = Blob::<f32>::new(&[1, 3])?;
/// x.mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0, 3.0]);
/// let y = Blob::<f32>::new(&[1, 2])?;
/// ip.forward(&x, &y)?;
/// assert_eq!(&*y.cpu_data()?, &[1.0, 5.0]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct InnerProduct {
    /// Weights, `(outputs, inputs)`.
    pub weight: Blob<f32>,
    /// Bias, `(outputs)`.
    pub bias: Blob<f32>,
    ones: Vec<f32>,
}

impl InnerProduct {
    /// An inner product with zero-filled weights and bias.
    ///
    /// ```
    /// let ip = blob_layers::InnerProduct::new(800, 500)?;
    /// assert_eq!(ip.weight.shape(), &[500, 800]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn new(inputs: usize, outputs: usize) -> Result<Self> {
        Ok(Self {
            weight: Blob::new(&[outputs, inputs])?,
            bias: Blob::new(&[outputs])?,
            ones: Vec::new(),
        })
    }

    fn dims(&self, x: &Blob<f32>, y: &Blob<f32>) -> Result<(usize, usize, usize)> {
        let (n, k) = (self.weight.shape()[0], self.weight.shape()[1]);
        let b = x.shape().first().copied().unwrap_or(0);
        if x.count() != b * k || y.count() != b * n || y.shape().first() != Some(&b) {
            return Err(BlobError::ShapeMismatch {
                op: "inner product",
                src: format!("{} -> {}", x.shape_string(), y.shape_string()),
                dst: format!("(N, {k}) -> (N, {n})"),
            });
        }
        Ok((b, n, k))
    }

    /// `y = x W^T + b`: one gemm, then the bias.
    ///
    /// ```
    /// # use blob_layers::InnerProduct;
    /// # use blob_runtime::Blob;
    /// let mut ip = InnerProduct::new(4, 2)?;
    /// assert!(ip.forward(&Blob::new(&[3, 5])?, &Blob::new(&[3, 2])?).is_err());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn forward(&mut self, x: &Blob<f32>, y: &Blob<f32>) -> Result<()> {
        let (b, n, k) = self.dims(x, y)?;
        let mut yd = y.mutable_cpu_data()?;
        cpu::gemm(
            Transpose::No,
            Transpose::Yes,
            b,
            n,
            k,
            1.0,
            &x.cpu_data()?,
            &self.weight.cpu_data()?,
            0.0,
            &mut yd,
        );
        let bias = self.bias.cpu_data()?;
        for row in yd.chunks_exact_mut(n) {
            cpu::add_inplace(row, &bias);
        }
        Ok(())
    }

    /// Accumulates `dW += dy^T x` and `db += sum(dy)`, and writes
    /// `dx = dy W` when `propagate_down`.
    ///
    /// ```
    /// # use blob_layers::InnerProduct;
    /// # use blob_runtime::Blob;
    /// let mut ip = InnerProduct::new(2, 1)?;
    /// let (x, y) = (Blob::<f32>::new(&[1, 2])?, Blob::<f32>::new(&[1, 1])?);
    /// x.mutable_cpu_data()?.copy_from_slice(&[3.0, 4.0]);
    /// y.mutable_cpu_diff()?.fill(1.0);
    /// ip.backward(&x, &y, false)?;
    /// assert_eq!(&*ip.weight.cpu_diff()?, &[3.0, 4.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn backward(&mut self, x: &Blob<f32>, y: &Blob<f32>, propagate_down: bool) -> Result<()> {
        let (b, n, k) = self.dims(x, y)?;
        let dy = y.cpu_diff()?;
        cpu::gemm(
            Transpose::Yes,
            Transpose::No,
            n,
            k,
            b,
            1.0,
            &dy,
            &x.cpu_data()?,
            1.0,
            &mut self.weight.mutable_cpu_diff()?,
        );
        ensure(&mut self.ones, b);
        self.ones[..b].fill(1.0);
        cpu::gemv(
            Transpose::Yes,
            b,
            n,
            1.0,
            &dy,
            &self.ones[..b],
            1.0,
            &mut self.bias.mutable_cpu_diff()?,
        );
        if propagate_down {
            cpu::gemm(
                Transpose::No,
                Transpose::No,
                b,
                k,
                n,
                1.0,
                &dy,
                &self.weight.cpu_data()?,
                0.0,
                &mut x.mutable_cpu_diff()?,
            );
        }
        Ok(())
    }
}

/// Caffe `ReLU` in place: `y = max(x, 0)`.
///
/// ```
/// let b = blob_runtime::Blob::<f32>::new(&[3])?;
/// b.mutable_cpu_data()?.copy_from_slice(&[-1.0, 0.0, 2.0]);
/// blob_layers::relu_forward(&b)?;
/// assert_eq!(&*b.cpu_data()?, &[0.0, 0.0, 2.0]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn relu_forward(x: &Blob<f32>) -> Result<()> {
    for v in x.mutable_cpu_data()?.iter_mut() {
        *v = v.max(0.0);
    }
    Ok(())
}

/// ReLU backward in place: the diff passes where the output is positive.
///
/// ```
/// let b = blob_runtime::Blob::<f32>::new(&[2])?;
/// b.mutable_cpu_data()?.copy_from_slice(&[0.0, 2.0]);
/// b.mutable_cpu_diff()?.fill(1.0);
/// blob_layers::relu_backward(&b)?;
/// assert_eq!(&*b.cpu_diff()?, &[0.0, 1.0]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn relu_backward(x: &Blob<f32>) -> Result<()> {
    let data = x.cpu_data()?;
    for (d, &v) in x.mutable_cpu_diff()?.iter_mut().zip(data.iter()) {
        if v <= 0.0 {
            *d = 0.0;
        }
    }
    Ok(())
}

/// Caffe `Softmax` over the last axis of `(N, C)`, into `prob`.
///
/// ```
/// let x = blob_runtime::Blob::<f32>::new(&[1, 2])?;
/// let p = blob_runtime::Blob::<f32>::new(&[1, 2])?;
/// blob_layers::softmax(&x, &p)?;
/// assert_eq!(&*p.cpu_data()?, &[0.5, 0.5]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn softmax(x: &Blob<f32>, prob: &Blob<f32>) -> Result<()> {
    if x.shape() != prob.shape() || x.num_axes() != 2 {
        return Err(BlobError::ShapeMismatch {
            op: "softmax",
            src: x.shape_string(),
            dst: prob.shape_string(),
        });
    }
    let c = x.shape()[1];
    let xd = x.cpu_data()?;
    let mut pd = prob.mutable_cpu_data()?;
    for (row, out) in xd.chunks_exact(c).zip(pd.chunks_exact_mut(c)) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for (o, &v) in out.iter_mut().zip(row) {
            *o = (v - max).exp();
        }
        let sum: f32 = out.iter().sum();
        cpu::scal(1.0 / sum, out);
    }
    Ok(())
}

/// Caffe `SoftmaxWithLoss` (normalization VALID): returns the mean of
/// `-log(max(prob[label], FLT_MIN))` and writes `(prob - onehot) / N`
/// into `logits`' diff.
///
/// ```
/// let x = blob_runtime::Blob::<f32>::new(&[1, 2])?;
/// let p = blob_runtime::Blob::<f32>::new(&[1, 2])?;
/// let loss = blob_layers::softmax_loss(&x, &p, &[1])?;
/// assert!((loss - std::f32::consts::LN_2).abs() < 1e-6);
/// assert_eq!(&*x.cpu_diff()?, &[0.5, -0.5]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn softmax_loss(logits: &Blob<f32>, prob: &Blob<f32>, labels: &[u8]) -> Result<f32> {
    softmax(logits, prob)?;
    let (n, c) = (logits.shape()[0], logits.shape()[1]);
    if labels.len() != n {
        return Err(mismatch("softmax loss", "labels", labels.len(), n));
    }
    let pd = prob.cpu_data()?;
    let mut loss = 0.0f32;
    let mut dx = logits.mutable_cpu_diff()?;
    dx.copy_from_slice(&pd);
    for (i, &l) in labels.iter().enumerate() {
        let l = l as usize;
        if l >= c {
            return Err(BlobError::IndexOutOfBounds {
                op: "softmax loss label",
                index: vec![i, l],
                shape: logits.shape_string(),
            });
        }
        loss -= pd[i * c + l].max(f32::MIN_POSITIVE).ln();
        dx[i * c + l] -= 1.0;
    }
    cpu::scal(1.0 / n as f32, &mut dx);
    Ok(loss / n as f32)
}
