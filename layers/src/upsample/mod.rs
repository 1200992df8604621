//! `Upsample` of two forks under one name: SegNet's (alexgkendall/
//! caffe-segnet, also ENet's), which unpools, each value put back where a
//! MAX pooling's mask says it came from and zeros elsewhere; and the
//! YOLOv3 forks' (ChenYingpeng/caffe-yolov3, eric612/MobileNet-YOLO),
//! which repeats each value `scale` x `scale` times. Two bottoms (values
//! and the mask) make it SegNet's; one makes it YOLO's.

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

#[cfg(feature = "cuda")]
pub(crate) use cuda::UPSAMPLE;

/// `UpsampleParameter`: SegNet's fields, of which YOLO's forks keep
/// `scale` alone; SegNet's default `scale` of 2 (YOLO's prototxts give
/// theirs).
pub(crate) static UPSAMPLE_PARAMETER: MessageSchema = MessageSchema {
    name: "UpsampleParameter",
    fields: &[
        FieldSchema::optional("scale", 1, FieldKind::UInt32).with_default(FieldDefault::Int(2)),
        FieldSchema::optional("scale_h", 2, FieldKind::UInt32),
        FieldSchema::optional("scale_w", 3, FieldKind::UInt32),
        FieldSchema::optional("pad_out_h", 4, FieldKind::Bool),
        FieldSchema::optional("pad_out_w", 5, FieldKind::Bool),
        FieldSchema::optional("upsample_h", 6, FieldKind::UInt32),
        FieldSchema::optional("upsample_w", 7, FieldKind::UInt32),
    ],
};

/// `upsample_param`: field 149 as in the YOLOv3 forks (SegNet's 137 is
/// BVLC's `embed_param`).
pub(crate) const UPSAMPLE_FIELD: FieldSchema = FieldSchema::optional(
    "upsample_param",
    149,
    FieldKind::Message(&UPSAMPLE_PARAMETER),
);

/// How the unpooled output's size is given (SegNet's fork).
#[derive(Clone, Copy, Debug)]
enum UnpooledSize {
    /// `upsample_h` x `upsample_w`.
    Fixed([usize; 2]),
    /// The input's size times the scales, less one where `pad_out_*`.
    Scaled { scale: [usize; 2], less: [usize; 2] },
}

#[derive(Clone, Copy, Debug)]
enum Upsampling {
    /// YOLO's: each value repeated `scale` times down and across.
    Nearest([usize; 2]),
    /// SegNet's: values put back at their mask's positions.
    Unpool(UnpooledSize),
}

/// `Upsample`: see the [module](self) documentation.
pub(crate) struct UpsampleLayer {
    mode: Upsampling,
}

impl UpsampleLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(layer, &UPSAMPLE_FIELD, &UPSAMPLE_PARAMETER);
        let bad = |detail: String| bad_param("set up Upsample", detail);
        let scales = || -> Result<[usize; 2]> {
            let scale = p.uint("scale") as usize;
            let given = |f: &str| if p.has(f) { p.uint(f) as usize } else { scale };
            let s = [given("scale_h"), given("scale_w")];
            if s.contains(&0) {
                return Err(bad(format!(
                    "upsample_param scales must be positive, not {} x {}",
                    s[0], s[1]
                )));
            }
            Ok(s)
        };
        if layer.strings("bottom").count() != 2 {
            return Ok(Self {
                mode: Upsampling::Nearest(scales()?),
            });
        }
        let size = if p.has("upsample_h") && p.has("upsample_w") {
            let hw = [p.uint("upsample_h") as usize, p.uint("upsample_w") as usize];
            if hw.iter().any(|&d| d < 2) {
                return Err(bad(format!(
                    "upsample_h and upsample_w must be above 1, not {} x {}",
                    hw[0], hw[1]
                )));
            }
            UnpooledSize::Fixed(hw)
        } else {
            let scale = scales()?;
            if scale.iter().any(|&s| s < 2) {
                return Err(bad(format!(
                    "an unpooling Upsample needs upsample_h and upsample_w, or scales above 1, \\
                     not {} x {}",
                    scale[0], scale[1]
                )));
            }
            let less = [p.boolean("pad_out_h"), p.boolean("pad_out_w")];
            if (less[0] && scale[0] != 2) || (less[1] && scale[1] != 2) {
                return Err(bad(
                    "pad_out_h / pad_out_w need a scale of 2, as in the fork".into(),
                ));
            }
            UnpooledSize::Scaled {
                scale,
                less: less.map(usize::from),
            }
        };
        Ok(Self {
            mode: Upsampling::Unpool(size),
        })
    }

    /// YOLO's repetition factors (down, across); `None` for SegNet's
    /// unpooling.
    pub(crate) fn nearest_scales(&self) -> Option<[usize; 2]> {
        match self.mode {
            Upsampling::Nearest(scales) => Some(scales),
            Upsampling::Unpool(_) => None,
        }
    }

    fn dims<T: MathElement>(x: &Blob<T>) -> Result<[usize; 4]> {
        match *x.shape() {
            [n, c, h, w] => Ok([n, c, h, w]),
            _ => Err(bad_param(
                "Upsample",
                format!("the input is {}, not (N, C, H, W)", x.shape_string()),
            )),
        }
    }

    /// The output's (height, width).
    fn out_size<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<[usize; 2]> {
        let [_, _, h, w] = Self::dims(bottoms[0])?;
        let grow = |d: usize, k: usize| {
            d.checked_mul(k)
                .ok_or_else(|| bad_param("Upsample", format!("{d} x {k} overflows")))
        };
        match self.mode {
            Upsampling::Nearest([sh, sw]) => Ok([grow(h, sh)?, grow(w, sw)?]),
            Upsampling::Unpool(size) => {
                if bottoms[1].shape() != bottoms[0].shape() {
                    return Err(bad_param(
                        "Upsample",
                        format!(
                            "the mask {} is not the shape of the values {}",
                            bottoms[1].shape_string(),
                            bottoms[0].shape_string()
                        ),
                    ));
                }
                match size {
                    UnpooledSize::Fixed(hw) => Ok(hw),
                    UnpooledSize::Scaled { scale, less } => Ok([
                        grow(h, scale[0])?.saturating_sub(less[0]),
                        grow(w, scale[1])?.saturating_sub(less[1]),
                    ]),
                }
            }
        }
    }

    /// Each mask entry as a position in an output plane of `plane`
    /// values, refused (as the fork refuses it) where out of range.
    fn positions<T: MathElement>(mask: &[T], plane: usize) -> Result<Vec<usize>> {
        mask.iter()
            .map(|m| {
                let at = m.to_f64();
                if at >= 0.0 && (at as usize) < plane {
                    Ok(at as usize)
                } else {
                    Err(bad_param(
                        "Upsample",
                        format!(
                            "upsample top index {at} out of range of the {plane} outputs of a \\
                             plane: check the scale settings match the pooling layer whose \\
                             mask this is"
                        ),
                    ))
                }
            })
            .collect()
    }
}

#[cfg(feature = "cuda")]
impl UpsampleLayer {
    const OP: &'static str = "Upsample on the GPU";

    /// The GPU the layer runs on, its mask checked on the host first (a
    /// position past the output is refused, as on the CPU).
    fn gpu<T: MathElement>(
        &self,
        bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
    ) -> Result<Option<std::sync::Arc<blob_kernels::cuda::Gpu>>> {
        let mut others = vec![("output", tops[0])];
        if let Some(mask) = bottoms.get(1) {
            others.push(("mask", *mask));
        }
        let gpu = crate::gpu::gpu_for("Upsample", bottoms[0], &others)?;
        if gpu.is_some() && matches!(self.mode, Upsampling::Unpool(_)) {
            let [oh, ow] = self.out_size(bottoms)?;
            Self::positions(&bottoms[1].cpu_data()?, oh * ow)?;
        }
        Ok(gpu)
    }

    fn forward_on<T: MathElement>(
        &self,
        gpu: &blob_kernels::cuda::Gpu,
        [h, w]: [usize; 2],
        [oh, ow]: [usize; 2],
        bottoms: &[&Blob<T>],
        top: &Blob<T>,
    ) -> Result<()> {
        use crate::gpu::{as_f32, read, write};
        use blob_kernels::cuda::launch_config;
        let (n, out) = (bottoms[0].count(), top.count());
        let xg = as_f32(bottoms[0]).gpu_data()?;
        let mut yg = as_f32(top).mutable_gpu_data()?;
        let (x, mut y) = (read(&xg, n)?, write(&mut yg, out)?);
        match self.mode {
            // SAFETY: x holds the planes of h x w, y of oh x ow = their
            // repetition.
            Upsampling::Nearest([sh, sw]) => unsafe {
                cuda::upsample_nearest_f32(
                    gpu,
                    launch_config(out),
                    out as i64,
                    h as i64,
                    w as i64,
                    sh as i32,
                    sw as i32,
                    &x,
                    &mut y,
                )
            },
            Upsampling::Unpool(_) => {
                let mg = as_f32(bottoms[1]).gpu_data()?;
                let mask = read(&mg, n)?;
                // SAFETY: y holds `out` values; every mask position lies
                // in its plane (checked by `gpu`).
                unsafe {
                    cuda::upsample_zero_f32(gpu, launch_config(out), out as i64, &mut y).and_then(
                        |_| {
                            cuda::unpool_f32(
                                gpu,
                                launch_config(n),
                                n as i64,
                                (h * w) as i64,
                                (oh * ow) as i64,
                                &x,
                                &mask,
                                &mut y,
                            )
                        },
                    )
                }
            }
        }
        .map_err(|e| crate::gpu::cuda(Self::OP, e))
    }

    fn backward_on<T: MathElement>(
        &self,
        gpu: &blob_kernels::cuda::Gpu,
        [h, w]: [usize; 2],
        [oh, ow]: [usize; 2],
        bottoms: &[&Blob<T>],
        top: &Blob<T>,
    ) -> Result<()> {
        use crate::gpu::{as_f32, read, write};
        use blob_kernels::cuda::launch_config;
        let (n, out) = (bottoms[0].count(), top.count());
        let dyg = as_f32(top).gpu_diff()?;
        let mut dxg = as_f32(bottoms[0]).mutable_gpu_diff()?;
        let (dy, mut dx) = (read(&dyg, out)?, write(&mut dxg, n)?);
        match self.mode {
            // SAFETY: as forward_on's.
            Upsampling::Nearest([sh, sw]) => unsafe {
                cuda::upsample_nearest_backward_f32(
                    gpu,
                    launch_config(n),
                    n as i64,
                    h as i64,
                    w as i64,
                    sh as i32,
                    sw as i32,
                    &dy,
                    &mut dx,
                )
            },
            Upsampling::Unpool(_) => {
                let mg = as_f32(bottoms[1]).gpu_data()?;
                // SAFETY: as forward_on's.
                unsafe {
                    cuda::unpool_backward_f32(
                        gpu,
                        launch_config(n),
                        n as i64,
                        (h * w) as i64,
                        (oh * ow) as i64,
                        &dy,
                        &read(&mg, n)?,
                        &mut dx,
                    )
                }
            }
        }
        .map_err(|e| crate::gpu::cuda(Self::OP, e))
    }
}

impl<T: MathElement> DynLayer<T> for UpsampleLayer {
    fn type_name(&self) -> &str {
        "Upsample"
    }

    fn bottoms(&self) -> Arity {
        Arity::range(1, 2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let [n, c, _, _] = Self::dims(bottoms[0])?;
        let [oh, ow] = self.out_size(bottoms)?;
        Ok(vec![TopShape::new(vec![n, c, oh, ow])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let [_, _, h, w] = Self::dims(bottoms[0])?;
        let [oh, ow] = self.out_size(bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = self.gpu(bottoms, tops)? {
            return self.forward_on(&gpu, [h, w], [oh, ow], bottoms, tops[0]);
        }
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        match self.mode {
            Upsampling::Nearest([sh, sw]) => {
                for (src, dst) in x.chunks(h * w).zip(y.chunks_mut(oh * ow)) {
                    for (row, out_rows) in src.chunks(w).zip(dst.chunks_mut(ow * sh)) {
                        let (first, rest) = out_rows.split_at_mut(ow);
                        for (o, &v) in first.chunks_mut(sw).zip(row) {
                            o.fill(v);
                        }
                        for copy in rest.chunks_mut(ow) {
                            copy.copy_from_slice(first);
                        }
                    }
                }
            }
            Upsampling::Unpool(_) => {
                let at = Self::positions(&bottoms[1].cpu_data()?, oh * ow)?;
                y.fill(T::ZERO);
                for ((src, places), dst) in x
                    .chunks(h * w)
                    .zip(at.chunks(h * w))
                    .zip(y.chunks_mut(oh * ow))
                {
                    for (&v, &i) in src.iter().zip(places) {
                        dst[i] = v;
                    }
                }
            }
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
        let [_, _, h, w] = Self::dims(bottoms[0])?;
        let [oh, ow] = self.out_size(bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = self.gpu(bottoms, tops)? {
            return self.backward_on(&gpu, [h, w], [oh, ow], bottoms, tops[0]);
        }
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        match self.mode {
            Upsampling::Nearest([sh, sw]) => {
                for (grad, out) in dx.chunks_mut(h * w).zip(dy.chunks(oh * ow)) {
                    for (g_row, out_rows) in grad.chunks_mut(w).zip(out.chunks(ow * sh)) {
                        g_row.fill(T::ZERO);
                        for out_row in out_rows.chunks(ow) {
                            for (g, block) in g_row.iter_mut().zip(out_row.chunks(sw)) {
                                for &v in block {
                                    *g += v;
                                }
                            }
                        }
                    }
                }
            }
            Upsampling::Unpool(_) => {
                let at = Self::positions(&bottoms[1].cpu_data()?, oh * ow)?;
                for ((grad, places), out) in dx
                    .chunks_mut(h * w)
                    .zip(at.chunks(h * w))
                    .zip(dy.chunks(oh * ow))
                {
                    for (g, &i) in grad.iter_mut().zip(places) {
                        *g = out[i];
                    }
                }
            }
        }
        Ok(())
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom == 0
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
