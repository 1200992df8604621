//! The layers of the YOLO Caffe forks (eric612/MobileNet-YOLO, after
//! darknet): the training losses `Yolov3` (in [`loss`]) and YOLOv2's
//! `RegionLoss` (in [`region_loss`]), the segmentation head's `YoloSeg`
//! and `SegmentationEvaluate` (in [`segmentation`]), the training-time
//! `AssistedExcitation` (in [`assisted_excitation`]), and the detection outputs
//! `YoloDetectionOutput` (YOLOv2's region boxes, a
//! softmax over the classes) and `Yolov3DetectionOutput` (YOLOv3's boxes
//! at several scales, a sigmoid per class, and Gaussian YOLOv3's
//! uncertain boxes). Each decodes every cell's boxes, keeps those
//! whose confidence passes the threshold, sorts them best first,
//! suppresses any box that overlaps a kept one by `nms_threshold` or
//! more (whatever its class, as the fork does), and writes the kept
//! boxes as rows `[image, label, confidence, xmin, ymin, xmax, ymax]`,
//! label 1 for the first class, coordinates relative to the image and
//! not clipped. On the host whatever the device, no backward, and the
//! rows found at reshape, as the SSD fork's `DetectionOutput`.
//!
//! Where blobflow differs from the fork: each image of a batch keeps
//! its own boxes, under its own index (the fork pools every image's
//! boxes and labels them all image 0; at batch 1, as deployed, the two
//! agree); boxes of equal confidence keep the order the cells gave them
//! (the fork's `std::sort` leaves it open); and `YoloDetectionOutput`
//! divides by the map's own height and width (the fork takes its width
//! for both, so only square maps decoded right there).

mod assisted_excitation;
mod loss;
mod overlap;
mod region_loss;
mod segmentation;
mod truth;
mod v2;
mod v3;

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::detection_output::{nothing_detected, write_rows};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

pub(crate) use assisted_excitation::AssistedExcitationLayer;
pub(crate) use loss::{YOLOV3_FIELD, Yolov3LossLayer};
pub(crate) use region_loss::{REGION_LOSS_FIELD, RegionLossLayer};
pub(crate) use segmentation::{
    SEGMENTATION_EVALUATE_FIELD, SegmentationEvaluateLayer, YOLO_SEG_FIELD, YoloSegLayer,
};
pub use truth::YOLO_LABEL_ROWS;
pub(crate) use v2::{YOLO_DETECTION_OUTPUT_FIELD, YoloV2};
pub(crate) use v3::{YOLOV3_DETECTION_OUTPUT_FIELD, YoloV3};

/// What the YOLO losses' backward passes share: the refusal of a
/// gradient to the labels, and each delta's factor (the top's gradient
/// over the batch); `None` where bottom 0 takes no gradient.
fn delta_scale<T: MathElement>(
    (op, layer): (&'static str, &str),
    ready: bool,
    down: &[bool],
    top: &Blob<T>,
    images: usize,
) -> Result<Option<f32>> {
    if down.get(1) == Some(&true) {
        return Err(bad_param(
            op,
            format!("{layer} Layer cannot backpropagate to label inputs."),
        ));
    }
    if !down[0] {
        return Ok(None);
    }
    if !ready {
        return Err(bad_param(
            op,
            "backward before any forward: the deltas come from forward",
        ));
    }
    Ok(Some(top.cpu_diff()?[0].to_f64() as f32 / images as f32))
}

/// Bottom 0's gradient from a YOLO loss's deltas: each times `alpha`
/// (what [`delta_scale`] gave).
fn write_gradient<T: MathElement>(bottom: &Blob<T>, alpha: f32, deltas: &[f32]) -> Result<()> {
    let mut diff = bottom.mutable_cpu_diff()?;
    for (d, &delta) in diff.iter_mut().zip(deltas) {
        *d = T::from_f64(f64::from(alpha * delta));
    }
    Ok(())
}

/// A box that passed the confidence threshold: centre and size relative
/// to the image, its class (from 0) and confidence.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Candidate {
    x: f32,
    y: f32,
    w: f32,
    h: f32,
    class: usize,
    confidence: f32,
}

/// The fork's `sigmoid`: `1 / (1 + exp(-x))`.
fn sigmoid(x: f32) -> f32 {
    (1.0 / (1.0 + f64::from(-x).exp())) as f32
}

/// The fork's `box_iou` of two centre-size boxes, in its order of
/// operations: no overlap on either axis is no intersection.
fn center_iou(a: &Candidate, b: &Candidate) -> f32 {
    let overlap = |x1: f32, w1: f32, x2: f32, w2: f32| {
        let left = (x1 - w1 / 2.0).max(x2 - w2 / 2.0);
        let right = (x1 + w1 / 2.0).min(x2 + w2 / 2.0);
        right - left
    };
    let (w, h) = (overlap(a.x, a.w, b.x, b.w), overlap(a.y, a.h, b.y, b.h));
    let intersection = if w < 0.0 || h < 0.0 { 0.0 } else { w * h };
    intersection / (a.w * a.h + b.w * b.h - intersection)
}

/// The fork's `ApplyNms` over boxes sorted best first: a box goes when
/// a better box still kept overlaps it by `threshold` or more. Checking
/// each box against the kept ones alone gives the fork's result (a box
/// it suppressed suppresses nothing) in time proportional to the boxes
/// times those kept.
fn suppress(sorted: &[Candidate], threshold: f32) -> Vec<Candidate> {
    let mut kept = Kept::default();
    for c in sorted {
        if !kept.suppresses(c, threshold) {
            kept.push(*c);
        }
    }
    kept.boxes
}

/// The kept boxes, and their edges and areas side by side, so that a
/// box is held to all of them in vector lanes. Each edge is the one
/// `center_iou` computes, so the overlaps are the same to the bit.
#[derive(Default)]
struct Kept {
    boxes: Vec<Candidate>,
    left: Vec<f32>,
    right: Vec<f32>,
    top: Vec<f32>,
    bottom: Vec<f32>,
    area: Vec<f32>,
}

impl Kept {
    fn push(&mut self, c: Candidate) {
        self.boxes.push(c);
        self.left.push(c.x - c.w / 2.0);
        self.right.push(c.x + c.w / 2.0);
        self.top.push(c.y - c.h / 2.0);
        self.bottom.push(c.y + c.h / 2.0);
        self.area.push(c.w * c.h);
    }

    /// Whether a kept box overlaps `c` by `threshold` or more: lanes of
    /// 64 boxes each, the first lane with one ending the search.
    fn suppresses(&self, c: &Candidate, threshold: f32) -> bool {
        let (left, right) = (c.x - c.w / 2.0, c.x + c.w / 2.0);
        let (top, bottom) = (c.y - c.h / 2.0, c.y + c.h / 2.0);
        let area = c.w * c.h;
        let n = self.boxes.len();
        (0..n).step_by(64).any(|start| {
            let end = n.min(start + 64);
            let mut hit = false;
            for i in start..end {
                let w = self.right[i].min(right) - self.left[i].max(left);
                let h = self.bottom[i].min(bottom) - self.top[i].max(top);
                let intersection = if w < 0.0 || h < 0.0 { 0.0 } else { w * h };
                hit |= intersection / (self.area[i] + area - intersection) >= threshold;
            }
            hit
        })
    }
}

/// The candidates `suppress` could keep, gathered in their order as the
/// decoder finds them: of a run of candidates with the same box
/// (YOLOv3's classes of one anchor box), only the first of the best.
/// Each of the others comes after it in the sorted order and overlaps
/// it wholly, so whichever kept box suppresses it, or it itself,
/// suppresses them too; a degenerate box (no area, its overlap with
/// itself not a number) keeps its run whole, as the fork would. YOLOv3
/// at the fork's threshold of 0.01 otherwise sends the suppression
/// every class of every box.
pub(crate) struct BestOfEachBox {
    kept: Vec<Candidate>,
    run_start: usize,
    nms_threshold: f32,
}

impl BestOfEachBox {
    fn new(nms_threshold: f32) -> Self {
        Self {
            kept: Vec::new(),
            run_start: 0,
            nms_threshold,
        }
    }

    pub(crate) fn push(&mut self, c: Candidate) {
        let same_box = |a: &Candidate| {
            [a.x, a.y, a.w, a.h].map(f32::to_bits) == [c.x, c.y, c.w, c.h].map(f32::to_bits)
        };
        match self.kept.last() {
            Some(last) if same_box(last) && center_iou(&c, &c) >= self.nms_threshold => {
                // The run's one entry is its best so far.
                if c.confidence > self.kept[self.run_start].confidence {
                    self.kept[self.run_start] = c;
                }
            }
            _ => {
                self.run_start = self.kept.len();
                self.kept.push(c);
            }
        }
    }
}

/// What both forks' messages give, checked: the message (defaults
/// filled), `num_classes` (which the forks require), `num_box` and
/// the anchors (`biases`, width and height pairs).
struct Common {
    param: ParamMessage,
    classes: usize,
    boxes: usize,
    biases: Vec<f32>,
}

impl Common {
    /// `field` of `layer`, of schema `schema`, read for layer type `op`.
    fn read(
        layer: &ParamMessage,
        field: &FieldSchema,
        schema: &'static MessageSchema,
        op: &'static str,
    ) -> Result<Self> {
        let param = crate::fork_layers::fork_param(layer, field, schema);
        if !param.has("num_classes") {
            return Err(bad_param(
                op,
                format!(
                    "{} must give num_classes (the fork requires it)",
                    field.name
                ),
            ));
        }
        let (classes, boxes) = (
            param.uint("num_classes") as usize,
            param.uint("num_box") as usize,
        );
        if classes == 0 || boxes == 0 {
            return Err(bad_param(
                op,
                format!("num_classes ({classes}) and num_box ({boxes}) must be at least 1"),
            ));
        }
        let biases = param
            .floats("biases")
            .into_iter()
            .map(|b| b as f32)
            .collect();
        Ok(Self {
            param,
            classes,
            boxes,
            biases,
        })
    }
}

/// How one fork turns its bottoms into each image's candidates.
pub(crate) trait Decoder: Send {
    /// The fork's type name.
    fn type_name(&self) -> &'static str;
    /// How many bottoms it reads.
    fn bottoms(&self) -> Arity;
    /// Boxes a cell, and each box's fields before its class scores
    /// and its classes.
    fn layout(&self) -> (usize, usize, usize);
    /// Refuses bottoms the parameters cannot read, naming what is wrong:
    /// each must be `N x boxes·(fields + classes) x H x W`, `N` the first
    /// bottom's.
    fn check(&self, bottoms: &[&[usize]]) -> Result<()> {
        let (boxes, fields, classes) = self.layout();
        let images = bottoms[0].first().copied().unwrap_or(0);
        let what = format!("{boxes} boxes of {fields} + {classes} classes a cell");
        for (i, shape) in bottoms.iter().enumerate() {
            check_bottom(
                self.type_name(),
                i,
                shape,
                images,
                boxes * (fields + classes),
                &what,
            )?;
        }
        Ok(())
    }
    /// Image `image`'s boxes whose confidence passes `threshold`, into
    /// `found` in the fork's order (bottom, cell, box, class).
    fn candidates(
        &self,
        bottoms: &[(&[usize], &[f32])],
        image: usize,
        threshold: f32,
        found: &mut BestOfEachBox,
    );
}

/// A YOLO detection output: see the [module](self) documentation.
pub(crate) struct YoloDetectionOutputLayer<D> {
    decoder: D,
    confidence_threshold: f32,
    nms_threshold: f32,
    /// The rows found at the last reshape, or why there are none.
    rows: Result<Vec<[f32; 7]>>,
}

impl<D: Decoder> YoloDetectionOutputLayer<D> {
    /// The layer from its decoder and the thresholds of its message
    /// `param`, checked.
    pub(crate) fn new(decoder: D, param: &ParamMessage) -> Result<Self> {
        let (confidence, nms) = (
            param.float("confidence_threshold") as f32,
            param.float("nms_threshold") as f32,
        );
        for (name, v) in [("confidence_threshold", confidence), ("nms_threshold", nms)] {
            if !v.is_finite() {
                return Err(bad_param(
                    decoder.type_name(),
                    format!("{name} must be a finite number, not {v}"),
                ));
            }
        }
        Ok(Self {
            decoder,
            confidence_threshold: confidence,
            nms_threshold: nms,
            rows: Ok(Vec::new()),
        })
    }

    /// Every image's kept boxes as rows (the shapes checked), or one
    /// empty row per image
    /// when no image has any (the fork's "nothing detected").
    fn detect<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<Vec<[f32; 7]>> {
        let shapes: Vec<&[usize]> = bottoms.iter().map(|b| b.shape()).collect();
        let values: Vec<Vec<f32>> = bottoms
            .iter()
            .map(|b| Ok(b.cpu_data()?.iter().map(|v| v.to_f64() as f32).collect()))
            .collect::<Result<_>>()?;
        let inputs: Vec<(&[usize], &[f32])> = shapes
            .iter()
            .zip(&values)
            .map(|(s, v)| (*s, v.as_slice()))
            .collect();
        let images = shapes[0][0];
        let mut rows = Vec::new();
        for image in 0..images {
            let mut best = BestOfEachBox::new(self.nms_threshold);
            self.decoder
                .candidates(&inputs, image, self.confidence_threshold, &mut best);
            let mut found = best.kept;
            found.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
            for c in suppress(&found, self.nms_threshold) {
                let (x, y, w, h) = (
                    f64::from(c.x),
                    f64::from(c.y),
                    f64::from(c.w),
                    f64::from(c.h),
                );
                rows.push([
                    image as f32,
                    (c.class + 1) as f32,
                    c.confidence,
                    (x - w / 2.0) as f32,
                    (y - h / 2.0) as f32,
                    (x + w / 2.0) as f32,
                    (y + h / 2.0) as f32,
                ]);
            }
        }
        if rows.is_empty() {
            rows = nothing_detected(images);
        }
        Ok(rows)
    }
}

impl<T: MathElement, D: Decoder> DynLayer<T> for YoloDetectionOutputLayer<D> {
    fn type_name(&self) -> &str {
        self.decoder.type_name()
    }

    fn bottoms(&self) -> Arity {
        self.decoder.bottoms()
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let shapes: Vec<&[usize]> = bottoms.iter().map(|b| b.shape()).collect();
        self.decoder.check(&shapes)?;
        self.rows = self.detect(bottoms);
        let rows = self.rows.as_ref().map_or(1, Vec::len);
        Ok(vec![TopShape::new(vec![1, 1, rows, 7])])
    }

    fn forward(&mut self, _bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        write_rows(&mut self.rows, tops[0])
    }

    fn backward(&mut self, _tops: &[&Blob<T>], down: &[bool], _bottoms: &[&Blob<T>]) -> Result<()> {
        if down.iter().any(|&d| d) {
            return Err(bad_param(
                self.decoder.type_name(),
                "a YOLO detection output has no backward pass (as in the fork)",
            ));
        }
        Ok(())
    }

    fn allow_force_backward(&self, _bottom: usize) -> bool {
        false
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}

/// Refuses a bottom that is not `N x channels x H x W` with `N` the
/// first bottom's, naming the layer, the bottom and what was expected.
fn check_bottom(
    layer: &'static str,
    index: usize,
    shape: &[usize],
    images: usize,
    channels: usize,
    what: &str,
) -> Result<()> {
    if shape.len() == 4 && shape[0] == images && shape[1] == channels {
        return Ok(());
    }
    let given = shape
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    Err(bad_param(
        layer,
        format!(
            "bottom {index} has shape {given}, but {what} makes it {images} x {channels} x H x W"
        ),
    ))
}
