//! `Yolov3DetectionOutput`: YOLOv3's boxes at several scales (the fork's
//! `yolov3_detection_output_layer.cpp`), and Gaussian YOLOv3's boxes
//! with their uncertainties (`gaussian_box`).

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};

use super::{BestOfEachBox, Candidate, Common, Decoder, sigmoid};
use crate::dyn_layer::{Arity, bad_param};
use crate::layer::Result;

const TYPE: &str = "Yolov3DetectionOutput";

/// The fork's `Yolov3DetectionOutputParameter`.
pub(crate) static YOLOV3_DETECTION_OUTPUT_PARAMETER: MessageSchema = MessageSchema {
    name: "Yolov3DetectionOutputParameter",
    fields: &[
        FieldSchema::optional("num_classes", 1, FieldKind::UInt32)
            .with_default(FieldDefault::Int(20)),
        FieldSchema::optional("num_box", 2, FieldKind::UInt32).with_default(FieldDefault::Int(3)),
        FieldSchema::optional("confidence_threshold", 3, FieldKind::Float)
            .with_default(FieldDefault::Float(0.01)),
        FieldSchema::optional("nms_threshold", 4, FieldKind::Float)
            .with_default(FieldDefault::Float(0.45)),
        FieldSchema::repeated("biases", 5, FieldKind::Float),
        FieldSchema::repeated("anchors_scale", 6, FieldKind::UInt32),
        FieldSchema::optional("mask_group_num", 7, FieldKind::UInt32)
            .with_default(FieldDefault::Int(2)),
        FieldSchema::repeated("mask", 8, FieldKind::UInt32),
        FieldSchema::optional("gaussian_box", 9, FieldKind::Bool)
            .with_default(FieldDefault::Bool(false)),
    ],
};

/// `yolov3_detection_output_param`, field 602 as in the fork.
pub(crate) const YOLOV3_DETECTION_OUTPUT_FIELD: FieldSchema = FieldSchema::optional(
    "yolov3_detection_output_param",
    602,
    FieldKind::Message(&YOLOV3_DETECTION_OUTPUT_PARAMETER),
);

/// YOLOv3's decoding: bottom `t` (one per `mask_group_num`) holds each
/// cell's `num_box` boxes, box `n`'s fields in channels `n·len` on, and
/// takes its anchors through the `mask`s of its group, in pixels of an
/// input `anchors_scale[t]` times its map.
pub(crate) struct YoloV3 {
    classes: usize,
    boxes: usize,
    biases: Vec<f32>,
    anchors_scale: Vec<usize>,
    groups: usize,
    mask: Vec<usize>,
    gaussian: bool,
}

impl YoloV3 {
    /// The decoder and the layer's message, checked.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<(Self, ParamMessage)> {
        let Common {
            param: p,
            classes,
            boxes,
            biases,
        } = Common::read(
            layer,
            &YOLOV3_DETECTION_OUTPUT_FIELD,
            &YOLOV3_DETECTION_OUTPUT_PARAMETER,
            "set up Yolov3DetectionOutput",
        )?;
        let bad = |detail: String| bad_param("set up Yolov3DetectionOutput", detail);
        let groups = p.uint("mask_group_num") as usize;
        if groups == 0 {
            return Err(bad("mask_group_num must be at least 1".into()));
        }
        let mask: Vec<usize> = p.uints("mask").into_iter().map(|m| m as usize).collect();
        let anchors_scale: Vec<usize> = p
            .uints("anchors_scale")
            .into_iter()
            .map(|s| s as usize)
            .collect();
        // Bottom t's box n takes mask[n + t * (masks / groups)].
        let per_group = mask.len() / groups;
        if per_group < boxes {
            return Err(bad(format!(
                "{} masks for {groups} groups of {boxes} boxes: each box of each group needs \
                 its mask",
                mask.len()
            )));
        }
        if let Some(m) = mask.iter().find(|&&m| 2 * m + 1 >= biases.len()) {
            return Err(bad(format!(
                "mask {m} names anchor {m}, but the {} biases hold {} anchors",
                biases.len(),
                biases.len() / 2
            )));
        }
        if anchors_scale.len() < groups || anchors_scale.contains(&0) {
            return Err(bad(format!(
                "anchors_scale gives {:?}: each of the {groups} bottoms needs a positive scale",
                anchors_scale
            )));
        }
        Ok((
            Self {
                classes,
                boxes,
                biases,
                anchors_scale,
                groups,
                mask,
                gaussian: p.boolean("gaussian_box"),
            },
            p,
        ))
    }

    /// Channels of one box: 4 coordinates (8 with their uncertainties),
    /// objectness, the classes.
    fn len(&self) -> usize {
        (if self.gaussian { 9 } else { 5 }) + self.classes
    }
}

impl Decoder for YoloV3 {
    fn type_name(&self) -> &'static str {
        TYPE
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(self.groups)
    }

    fn layout(&self) -> (usize, usize, usize) {
        (self.boxes, self.len() - self.classes, self.classes)
    }

    fn candidates(
        &self,
        bottoms: &[(&[usize], &[f32])],
        image: usize,
        threshold: f32,
        found: &mut BestOfEachBox,
    ) {
        let per_group = self.mask.len() / self.groups;
        for (t, &(shape, values)) in bottoms.iter().enumerate() {
            let (channels, height, width) = (shape[1], shape[2], shape[3]);
            let plane = height * width;
            let item = &values[image * channels * plane..][..channels * plane];
            // The input's size in pixels, which the anchors are given in.
            let (net_w, net_h) = (
                (width * self.anchors_scale[t]) as f32,
                (height * self.anchors_scale[t]) as f32,
            );
            for cell in 0..plane {
                let (row, col) = (cell / width, cell % width);
                for n in 0..self.boxes {
                    let field = |k: usize| item[(n * self.len() + k) * plane + cell];
                    let (tx, ty, tw, th, objectness, first_class) = if self.gaussian {
                        let certainty = [1, 3, 5, 7]
                            .iter()
                            .fold(4.0, |left, &k| left - f64::from(sigmoid(field(k))));
                        let objectness = (f64::from(sigmoid(field(8))) * certainty / 4.0) as f32;
                        let (x, y) = (sigmoid(field(0)), sigmoid(field(2)));
                        (x, y, field(4), field(6), objectness, 9)
                    } else {
                        let (x, y) = (sigmoid(field(0)), sigmoid(field(1)));
                        (x, y, field(2), field(3), sigmoid(field(4)), 5)
                    };
                    // A class's score is its sigmoid, at most 1, times
                    // the objectness: none passes where that does not.
                    if objectness <= threshold {
                        continue;
                    }
                    let anchor = self.mask[n + t * per_group];
                    let (x, y) = (
                        (col as f32 + tx) / width as f32,
                        (row as f32 + ty) / height as f32,
                    );
                    let w = tw.exp() * self.biases[2 * anchor] / net_w;
                    let h = th.exp() * self.biases[2 * anchor + 1] / net_h;
                    for class in 0..self.classes {
                        let confidence = sigmoid(field(first_class + class)) * objectness;
                        if confidence > threshold {
                            found.push(Candidate {
                                x,
                                y,
                                w,
                                h,
                                class,
                                confidence,
                            });
                        }
                    }
                }
            }
        }
    }
}
