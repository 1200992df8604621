//! Convolution over three or more spatial axes (volumes: video, CT
//! scans) on the host: Caffe's `im2col_nd` and `col2im_nd` around one
//! gemm per image and group. Two axes or fewer take the planar engine;
//! on a GPU, the planar kernels' passes read this file's tables of taps.

use blob_kernels::cpu::{self, AlignedVec, Transpose};
use blob_runtime::MathElement;

use super::ConvGradients;
use super::runtime::Window;
use crate::layer::{Result, ensure};

/// A convolution's sizes over N spatial axes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VolumeGeometry {
    /// Images: the product of the axes before the channels.
    pub batch: usize,
    pub groups: usize,
    pub channels_in: usize,
    pub channels_out: usize,
    pub input: Vec<usize>,
    pub output: Vec<usize>,
    pub window: Window,
}

impl VolumeGeometry {
    pub(crate) fn input_points(&self) -> usize {
        self.input.iter().product()
    }

    pub(crate) fn output_points(&self) -> usize {
        self.output.iter().product()
    }

    pub(crate) fn kernel_points(&self) -> usize {
        self.window.kernel.iter().product()
    }

    /// For each kernel offset `k` and output point `p`, the input point
    /// it reads at `k * P + p`, or `usize::MAX` where that is padding:
    /// the same for every channel, so worked out once a pass.
    pub(crate) fn taps(&self, taps: &mut AlignedVec<usize>) -> Result<()> {
        let (kernel_points, points) = (self.kernel_points(), self.output_points());
        ensure(taps, kernel_points.saturating_mul(points))?;
        let w = &self.window;
        let axes = self.input.len();
        let mut offset = vec![0usize; axes];
        let mut at = vec![0usize; axes];
        for k in 0..kernel_points {
            at.fill(0);
            for (p, tap) in taps[k * points..][..points].iter_mut().enumerate() {
                let mut index = 0usize;
                let mut inside = true;
                for a in 0..axes {
                    let pos =
                        (at[a] * w.stride[a] + offset[a] * w.dilation[a]).checked_sub(w.pad[a]);
                    match pos.filter(|&v| v < self.input[a]) {
                        Some(v) => index = index * self.input[a] + v,
                        None => inside = false,
                    }
                }
                *tap = if inside { index } else { usize::MAX };
                if p + 1 < points {
                    step(&mut at, &self.output);
                }
            }
            step(&mut offset, &w.kernel);
        }
        Ok(())
    }
}

/// The next multi-index of `dims` in C order (the last axis fastest).
fn step(at: &mut [usize], dims: &[usize]) {
    for a in (0..at.len()).rev() {
        at[a] += 1;
        if at[a] < dims[a] {
            return;
        }
        at[a] = 0;
    }
}

/// The buffers a volume convolution keeps between passes.
#[derive(Default)]
pub(crate) struct VolumeScratch<T> {
    taps: AlignedVec<usize>,
    col: AlignedVec<T>,
}

/// `col[(c K + k) P + p] = x[c][tap(k, p)]`, zero for padding.
fn im2col<T: MathElement>(x: &[T], channels: usize, plane: usize, taps: &[usize], col: &mut [T]) {
    for c in 0..channels {
        let image = &x[c * plane..][..plane];
        for (dst, &tap) in col[c * taps.len()..][..taps.len()].iter_mut().zip(taps) {
            *dst = if tap == usize::MAX {
                T::ZERO
            } else {
                image[tap]
            };
        }
    }
}

/// The transpose of [`im2col`]: each column value added back to the
/// input point it was read from.
fn col2im_add<T: MathElement>(
    col: &[T],
    channels: usize,
    plane: usize,
    taps: &[usize],
    dx: &mut [T],
) {
    for c in 0..channels {
        let image = &mut dx[c * plane..][..plane];
        for (&v, &tap) in col[c * taps.len()..][..taps.len()].iter().zip(taps) {
            if tap != usize::MAX {
                image[tap] += v;
            }
        }
    }
}

/// Per image and group: the input, output and weight slices' sizes.
struct Parts {
    cin: usize,
    cout: usize,
    rows: usize,
    points: usize,
    plane: usize,
}

impl VolumeGeometry {
    fn parts(&self) -> Parts {
        let cin = self.channels_in / self.groups;
        Parts {
            cin,
            cout: self.channels_out / self.groups,
            rows: cin * self.kernel_points(),
            points: self.output_points(),
            plane: self.input_points(),
        }
    }
}

/// `y = conv(x) + bias`, weights `(cout, cin / groups, kernel...)`.
pub(crate) fn forward<T: MathElement>(
    g: &VolumeGeometry,
    s: &mut VolumeScratch<T>,
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
) -> Result<()> {
    let q = g.parts();
    g.taps(&mut s.taps)?;
    ensure(&mut s.col, q.rows.saturating_mul(q.points))?;
    let col = &mut s.col[..q.rows * q.points];
    for image in 0..g.batch {
        for group in 0..g.groups {
            let unit = image * g.groups + group;
            im2col(&x[unit * q.cin * q.plane..], q.cin, q.plane, &s.taps, col);
            let out = &mut y[unit * q.cout * q.points..][..q.cout * q.points];
            let w = &weight[group * q.cout * q.rows..][..q.cout * q.rows];
            cpu::gemm(
                Transpose::No,
                Transpose::No,
                q.cout,
                q.points,
                q.rows,
                T::ONE,
                w,
                col,
                T::ZERO,
                out,
            );
            for (o, row) in out.chunks_mut(q.points.max(1)).enumerate() {
                let b = bias[group * q.cout + o];
                row.iter_mut().for_each(|v| *v += b);
            }
        }
    }
    Ok(())
}

/// The weight and bias gradients (accumulated) and, where asked, the
/// input's (overwritten), from the output's gradient `dy`.
pub(crate) fn backward<T: MathElement>(
    g: &VolumeGeometry,
    s: &mut VolumeScratch<T>,
    x: &[T],
    weight: &[T],
    dy: &[T],
    grads: ConvGradients<'_, T>,
) -> Result<()> {
    let ConvGradients {
        weight: mut dw,
        bias: mut db,
        input: mut dx,
    } = grads;
    let q = g.parts();
    g.taps(&mut s.taps)?;
    ensure(&mut s.col, q.rows.saturating_mul(q.points))?;
    let col = &mut s.col[..q.rows * q.points];
    if let Some(dx) = dx.as_deref_mut() {
        dx.fill(T::ZERO);
    }
    for image in 0..g.batch {
        for group in 0..g.groups {
            let unit = image * g.groups + group;
            let dyu = &dy[unit * q.cout * q.points..][..q.cout * q.points];
            if let Some(db) = db.as_deref_mut() {
                for (o, row) in dyu.chunks(q.points.max(1)).enumerate() {
                    db[group * q.cout + o] += cpu::sum(row);
                }
            }
            if let Some(dw) = dw.as_deref_mut() {
                im2col(&x[unit * q.cin * q.plane..], q.cin, q.plane, &s.taps, col);
                let dwg = &mut dw[group * q.cout * q.rows..][..q.cout * q.rows];
                cpu::gemm(
                    Transpose::No,
                    Transpose::Yes,
                    q.cout,
                    q.rows,
                    q.points,
                    T::ONE,
                    dyu,
                    col,
                    T::ONE,
                    dwg,
                );
            }
            if let Some(dx) = dx.as_deref_mut() {
                let w = &weight[group * q.cout * q.rows..][..q.cout * q.rows];
                cpu::gemm(
                    Transpose::Yes,
                    Transpose::No,
                    q.rows,
                    q.points,
                    q.cout,
                    T::ONE,
                    w,
                    dyu,
                    T::ZERO,
                    col,
                );
                col2im_add(
                    col,
                    q.cin,
                    q.plane,
                    &s.taps,
                    &mut dx[unit * q.cin * q.plane..],
                );
            }
        }
    }
    Ok(())
}
