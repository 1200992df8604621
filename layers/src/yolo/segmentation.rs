//! The YOLO fork's segmentation head (eric612/MobileNet-YOLO,
//! `yolo_seg.cpp` and `segmentation_evaluate_layer.cpp`), trained beside
//! its detector on the label planes `AnnotatedData` makes as a third top
//! (one plane a class, each value the class's share of that pixel).
//!
//! `YoloSeg` is the training loss. Bottoms: the predictions `(N, C, H,
//! W)`, the label planes of the same shape, and optionally each image's
//! pixel count of each class `(N, C)` (the labels summed over height and
//! width by two `Reduction`s, as the fork's cityscapes prototxt does).
//! Each prediction goes through a sigmoid `s`; its delta is
//! `object_scale · (s - label)`. With the counts, a pixel of a class
//! (label above 0.5) takes `object_scale · (2 - r)` instead, `r` the
//! class's pixels over the pixels not of it, over the batch. The loss
//! is the deltas' squares summed over the batch, the gradient the
//! deltas (not through the sigmoid, as darknet's logistic losses) over
//! the batch.
//!
//! `SegmentationEvaluate` is its test output: bottoms the predictions
//! through their sigmoid and the label planes, top `(1, 1, 1, C)`, each
//! class's intersection over union of the pixels above `threshold` in
//! both, 0 where they share none.
//!
//! On the host, in float, as the fork. `num_class`, `class_scale`,
//! `use_logic_gradient` and `use_hardsigmoid` are read and change
//! nothing, as in the fork; the fork's running scores in its log are
//! not printed. Departures: a class covering every pixel of the batch
//! with the counts given takes `object_scale` (the fork divides by zero),
//! `SegmentationEvaluate` counts the pixels of every image of the batch
//! (the fork the first image's alone; at its batch of 1 the two agree),
//! and predictions of another size than the labels are refused (the
//! fork resizes them bilinearly to the labels' size).

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use super::{delta_scale, sigmoid, write_gradient};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

const SEG_OP: &str = "run YoloSeg";
const EVAL_OP: &str = "run SegmentationEvaluate";

/// The fork's `YoloSegParameter`.
static YOLO_SEG_PARAMETER: MessageSchema = MessageSchema {
    name: "YoloSegParameter",
    fields: &[
        FieldSchema::optional("num_class", 1, FieldKind::UInt32).with_default(FieldDefault::Int(0)),
        FieldSchema::optional("object_scale", 2, FieldKind::Float)
            .with_default(FieldDefault::Float(5.0)),
        FieldSchema::optional("class_scale", 3, FieldKind::Float)
            .with_default(FieldDefault::Float(1.0)),
        FieldSchema::optional("use_logic_gradient", 4, FieldKind::Bool)
            .with_default(FieldDefault::Bool(false)),
        FieldSchema::optional("use_hardsigmoid", 5, FieldKind::Bool)
            .with_default(FieldDefault::Bool(false)),
    ],
};

/// `yolo_seg_param`, field 604 as in the fork.
pub(crate) const YOLO_SEG_FIELD: FieldSchema = FieldSchema::optional(
    "yolo_seg_param",
    604,
    FieldKind::Message(&YOLO_SEG_PARAMETER),
);

/// The fork's `SegmentationEvaluateParameter`.
static SEGMENTATION_EVALUATE_PARAMETER: MessageSchema = MessageSchema {
    name: "SegmentationEvaluateParameter",
    fields: &[
        FieldSchema::optional("num_classes", 1, FieldKind::UInt32)
            .with_default(FieldDefault::Int(1)),
        FieldSchema::optional("threshold", 2, FieldKind::Float)
            .with_default(FieldDefault::Float(0.5)),
    ],
};

/// `segmentation_evaluate_param`, field 605 as in the fork.
pub(crate) const SEGMENTATION_EVALUATE_FIELD: FieldSchema = FieldSchema::optional(
    "segmentation_evaluate_param",
    605,
    FieldKind::Message(&SEGMENTATION_EVALUATE_PARAMETER),
);

/// The predictions' `(N, C, H·W)`, with the labels of the same shape.
fn planes<T: MathElement>(op: &'static str, bottoms: &[&Blob<T>]) -> Result<(usize, usize, usize)> {
    let shape = bottoms[0].shape();
    if shape.len() != 4 {
        return Err(bad_param(
            op,
            format!("bottom 0 must be N x C x H x W (a plane a class), not {shape:?}"),
        ));
    }
    if bottoms[1].shape() != shape {
        return Err(bad_param(
            op,
            format!(
                "the label planes are {:?} but the predictions {shape:?}: they must match \
                 (AnnotatedData's seg_scales sets the labels' size)",
                bottoms[1].shape()
            ),
        ));
    }
    Ok((shape[0], shape[1], shape[2] * shape[3]))
}

fn floats<T: MathElement>(blob: &Blob<T>) -> Result<Vec<f32>> {
    Ok(blob.cpu_data()?.iter().map(|v| v.to_f64() as f32).collect())
}

/// The YOLO fork's `YoloSeg` loss: see the [module](self) documentation.
pub(crate) struct YoloSegLayer {
    object_scale: f32,
    /// The fork's `diff_`.
    delta: Vec<f32>,
    ready: bool,
}

impl YoloSegLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(layer, &YOLO_SEG_FIELD, &YOLO_SEG_PARAMETER);
        Ok(Self {
            object_scale: p.float("object_scale") as f32,
            delta: Vec::new(),
            ready: false,
        })
    }

    /// Each class's `object_scale · (2 - r)` from the pixel counts
    /// `(N, C)`.
    fn class_scales(
        &self,
        counts: &[f32],
        (images, classes, plane): (usize, usize, usize),
    ) -> Vec<f32> {
        (0..classes)
            .map(|i| {
                let (mut of, mut rest) = (0.0f32, 0.0f32);
                for j in 0..images {
                    of += counts[j * classes + i];
                    rest += plane as f32 - counts[j * classes + i];
                }
                if rest == 0.0 {
                    self.object_scale
                } else {
                    self.object_scale * (2.0 - of / rest)
                }
            })
            .collect()
    }
}

impl<T: MathElement> DynLayer<T> for YoloSegLayer {
    fn type_name(&self) -> &str {
        "YoloSeg"
    }

    fn bottoms(&self) -> Arity {
        Arity::range(2, 3)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let (images, classes, _) = planes(SEG_OP, bottoms)?;
        if let Some(counts) = bottoms.get(2)
            && (counts.shape().first() != Some(&images) || counts.count() != images * classes)
        {
            return Err(bad_param(
                SEG_OP,
                format!(
                    "bottom 2 must hold each image's pixel count of each class, {images} x \
                     {classes}, not {:?}",
                    counts.shape()
                ),
            ));
        }
        Ok(vec![TopShape::new(Vec::new())])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        self.ready = false;
        let sizes @ (images, classes, plane) = planes(SEG_OP, bottoms)?;
        let labels = floats(bottoms[1])?;
        let alpha = self.object_scale;
        let scales = match bottoms.get(2) {
            Some(counts) => Some(self.class_scales(&floats(counts)?, sizes)),
            None => None,
        };
        self.delta.clear();
        self.delta.extend(
            bottoms[0]
                .cpu_data()?
                .iter()
                .map(|v| sigmoid(v.to_f64() as f32)),
        );
        let mut loss = 0.0f32;
        // The fork's order: class by class, each image's plane.
        for i in 0..classes {
            for j in 0..images {
                let at = (j * classes + i) * plane;
                for (d, &l) in self.delta[at..][..plane]
                    .iter_mut()
                    .zip(&labels[at..][..plane])
                {
                    *d = match &scales {
                        Some(s) if l > 0.5 => -(l - *d) * s[i],
                        Some(_) => -(l - *d) * alpha,
                        None => alpha * *d - alpha * l,
                    };
                    loss += *d * *d;
                }
            }
        }
        tops[0].mutable_cpu_data()?[0] = T::from_f64(f64::from(loss / images as f32));
        self.ready = true;
        Ok(())
    }

    fn backward(&mut self, tops: &[&Blob<T>], down: &[bool], bottoms: &[&Blob<T>]) -> Result<()> {
        if down.get(2) == Some(&true) {
            return Err(bad_param(
                SEG_OP,
                "YoloSeg Layer cannot backpropagate to the pixel counts.",
            ));
        }
        let images = bottoms[0].shape()[0];
        let Some(alpha) = delta_scale((SEG_OP, "YoloSeg"), self.ready, down, tops[0], images)?
        else {
            return Ok(());
        };
        write_gradient(bottoms[0], alpha, &self.delta)
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom == 0
    }

    fn is_loss(&self) -> bool {
        true
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}

/// The YOLO fork's `SegmentationEvaluate`: see the [module](self)
/// documentation.
pub(crate) struct SegmentationEvaluateLayer {
    threshold: f32,
}

impl SegmentationEvaluateLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(
            layer,
            &SEGMENTATION_EVALUATE_FIELD,
            &SEGMENTATION_EVALUATE_PARAMETER,
        );
        if !p.has("num_classes") {
            return Err(bad_param(
                "set up SegmentationEvaluate",
                "Must provide num_classes (segmentation_evaluate_param), as the fork requires.",
            ));
        }
        Ok(Self {
            threshold: p.float("threshold") as f32,
        })
    }
}

impl<T: MathElement> DynLayer<T> for SegmentationEvaluateLayer {
    fn type_name(&self) -> &str {
        "SegmentationEvaluate"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let (_, classes, _) = planes(EVAL_OP, bottoms)?;
        Ok(vec![TopShape::new(vec![1, 1, 1, classes])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (images, classes, plane) = planes(EVAL_OP, bottoms)?;
        let (predicted, labels) = (floats(bottoms[0])?, floats(bottoms[1])?);
        let th = self.threshold;
        let mut out = tops[0].mutable_cpu_data()?;
        for (c, iou) in out.iter_mut().enumerate() {
            let (mut truth, mut both, mut found) = (0u64, 0u64, 0u64);
            for j in 0..images {
                let at = (j * classes + c) * plane;
                for (&p, &l) in predicted[at..][..plane].iter().zip(&labels[at..][..plane]) {
                    truth += u64::from(l > th);
                    both += u64::from(l > th && p > th);
                    found += u64::from(p > th);
                }
            }
            let value = if both > 0 {
                both as f32 / (truth + found - both) as f32
            } else {
                0.0
            };
            *iou = T::from_f64(f64::from(value));
        }
        Ok(())
    }

    fn backward(&mut self, _tops: &[&Blob<T>], down: &[bool], _bottoms: &[&Blob<T>]) -> Result<()> {
        if down.iter().any(|&d| d) {
            return Err(bad_param(
                EVAL_OP,
                "SegmentationEvaluate has no backward (as in the fork)",
            ));
        }
        Ok(())
    }

    fn allow_force_backward(&self, _bottom: usize) -> bool {
        false
    }
}
