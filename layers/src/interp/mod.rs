//! `Interp` of the DeepLab and PSPNet forks (`interp_layer.cpp`):
//! bilinear resizing with the corners aligned, to a size given outright,
//! by a zoom or shrink factor, or by a second bottom.

use blob_proto::ParamMessage;
#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

#[cfg(feature = "cuda")]
pub(crate) use cuda::INTERP;

/// The forks' `InterpParameter`.
pub(crate) static INTERP_PARAMETER: MessageSchema = MessageSchema {
    name: "InterpParameter",
    fields: &[
        FieldSchema::optional("height", 1, FieldKind::Int32),
        FieldSchema::optional("width", 2, FieldKind::Int32),
        FieldSchema::optional("zoom_factor", 3, FieldKind::Int32)
            .with_default(FieldDefault::Int(1)),
        FieldSchema::optional("shrink_factor", 4, FieldKind::Int32)
            .with_default(FieldDefault::Int(1)),
        FieldSchema::optional("pad_beg", 5, FieldKind::Int32),
        FieldSchema::optional("pad_end", 6, FieldKind::Int32),
    ],
};

/// `interp_param` in `LayerParameter`: field 143 in the forks, which
/// BVLC gave to `input_param`, so 2143 here (as Netron numbers it); a
/// `.prototxt` names it and never sees the number.
pub(crate) const INTERP_FIELD: FieldSchema =
    FieldSchema::optional("interp_param", 2143, FieldKind::Message(&INTERP_PARAMETER));

/// How the output's size is given: exactly one of these, as the fork
/// checks.
#[derive(Clone, Copy, Debug)]
enum OutputSize {
    Zoom(usize),
    Shrink(usize),
    Fixed(usize, usize),
    LikeSecondBottom,
}

/// The fork's `Interp`: each (N, C) plane resized bilinearly, corners on
/// corners (`(in - 1) / (out - 1)` apart), after cropping `-pad_beg` and
/// `-pad_end` from each side.
pub(crate) struct InterpLayer {
    size: Option<OutputSize>,
    /// Given (`has_*`) sizes, counted to refuse two specifications.
    specs: usize,
    crop_begin: usize,
    crop_total: usize,
}

impl InterpLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(layer, &INTERP_FIELD, &INTERP_PARAMETER);
        let positive = |name: &str| -> Result<usize> {
            let v = p.int(name);
            if v < 1 {
                return Err(bad_param(
                    "set up Interp",
                    format!("interp_param.{name} must be at least 1, not {v}"),
                ));
            }
            Ok(v as usize)
        };
        let mut specs = 0;
        let mut size = None;
        if p.has("zoom_factor") {
            specs += 1;
            size = Some(OutputSize::Zoom(positive("zoom_factor")?));
        }
        if p.has("shrink_factor") {
            specs += 1;
            size = Some(OutputSize::Shrink(positive("shrink_factor")?));
        }
        if p.has("height") && p.has("width") {
            specs += 1;
            size = Some(OutputSize::Fixed(positive("height")?, positive("width")?));
        }
        let (pad_beg, pad_end) = (p.int("pad_beg"), p.int("pad_end"));
        if pad_beg > 0 || pad_end > 0 {
            return Err(bad_param(
                "set up Interp",
                format!(
                    "interp_param.pad_beg {pad_beg} and pad_end {pad_end}: only cropping (values \
                     of 0 or less) is supported, as in the fork"
                ),
            ));
        }
        Ok(Self {
            size,
            specs,
            crop_begin: pad_beg.unsigned_abs() as usize,
            crop_total: (pad_beg.unsigned_abs() + pad_end.unsigned_abs()) as usize,
        })
    }

    /// `(input height, width after cropping, output height, width)`.
    fn geometry<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<[usize; 4]> {
        let s = bottoms[0].shape();
        if s.len() != 4 {
            return Err(bad_param(
                "Interp",
                format!(
                    "the input is {}, not (N, C, H, W)",
                    bottoms[0].shape_string()
                ),
            ));
        }
        let specs = self.specs + usize::from(bottoms.len() == 2);
        let size = match (specs, self.size) {
            (1, Some(size)) => size,
            (1, None) => OutputSize::LikeSecondBottom,
            _ => {
                return Err(bad_param(
                    "set up Interp",
                    format!(
                        "the output size is given {specs} ways; give exactly one of zoom_factor, \
                         shrink_factor, height and width, or a second bottom"
                    ),
                ));
            }
        };
        let eff = |d: usize| d.checked_sub(self.crop_total).filter(|&e| e > 0);
        let (Some(h), Some(w)) = (eff(s[2]), eff(s[3])) else {
            return Err(bad_param(
                "Interp",
                format!(
                    "cropping {} from the {} x {} input leaves nothing",
                    self.crop_total, s[2], s[3]
                ),
            ));
        };
        let (oh, ow) = match size {
            OutputSize::Zoom(z) => (h + (h - 1) * (z - 1), w + (w - 1) * (z - 1)),
            OutputSize::Shrink(k) => ((h - 1) / k + 1, (w - 1) / k + 1),
            OutputSize::Fixed(oh, ow) => (oh, ow),
            OutputSize::LikeSecondBottom => {
                let r = bottoms[1].shape();
                if r.len() != 4 || r[2] == 0 || r[3] == 0 {
                    return Err(bad_param(
                        "Interp",
                        format!(
                            "the second bottom {} gives no (H, W) to resize to",
                            bottoms[1].shape_string()
                        ),
                    ));
                }
                (r[2], r[3])
            }
        };
        Ok([h, w, oh, ow])
    }
}

/// One output coordinate's source: the lower index, whether a next one
/// exists, and the two weights: the far one in the fork's float
/// arithmetic, the near one `1 - far` in the blob's type, as the fork's
/// `Dtype(1.) - h1lambda`.
fn taps<T: MathElement>(from: usize, to: usize) -> Vec<(usize, usize, T, T)> {
    let ratio = if to > 1 {
        (from - 1) as f32 / (to - 1) as f32
    } else {
        0.0
    };
    (0..to)
        .map(|o| {
            let r = ratio * o as f32;
            let i = r as usize;
            let next = usize::from(i < from - 1);
            let far = T::from_f64(f64::from(r - i as f32));
            (i, next, T::ONE - far, far)
        })
        .collect()
}

impl<T: MathElement> DynLayer<T> for InterpLayer {
    fn type_name(&self) -> &str {
        "Interp"
    }

    fn bottoms(&self) -> Arity {
        Arity::range(1, 2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let [_, _, oh, ow] = self.geometry(bottoms)?;
        let s = bottoms[0].shape();
        Ok(vec![TopShape::new(vec![s[0], s[1], oh, ow])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let [h, w, oh, ow] = self.geometry(bottoms)?;
        let s = bottoms[0].shape();
        let (full_h, full_w) = (s[2], s[3]);
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Interp", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let (n, count) = (tops[0].count(), bottoms[0].count());
            let xg = as_f32(bottoms[0]).gpu_data()?;
            let mut yg = as_f32(tops[0]).mutable_gpu_data()?;
            let i = |v: usize| v as i64;
            // SAFETY: x holds planes of full_h x full_w, y n values of
            // planes of oh x ow; every tap lies in the cropped input.
            return unsafe {
                cuda::interp_f32(
                    &gpu,
                    blob_kernels::cuda::launch_config(n),
                    i(n),
                    i(full_h),
                    i(full_w),
                    i(self.crop_begin),
                    i(h),
                    i(w),
                    i(oh),
                    i(ow),
                    &read(&xg, count)?,
                    &mut write(&mut yg, n)?,
                )
            }
            .map_err(|e| crate::gpu::cuda("Interp on the GPU", e));
        }
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        let (rows, cols) = (taps::<T>(h, oh), taps::<T>(w, ow));
        let at = |r: usize, c: usize| (self.crop_begin + r) * full_w + self.crop_begin + c;
        // A plane a core at a time.
        let planes = x.chunks(full_h * full_w).zip(y.chunks_mut(oh * ow));
        blob_kernels::cpu::on_cores(planes, |(src, dst)| {
            if h == oh && w == ow {
                for (r, out) in dst.chunks_mut(ow).enumerate() {
                    out.copy_from_slice(&src[at(r, 0)..at(r, 0) + ow]);
                }
                return;
            }
            // The fork's float weights; the sums in double, rounded once
            // (interp.cu computes the same).
            let f = |v: T| v.to_f64();
            for (&(r, rn, r0, r1), out) in rows.iter().zip(dst.chunks_mut(ow)) {
                for (&(c, cn, c0, c1), o) in cols.iter().zip(out.iter_mut()) {
                    let p = at(r, c);
                    let below = p + rn * full_w;
                    let top = f(c0) * f(src[p]) + f(c1) * f(src[p + cn]);
                    let bottom = f(c0) * f(src[below]) + f(c1) * f(src[below + cn]);
                    *o = T::from_f64(f(r0) * top + f(r1) * bottom);
                }
            }
        });
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        let [h, w, oh, ow] = self.geometry(bottoms)?;
        let s = bottoms[0].shape();
        let (full_h, full_w) = (s[2], s[3]);
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        dx.fill(T::ZERO);
        let (rows, cols) = (taps::<T>(h, oh), taps::<T>(w, ow));
        let same = h == oh && w == ow;
        let at = |r: usize, c: usize| (self.crop_begin + r) * full_w + self.crop_begin + c;
        for (grad, out) in dx.chunks_mut(full_h * full_w).zip(dy.chunks(oh * ow)) {
            for (&(r, rn, r0, r1), g_row) in rows.iter().zip(out.chunks(ow)) {
                for (&(c, cn, c0, c1), &g) in cols.iter().zip(g_row) {
                    let p = at(r, c);
                    if same {
                        grad[p] += g;
                        continue;
                    }
                    let below = p + rn * full_w;
                    grad[p] += r0 * c0 * g;
                    grad[p + cn] += r0 * c1 * g;
                    grad[below] += r1 * c0 * g;
                    grad[below + cn] += r1 * c1 * g;
                }
            }
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
