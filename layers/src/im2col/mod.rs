//! Caffe's `Im2col`: each image's sliding windows laid out as columns,
//! the matrix a convolution multiplies, as a layer of its own.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::conv::ConvGeometry;
use crate::dyn_layer::{DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

const OP: &str = "set up Im2col";

/// Caffe `Im2col` over (N, C, H, W): top (N, C * kh * kw, OH, OW), row
/// `(c, ki, kj)` of each image's column matrix as a channel; backward
/// adds the columns' gradients back onto the pixels they came from.
pub(crate) struct Im2colLayer {
    kernel: [usize; 2],
    stride: [usize; 2],
    pad: [usize; 2],
    dilation: [usize; 2],
}

/// A (height, width) pair from the repeated field `list` (one value or
/// two) or from `prefix_h` and `prefix_w`, else `default`.
fn pair(p: &ParamMessage, list: &str, prefix: &str, default: usize) -> Result<[usize; 2]> {
    let listed = p.uints(list);
    let (h, w) = (format!("{prefix}_h"), format!("{prefix}_w"));
    let split = p.schema().field(&h).is_some() && (p.has(&h) || p.has(&w));
    match (listed.as_slice(), split) {
        ([], false) => Ok([default; 2]),
        ([], true) => Ok([p.uint(&h) as usize, p.uint(&w) as usize]),
        ([v], false) => Ok([*v as usize; 2]),
        ([a, b], false) => Ok([*a as usize, *b as usize]),
        _ => Err(bad_param(
            OP,
            format!("{list} must be one or two values, or {h} and {w} instead; not both"),
        )),
    }
}

impl Im2colLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "convolution_param");
        if p.boolean("force_nd_im2col") || p.int("axis") != 1 {
            return Err(bad_param(
                OP,
                "only the 2-D Im2col over channel axis 1 is supported (no force_nd_im2col, axis 1)",
            ));
        }
        let layer = Self {
            kernel: pair(&p, "kernel_size", "kernel", 0)?,
            stride: pair(&p, "stride", "stride", 1)?,
            pad: pair(&p, "pad", "pad", 0)?,
            dilation: pair(&p, "dilation", "dilation", 1)?,
        };
        if [layer.kernel, layer.stride, layer.dilation]
            .iter()
            .any(|v| v.contains(&0))
        {
            return Err(bad_param(
                OP,
                "kernel_size (or kernel_h and kernel_w), stride and dilation must be positive",
            ));
        }
        Ok(layer)
    }

    fn geometry<T: MathElement>(&self, x: &Blob<T>) -> Result<ConvGeometry> {
        let [n, c, h, w] = *x.shape() else {
            return Err(bad_param(
                "Im2col",
                format!("the input is {}, not (N, C, H, W)", x.shape_string()),
            ));
        };
        let out = |a: usize, size: usize| {
            let extent = self.dilation[a] * (self.kernel[a] - 1) + 1;
            (size + 2 * self.pad[a])
                .checked_sub(extent)
                .map(|span| span / self.stride[a] + 1)
                .ok_or_else(|| {
                    bad_param(
                        "Im2col",
                        format!(
                            "the input {} is smaller than the {} x {} window",
                            x.shape_string(),
                            self.kernel[0],
                            self.kernel[1]
                        ),
                    )
                })
        };
        Ok(ConvGeometry {
            batch: n,
            channels_in: c,
            channels_out: 1,
            h,
            w,
            oh: out(0, h)?,
            ow: out(1, w)?,
            kernel: self.kernel,
            stride: self.stride,
            pad: self.pad,
            dilation: self.dilation,
        })
    }
}

impl<T: MathElement> DynLayer<T> for Im2colLayer {
    fn type_name(&self) -> &str {
        "Im2col"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let g = self.geometry(bottoms[0])?;
        let rows = g.channels_in * g.kernel[0] * g.kernel[1];
        Ok(vec![TopShape::new(vec![g.batch, rows, g.oh, g.ow])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let g = self.geometry(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Im2col", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let (x, mut y) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(tops[0]).mutable_gpu_data()?,
            );
            let (x, mut y) = (
                read(&x, bottoms[0].count())?,
                write(&mut y, tops[0].count())?,
            );
            return crate::conv::im2col_images(&gpu, &g, false, &x, &mut y);
        }
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        let per_image = g.channels_in * g.kernel[0] * g.kernel[1] * g.oh * g.ow;
        for (image, col) in y.chunks_mut(per_image.max(1)).enumerate().take(g.batch) {
            g.im2col(&x, image, 1, col);
        }
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
        let g = self.geometry(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Im2col", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let (dy, mut dx) = (
                as_f32(tops[0]).gpu_diff()?,
                as_f32(bottoms[0]).mutable_gpu_diff()?,
            );
            let (dy, mut dx) = (
                read(&dy, tops[0].count())?,
                write(&mut dx, bottoms[0].count())?,
            );
            return crate::conv::im2col_images(&gpu, &g, true, &dy, &mut dx);
        }
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        dx.fill(T::ZERO);
        let per_image = g.channels_in * g.kernel[0] * g.kernel[1] * g.oh * g.ow;
        for (image, col) in dy.chunks(per_image.max(1)).enumerate().take(g.batch) {
            g.col2im_add(col, image, 1, &mut dx);
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
