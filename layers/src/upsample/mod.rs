//! `Upsample` of the YOLOv3 Caffe forks (ChenYingpeng/caffe-yolov3,
//! eric612/MobileNet-YOLO): each value repeated `scale` x `scale` times.
//! SegNet's `Upsample` (the same type and parameter, with a second bottom
//! of MAX-pooling positions) is recognised and refused: pooling does not
//! give its mask top yet.

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

/// `UpsampleParameter`: SegNet's fields, of which YOLO's forks keep
/// `scale` alone; SegNet's default `scale` of 2.
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

/// `upsample_param`, field 149 as in the YOLOv3 forks.
pub(crate) const UPSAMPLE_FIELD: FieldSchema = FieldSchema::optional(
    "upsample_param",
    149,
    FieldKind::Message(&UPSAMPLE_PARAMETER),
);

/// Nearest-neighbour upsampling by whole factors (YOLOv3's route to the
/// finer detection scales).
pub(crate) struct UpsampleLayer {
    scale: [usize; 2],
}

impl UpsampleLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(layer, &UPSAMPLE_FIELD, &UPSAMPLE_PARAMETER);
        if layer.strings("bottom").count() == 2 || p.has("upsample_h") || p.has("pad_out_h") {
            return Err(bad_param(
                "set up Upsample",
                "this is SegNet's Upsample (a second bottom of pooling positions, or \
                 upsample_h / pad_out_h): unpooling by MAX-pooling masks is not supported yet; \
                 YOLO's Upsample takes one bottom and upsample_param { scale: N }",
            ));
        }
        let scale = p.uint("scale") as usize;
        let h = if p.has("scale_h") {
            p.uint("scale_h") as usize
        } else {
            scale
        };
        let w = if p.has("scale_w") {
            p.uint("scale_w") as usize
        } else {
            scale
        };
        if h == 0 || w == 0 {
            return Err(bad_param(
                "set up Upsample",
                format!("upsample_param scales must be positive, not {h} x {w}"),
            ));
        }
        Ok(Self { scale: [h, w] })
    }

    fn dims<T: MathElement>(&self, x: &Blob<T>) -> Result<[usize; 4]> {
        match *x.shape() {
            [n, c, h, w] => Ok([n, c, h, w]),
            _ => Err(bad_param(
                "Upsample",
                format!("the input is {}, not (N, C, H, W)", x.shape_string()),
            )),
        }
    }
}

impl<T: MathElement> DynLayer<T> for UpsampleLayer {
    fn type_name(&self) -> &str {
        "Upsample"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(1)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let [n, c, h, w] = self.dims(bottoms[0])?;
        let grow = |d: usize, k: usize| {
            d.checked_mul(k)
                .ok_or_else(|| bad_param("Upsample", format!("{d} x {k} overflows")))
        };
        Ok(vec![TopShape::new(vec![
            n,
            c,
            grow(h, self.scale[0])?,
            grow(w, self.scale[1])?,
        ])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let [_, _, h, w] = self.dims(bottoms[0])?;
        let [sh, sw] = self.scale;
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        let ow = w * sw;
        for (src, dst) in x.chunks(h * w).zip(y.chunks_mut(h * w * sh * sw)) {
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
        let [_, _, h, w] = self.dims(bottoms[0])?;
        let [sh, sw] = self.scale;
        let ow = w * sw;
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        for (grad, out) in dx.chunks_mut(h * w).zip(dy.chunks(h * w * sh * sw)) {
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
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
