//! Shallow convolutions on the CPU without im2col: a net's first layer
//! (LeNet's conv1, 1 x 5 x 5; MTCNN's, 3 x 3 x 3) read straight from the
//! image by `cpu::correlate`, whose sums are the im2col + gemm path's,
//! bit for bit. im2col would copy the image once per tap, 25 times for
//! LeNet's conv1, and that copy cost as much as the product.

use std::any::TypeId;

use blob_kernels::cpu;
use blob_runtime::MathElement;

use crate::f32_view::{as_f32, as_f32_mut};

use super::cpu::ConvGeometry;

/// The deepest patch taken directly: beyond it the column buffer is
/// small next to the product, and the gemm's packed blocks win.
const DIRECT_PATCH_MAX: usize = 32;

/// The sizes of a direct pass over one image: the padded image with the
/// reads past its end.
#[derive(Clone, Copy)]
pub(super) struct DirectSizes {
    padded: usize,
}

impl ConvGeometry {
    /// Whether this convolution takes the direct path: `f32` on an
    /// AVX-512 machine, stride 1, a shallow patch, and not a 1x1 layer
    /// (whose input is its own column buffer).
    pub(super) fn direct<T: 'static>(&self) -> Option<DirectSizes> {
        let suited = TypeId::of::<T>() == TypeId::of::<f32>()
            && cpu::isa() == cpu::Isa::Avx512
            && self.stride == [1, 1]
            && !self.is_pointwise()
            && self.patch() <= DIRECT_PATCH_MAX
            && self.oh > 0
            && self.ow > 0;
        if !suited {
            return None;
        }
        let (rows, width) = self.padded_plane();
        // The last output reads the image's last value; a step reads up
        // to CORRELATE_PAD past it.
        Some(DirectSizes {
            padded: self.channels_in * rows * width + cpu::CORRELATE_PAD,
        })
    }

    /// Rows and row length of an input plane with its padding.
    fn padded_plane(&self) -> (usize, usize) {
        (self.h + 2 * self.pad[0], self.w + 2 * self.pad[1])
    }

    /// The input offset of each tap, in im2col's order (channel, row,
    /// column), in the padded image.
    fn tap_offsets(&self) -> Vec<usize> {
        let (rows, width) = self.padded_plane();
        let [kh, kw] = self.kernel;
        let [dh, dw] = self.dilation;
        let mut offsets = Vec::with_capacity(self.patch());
        for c in 0..self.channels_in {
            for i in 0..kh {
                for j in 0..kw {
                    offsets.push(c * rows * width + i * dh * width + j * dw);
                }
            }
        }
        offsets
    }
}

/// The scratch a direct pass over one image needs: the padded image.
pub(super) fn scratch_size(sizes: DirectSizes) -> usize {
    sizes.padded
}

/// `y = conv(x) + bias` for images `first..first + count` of `x` into
/// `y` (those images' outputs), through `padded` (at least
/// [`scratch_size`]). `T` is `f32`, as [`ConvGeometry::direct`] found.
pub(super) fn forward<T: MathElement>(
    g: &ConvGeometry,
    sizes: DirectSizes,
    (x, weight, bias): (&[T], &[T], &[T]),
    (first, count): (usize, usize),
    y: &mut [T],
    padded: &mut [T],
) {
    const F32: &str = "ConvGeometry::direct found f32";
    let (x, weight, bias) = (
        as_f32(x).expect(F32),
        as_f32(weight).expect(F32),
        as_f32(bias).expect(F32),
    );
    let (y, padded) = (as_f32_mut(y).expect(F32), as_f32_mut(padded).expect(F32));
    let offsets = g.tap_offsets();
    let (rows, width) = g.padded_plane();
    let [ph, pw] = g.pad;
    let (plane_in, plane_out) = (g.h * g.w, g.oh * g.ow);
    let image_in = g.channels_in * plane_in;
    let padded = &mut padded[..sizes.padded];
    let at = cpu::OutputRows {
        rows: g.oh,
        cols: g.ow,
        stride: width,
    };
    // The padding (and the reads past the end) stay zero: only the
    // image's own values are written below.
    padded.fill(0.0);
    for img in 0..count {
        let xi = &x[(first + img) * image_in..][..image_in];
        for (c, plane) in xi.chunks_exact(plane_in.max(1)).enumerate() {
            for (r, row) in plane.chunks_exact(g.w.max(1)).enumerate() {
                let at = c * rows * width + (r + ph) * width + pw;
                padded[at..at + g.w].copy_from_slice(row);
            }
        }
        let yi = &mut y[img * g.channels_out * plane_out..][..g.channels_out * plane_out];
        let ran = cpu::correlate(padded, &offsets, weight, bias, g.channels_out, at, yi);
        debug_assert!(ran, "ConvGeometry::direct found AVX-512");
    }
}
