//! `YoloDetectionOutput`: YOLOv2's region boxes (the fork's
//! `yolo_detection_output_layer.cpp`).

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};

use super::{BestOfEachBox, Candidate, Common, Decoder, sigmoid};
use crate::dyn_layer::{Arity, bad_param};
use crate::layer::Result;

const TYPE: &str = "YoloDetectionOutput";

/// The fork's `YoloDetectionOutputParameter`.
pub(crate) static YOLO_DETECTION_OUTPUT_PARAMETER: MessageSchema = MessageSchema {
    name: "YoloDetectionOutputParameter",
    fields: &[
        FieldSchema::optional("side", 1, FieldKind::UInt32).with_default(FieldDefault::Int(13)),
        FieldSchema::optional("num_classes", 2, FieldKind::UInt32)
            .with_default(FieldDefault::Int(20)),
        FieldSchema::optional("num_box", 3, FieldKind::UInt32).with_default(FieldDefault::Int(5)),
        FieldSchema::optional("coords", 4, FieldKind::UInt32).with_default(FieldDefault::Int(4)),
        FieldSchema::optional("confidence_threshold", 5, FieldKind::Float)
            .with_default(FieldDefault::Float(0.01)),
        FieldSchema::optional("nms_threshold", 6, FieldKind::Float)
            .with_default(FieldDefault::Float(0.45)),
        FieldSchema::repeated("biases", 7, FieldKind::Float),
        FieldSchema::optional("label_map_file", 8, FieldKind::String),
    ],
};

/// `yolo_detection_output_param`, field 601 as in the fork.
pub(crate) const YOLO_DETECTION_OUTPUT_FIELD: FieldSchema = FieldSchema::optional(
    "yolo_detection_output_param",
    601,
    FieldKind::Message(&YOLO_DETECTION_OUTPUT_PARAMETER),
);

/// YOLOv2's decoding: each cell's `num_box` boxes, box `n`'s fields in
/// channels `n·(5 + classes)` on (x, y, w, h, objectness, class scores);
/// the same anchors (`biases`, in cells) for one or two bottoms.
pub(crate) struct YoloV2 {
    classes: usize,
    boxes: usize,
    biases: Vec<f32>,
}

impl YoloV2 {
    /// The decoder and the layer's message, checked.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<(Self, ParamMessage)> {
        let op = "set up YoloDetectionOutput";
        let Common {
            param,
            classes,
            boxes,
            biases,
        } = Common::read(
            layer,
            &YOLO_DETECTION_OUTPUT_FIELD,
            &YOLO_DETECTION_OUTPUT_PARAMETER,
            op,
        )?;
        if param.uint("coords") != 4 {
            return Err(bad_param(
                op,
                format!(
                    "coords is {}: the fork reads 4 coordinates whatever it says",
                    param.uint("coords")
                ),
            ));
        }
        if biases.len() < 2 * boxes {
            return Err(bad_param(
                op,
                format!(
                    "{} biases for {boxes} boxes: each box needs its anchor's width and height",
                    biases.len()
                ),
            ));
        }
        Ok((
            Self {
                classes,
                boxes,
                biases,
            },
            param,
        ))
    }

    fn fields(&self) -> usize {
        5 + self.classes
    }
}

impl Decoder for YoloV2 {
    fn type_name(&self) -> &'static str {
        TYPE
    }

    fn bottoms(&self) -> Arity {
        Arity::range(1, 2)
    }

    fn layout(&self) -> (usize, usize, usize) {
        (self.boxes, 5, self.classes)
    }

    fn candidates(
        &self,
        bottoms: &[(&[usize], &[f32])],
        image: usize,
        threshold: f32,
        found: &mut BestOfEachBox,
    ) {
        for &(shape, values) in bottoms {
            let (channels, height, width) = (shape[1], shape[2], shape[3]);
            let plane = height * width;
            let item = &values[image * channels * plane..][..channels * plane];
            let mut scores = vec![0.0f32; self.classes];
            for row in 0..height {
                for col in 0..width {
                    for n in 0..self.boxes {
                        let field =
                            |k: usize| item[(n * self.fields() + k) * plane + row * width + col];
                        let objectness = sigmoid(field(4));
                        // The fork's softmax: the largest score first taken
                        // off, the first of equal maxima the class.
                        let largest = (0..self.classes)
                            .map(|c| field(5 + c))
                            .fold(f32::MIN, f32::max);
                        let mut sum = 0.0f32;
                        for (c, s) in scores.iter_mut().enumerate() {
                            *s = (field(5 + c) - largest).exp();
                            sum += *s;
                        }
                        let (mut class, mut best) = (0, scores[0] / sum);
                        for (c, s) in scores.iter().enumerate() {
                            if s / sum > best {
                                (class, best) = (c, s / sum);
                            }
                        }
                        let confidence = objectness * best;
                        if confidence >= threshold {
                            found.push(Candidate {
                                x: (col as f32 + sigmoid(field(0))) / width as f32,
                                y: (row as f32 + sigmoid(field(1))) / height as f32,
                                w: field(2).exp() * self.biases[2 * n] / width as f32,
                                h: field(3).exp() * self.biases[2 * n + 1] / height as f32,
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
