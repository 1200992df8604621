//! `Yolov3`: YOLOv3's training loss at one scale, as the YOLO fork
//! (eric612/MobileNet-YOLO, `yolov3_layer.cpp`) computes it.
//!
//! Bottoms: the scale's predictions `(N, num·(5 + classes), H, W)` (box
//! `n`'s x, y, w, h, objectness and class scores in channels `n·len` on)
//! and the labels `(N, 1, 300, 5)` that `AnnotatedData` writes with
//! `yolo_data_type: 1` (each image's boxes as rows of class (from 0),
//! centre x, y, width, height, relative to the image; the first row of
//! zeros ends them). The top is the loss.
//!
//! Each prediction's x, y, objectness and classes go through a sigmoid
//! (w and h stay as they are). Every box of every cell learns "no
//! object" (its objectness towards 0) unless it overlaps some true box
//! by more than `thresh`. Each true box is then given to the cell its
//! centre falls in and to the anchor of all `biases` whose shape
//! overlaps it best, if this scale's `mask` holds that anchor (and to
//! the scale's other anchors that overlap it by more than `iou_thresh`):
//! that box learns its coordinates (darknet's squared error on the box
//! codes, scaled by `coord_scale · (2 - w·h)`, or the gradient of the
//! overlap `iou_loss` names), its objectness towards 1 and its classes
//! (towards 1 for the true one and 0 for the others, smoothed by
//! `label_smooth_eps`, or the focal loss). The gradient is these
//! deltas divided by the batch; the loss is their squares' sum (with
//! the overlap losses, the classes' and objectness' squares and
//! `iou_normalizer` times the mean of 1 - overlap) over the batch.
//!
//! As the fork, on the host whatever the device, in float. The fork's
//! quirks are kept, since trained models depend on them: the deltas of
//! x and y are taken against their sigmoid outputs (through the sigmoid
//! only with `use_logic_gradient`), `object_scale` counts only with
//! `use_logic_gradient` and `noobject_scale` not at all, the best anchor
//! can be given a box twice when `iou_thresh` is below 1 (the fork
//! compares the anchor's index with its place in the mask), and the
//! overlap losses report DIoU for plain IoU. Departures: a true box's
//! cell is clipped into the map (the fork reads outside it for a centre
//! on the right or bottom edge), and a class outside `num_class` is an
//! error naming the image and the row (the fork writes outside its
//! buffers).

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use super::overlap::{CenterBox, IouLoss, overlap_gradient};
use super::truth::{cell_of, check_labels, class_of, rows, truth_of};
use super::{delta_scale, sigmoid};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

const OP: &str = "set up Yolov3";
const RUN: &str = "run Yolov3";

static IOU_LOSS: blob_proto::schema::EnumSchema = blob_proto::schema::EnumSchema {
    name: "IOU_LOSS",
    values: &[
        ("IOU", 0),
        ("GIOU", 1),
        ("MSE", 2),
        ("DIOU", 3),
        ("CIOU", 4),
    ],
};

/// The fork's `Yolov3Parameter`.
pub(crate) static YOLOV3_PARAMETER: MessageSchema = MessageSchema {
    name: "Yolov3Parameter",
    fields: &[
        FieldSchema::optional("side", 1, FieldKind::UInt32).with_default(FieldDefault::Int(13)),
        FieldSchema::optional("num_class", 2, FieldKind::UInt32)
            .with_default(FieldDefault::Int(20)),
        FieldSchema::optional("num", 3, FieldKind::UInt32).with_default(FieldDefault::Int(5)),
        FieldSchema::optional("object_scale", 4, FieldKind::Float)
            .with_default(FieldDefault::Float(1.0)),
        FieldSchema::optional("class_scale", 5, FieldKind::Float)
            .with_default(FieldDefault::Float(1.0)),
        FieldSchema::optional("noobject_scale", 6, FieldKind::Float)
            .with_default(FieldDefault::Float(0.5)),
        FieldSchema::optional("coord_scale", 7, FieldKind::Float)
            .with_default(FieldDefault::Float(5.0)),
        FieldSchema::optional("thresh", 8, FieldKind::Float).with_default(FieldDefault::Float(0.2)),
        FieldSchema::optional("anchors_scale", 10, FieldKind::UInt32)
            .with_default(FieldDefault::Int(32)),
        FieldSchema::repeated("biases", 11, FieldKind::Float),
        FieldSchema::repeated("mask", 12, FieldKind::UInt32),
        FieldSchema::optional("use_logic_gradient", 13, FieldKind::Bool)
            .with_default(FieldDefault::Bool(false)),
        FieldSchema::optional("use_focal_loss", 14, FieldKind::Bool)
            .with_default(FieldDefault::Bool(false)),
        FieldSchema::optional("iou_loss", 15, FieldKind::Enum(&IOU_LOSS))
            .with_default(FieldDefault::Int(2)),
        FieldSchema::optional("iou_normalizer", 16, FieldKind::Float)
            .with_default(FieldDefault::Float(0.25)),
        FieldSchema::optional("iou_thresh", 17, FieldKind::Float)
            .with_default(FieldDefault::Float(0.5)),
        FieldSchema::optional("max_delta", 18, FieldKind::Float)
            .with_default(FieldDefault::Float(10.0)),
        FieldSchema::optional("accumulate", 19, FieldKind::Bool)
            .with_default(FieldDefault::Bool(true)),
        FieldSchema::optional("label_smooth_eps", 20, FieldKind::Float)
            .with_default(FieldDefault::Float(0.1)),
    ],
};

/// `yolov3_param`, field 603 as in the fork.
pub(crate) const YOLOV3_FIELD: FieldSchema =
    FieldSchema::optional("yolov3_param", 603, FieldKind::Message(&YOLOV3_PARAMETER));

/// The layer's `yolov3_param`, checked.
#[derive(Clone, Debug)]
struct Settings {
    classes: usize,
    /// Boxes a cell (`num`), each with its anchor `mask[n]`.
    boxes: usize,
    object_scale: f32,
    class_scale: f32,
    coord_scale: f32,
    thresh: f32,
    anchors_scale: usize,
    /// Every scale's anchors, width and height pairs in input pixels.
    biases: Vec<f32>,
    mask: Vec<usize>,
    logic_gradient: bool,
    focal: bool,
    iou_loss: IouLoss,
    iou_normalizer: f32,
    iou_thresh: f32,
    max_delta: f32,
    accumulate: bool,
    label_smooth_eps: f32,
}

impl Settings {
    fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(layer, &YOLOV3_FIELD, &YOLOV3_PARAMETER);
        let classes = p.uint("num_class") as usize;
        let boxes = p.uint("num") as usize;
        let anchors_scale = p.uint("anchors_scale") as usize;
        if classes == 0 || boxes == 0 || anchors_scale == 0 {
            return Err(bad_param(
                OP,
                format!(
                    "num_class ({classes}), num ({boxes}) and anchors_scale ({anchors_scale}) \
                     must be at least 1"
                ),
            ));
        }
        let biases: Vec<f32> = p.floats("biases").into_iter().map(|b| b as f32).collect();
        if biases.is_empty() || !biases.len().is_multiple_of(2) {
            return Err(bad_param(
                OP,
                format!(
                    "biases are anchors' width and height pairs: {} values",
                    biases.len()
                ),
            ));
        }
        if let Some(b) = biases.iter().find(|b| !(b.is_finite() && **b > 0.0)) {
            return Err(bad_param(
                OP,
                format!("an anchor's side must be above 0, not {b}"),
            ));
        }
        let mask: Vec<usize> = p.uints("mask").into_iter().map(|m| m as usize).collect();
        if mask.len() != boxes {
            return Err(bad_param(
                OP,
                format!(
                    "mask names one anchor for each of the num ({boxes}) boxes a cell, \
                     but has {} values",
                    mask.len()
                ),
            ));
        }
        let anchors = biases.len() / 2;
        if let Some(m) = mask.iter().find(|&&m| m >= anchors) {
            return Err(bad_param(
                OP,
                format!("mask {m} names no anchor: biases hold {anchors}"),
            ));
        }
        let iou_loss = IouLoss::from_name(p.enum_name("iou_loss")).ok_or_else(|| {
            bad_param(
                OP,
                format!(
                    "unknown iou_loss {} (IOU, GIOU, MSE, DIOU, CIOU)",
                    p.enum_name("iou_loss")
                ),
            )
        })?;
        Ok(Self {
            classes,
            boxes,
            object_scale: p.float("object_scale") as f32,
            class_scale: p.float("class_scale") as f32,
            coord_scale: p.float("coord_scale") as f32,
            thresh: p.float("thresh") as f32,
            anchors_scale,
            biases,
            mask,
            logic_gradient: p.boolean("use_logic_gradient"),
            focal: p.boolean("use_focal_loss"),
            iou_loss,
            iou_normalizer: p.float("iou_normalizer") as f32,
            iou_thresh: p.float("iou_thresh") as f32,
            max_delta: p.float("max_delta") as f32,
            accumulate: p.boolean("accumulate"),
            label_smooth_eps: p.float("label_smooth_eps") as f32,
        })
    }

    /// The values a box has a cell: x, y, w, h, objectness, classes.
    fn len(&self) -> usize {
        5 + self.classes
    }

    /// The anchor `anchor`'s shape relative to an input of `w x h`
    /// cells, centred on 0.
    fn anchor_box(&self, anchor: usize, (w, h): (usize, usize)) -> CenterBox {
        CenterBox {
            x: 0.0,
            y: 0.0,
            w: self.biases[2 * anchor] / (w * self.anchors_scale) as f32,
            h: self.biases[2 * anchor + 1] / (h * self.anchors_scale) as f32,
        }
    }
}

/// One image's map: its activated predictions (sigmoids but for w and
/// h), where its deltas go, its size.
struct Map<'a> {
    activated: &'a [f32],
    delta: &'a mut [f32],
    /// Cells a plane (`H·W`).
    stride: usize,
    width: usize,
    height: usize,
}

impl Map<'_> {
    /// The fork's `get_region_box`: box `index`'s prediction in cell
    /// `(i, j)` with anchor `anchor`.
    fn predicted(
        &self,
        s: &Settings,
        anchor: usize,
        index: usize,
        (i, j): (usize, usize),
    ) -> CenterBox {
        let a = self.activated;
        let st = self.stride;
        let (w, h) = (self.width, self.height);
        CenterBox {
            x: (i as f32 + a[index]) / w as f32,
            y: (j as f32 + a[index + st]) / h as f32,
            w: a[index + 2 * st].exp() * s.biases[2 * anchor] / (w * s.anchors_scale) as f32,
            h: a[index + 3 * st].exp() * s.biases[2 * anchor + 1] / (h * s.anchors_scale) as f32,
        }
    }

    /// The fork's `delta_region_box`: box `index`'s coordinate deltas
    /// towards `truth`; returns the overlap it measured.
    fn box_delta(
        &mut self,
        s: &Settings,
        truth: &CenterBox,
        anchor: usize,
        index: usize,
        cell: (usize, usize),
        scale: f32,
    ) -> f32 {
        let st = self.stride;
        let pred = self.predicted(s, anchor, index, cell);
        let (w, h) = (self.width, self.height);
        if s.iou_loss == IouLoss::Mse {
            let target = [
                truth.x * w as f32 - cell.0 as f32,
                truth.y * h as f32 - cell.1 as f32,
                (truth.w * (w * s.anchors_scale) as f32 / s.biases[2 * anchor]).ln(),
                (truth.h * (h * s.anchors_scale) as f32 / s.biases[2 * anchor + 1]).ln(),
            ];
            for (k, t) in target.into_iter().enumerate() {
                let at = index + k * st;
                self.delta[at] = -scale * (t - self.activated[at]);
            }
            return pred.iou(truth);
        }
        let reported = match s.iou_loss {
            IouLoss::Giou => pred.giou(truth),
            IouLoss::Ciou => pred.ciou(truth),
            _ => pred.diou(truth),
        };
        let mut pred = pred;
        if pred.w == 0.0 {
            pred.w = 1.0;
        }
        if pred.h == 0.0 {
            pred.h = 1.0;
        }
        let mut d = overlap_gradient(&pred, truth, s.iou_loss);
        // The exponential's gradient, for w and h alone.
        d[2] *= self.activated[index + 2 * st].exp();
        d[3] *= self.activated[index + 3 * st].exp();
        for (k, v) in d.into_iter().enumerate() {
            let mut v = v * s.iou_normalizer;
            if !v.is_finite() {
                v = 0.0;
            }
            if s.max_delta != f32::MAX {
                v = v.clamp(-s.max_delta, s.max_delta);
            }
            let at = index + k * st;
            if !s.accumulate {
                self.delta[at] = 0.0;
            }
            self.delta[at] += -v;
        }
        reported
    }

    /// The fork's `delta_region_class_v3`: the classes of the box whose
    /// first class score is at `index`, towards `class`.
    fn class_delta(&mut self, s: &Settings, index: usize, class: usize) {
        let st = self.stride;
        let a = self.activated;
        let smooth = |y: f32| {
            if s.label_smooth_eps != 0.0 {
                y * (1.0 - s.label_smooth_eps) + 0.5 * s.label_smooth_eps
            } else {
                y
            }
        };
        let own = index + st * class;
        if self.delta[own] != 0.0 {
            // Already given a box: only its own class again.
            let d = smooth(1.0) - a[own];
            if d.is_finite() {
                self.delta[own] = -s.class_scale * d;
            }
            return;
        }
        if s.focal {
            let pt = a[own] + 1e-15;
            let grad = -(1.0 - pt) * (2.0 * pt * pt.ln() + pt - 1.0);
            for n in 0..s.classes {
                let at = index + st * n;
                let y = if n == class { 1.0 } else { 0.0 };
                self.delta[at] = -s.class_scale * (y - a[at]) * 0.5 * grad;
            }
            return;
        }
        for n in 0..s.classes {
            let at = index + st * n;
            let d = smooth(if n == class { 1.0 } else { 0.0 }) - a[at];
            if d.is_finite() {
                self.delta[at] = -s.class_scale * d;
            }
        }
    }
}

/// What one forward pass leaves for backward and the loss.
#[derive(Default)]
struct Totals {
    /// Boxes given a true box.
    count: usize,
    /// Their 1 - overlap, summed.
    iou_loss: f32,
}

/// The YOLO fork's `Yolov3` loss: see the [module](self) documentation.
pub(crate) struct Yolov3LossLayer {
    s: Settings,
    /// The predictions after their sigmoids.
    activated: Vec<f32>,
    /// The fork's `diff_`: each value's delta.
    delta: Vec<f32>,
    /// Whether a forward pass has filled the deltas.
    ready: bool,
}

impl Yolov3LossLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        Ok(Self {
            s: Settings::from_param(layer)?,
            activated: Vec::new(),
            delta: Vec::new(),
            ready: false,
        })
    }

    /// The predictions' `(N, H, W)`, and the labels' checked against them.
    fn sizes<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<(usize, usize, usize)> {
        let shape = bottoms[0].shape();
        let s = &self.s;
        let channels = s.boxes * s.len();
        if shape.len() != 4 || shape[1] != channels {
            return Err(bad_param(
                OP,
                format!(
                    "bottom 0 must be N x {channels} x H x W ({} boxes of 5 + {} classes a \
                     cell), not {shape:?}",
                    s.boxes, s.classes
                ),
            ));
        }
        check_labels(RUN, bottoms[1], shape[0])?;
        Ok((shape[0], shape[2], shape[3]))
    }

    /// The fork's `Forward_cpu`: every delta, and the totals the loss adds.
    fn deltas(
        &mut self,
        labels: &[f32],
        (images, height, width): (usize, usize, usize),
    ) -> Result<Totals> {
        let s = &self.s;
        let len = s.len();
        let stride = height * width;
        let per_image = s.boxes * len * stride;
        let mut totals = Totals::default();
        for b in 0..images {
            let rows: Vec<&[f32]> = rows(labels, b).collect();
            let mut map = Map {
                activated: &self.activated[b * per_image..][..per_image],
                delta: &mut self.delta[b * per_image..][..per_image],
                stride,
                width,
                height,
            };
            // Every box learns "no object" unless a true box is near.
            for cell in 0..stride {
                let (i, j) = (cell % width, cell / width);
                for n in 0..s.boxes {
                    let index = n * len * stride + cell;
                    let pred = map.predicted(s, s.mask[n], index, (i, j));
                    let mut best: Option<(f32, usize, &[f32])> = None;
                    for (t, r) in rows.iter().enumerate().take_while(|(_, r)| r[1] != 0.0) {
                        let iou = pred.overlap_by(&truth_of(r), s.iou_loss);
                        if iou > best.map_or(0.0, |(v, _, _)| v) {
                            best = Some((iou, t, r));
                        }
                    }
                    let objectness = index + 4 * stride;
                    map.delta[objectness] = map.activated[objectness];
                    let best_iou = best.map_or(0.0, |(v, _, _)| v);
                    if best_iou > s.thresh {
                        map.delta[objectness] = 0.0;
                    }
                    if let Some((iou, t, r)) = best
                        && iou > 1.0
                    {
                        // The fork's branch for an overlap above 1
                        // (rounding alone can give one).
                        map.delta[objectness] = -(1.0 - map.activated[objectness]);
                        let class = class_of(RUN, r, (b, t), s.classes)?;
                        map.class_delta(s, index + 5 * stride, class);
                        let truth = truth_of(r);
                        let scale = s.coord_scale * (2.0 - truth.w * truth.h);
                        map.box_delta(s, &truth, s.mask[n], index, (i, j), scale);
                    }
                }
            }
            // Each true box goes to its cell's best anchors.
            for (t, r) in rows.iter().enumerate().take_while(|(_, r)| r[3] != 0.0) {
                let truth = truth_of(r);
                let class = class_of(RUN, r, (b, t), s.classes)?;
                let (i, j) = cell_of(&truth, (width, height));
                let pos = j * width + i;
                let shape_only = CenterBox {
                    x: 0.0,
                    y: 0.0,
                    ..truth
                };
                let anchor_iou = |a: usize| {
                    s.anchor_box(a, (width, height))
                        .overlap_by(&shape_only, s.iou_loss)
                };
                let mut best_iou = 0.0;
                let mut best_n: Option<usize> = None;
                for a in 0..s.biases.len() / 2 {
                    let iou = anchor_iou(a);
                    if iou > best_iou {
                        best_iou = iou;
                        best_n = Some(a);
                    }
                }
                let learn = |map: &mut Map<'_>, slot: usize, totals: &mut Totals| {
                    let index = slot * len * stride + pos;
                    let scale = s.coord_scale * (2.0 - truth.w * truth.h);
                    let iou = map.box_delta(s, &truth, s.mask[slot], index, (i, j), scale);
                    totals.iou_loss += 1.0 - iou;
                    let objectness = index + 4 * stride;
                    let target = -(1.0 - map.activated[objectness]);
                    map.delta[objectness] = if s.logic_gradient {
                        target * s.object_scale
                    } else {
                        target
                    };
                    map.class_delta(s, index + 5 * stride, class);
                    totals.count += 1;
                };
                // The fork compares later anchors with the best one's
                // place in the mask once the mask holds it.
                let mut compared = best_n;
                if let Some(slot) = best_n.and_then(|a| s.mask.iter().position(|&m| m == a)) {
                    learn(&mut map, slot, &mut totals);
                    compared = Some(slot);
                }
                if s.iou_thresh < 1.0 {
                    for a in 0..s.biases.len() / 2 {
                        let Some(slot) = s.mask.iter().position(|&m| m == a) else {
                            continue;
                        };
                        if Some(a) != compared && anchor_iou(a) > s.iou_thresh {
                            learn(&mut map, slot, &mut totals);
                        }
                    }
                }
            }
        }
        Ok(totals)
    }
}

impl<T: MathElement> DynLayer<T> for Yolov3LossLayer {
    fn type_name(&self) -> &str {
        "Yolov3"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        self.sizes(bottoms)?;
        Ok(vec![TopShape::new(Vec::new())])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        self.ready = false;
        let sizes = self.sizes(bottoms)?;
        let (images, height, width) = sizes;
        let len = self.s.len();
        let stride = height * width;
        let input = bottoms[0].cpu_data()?;
        self.activated.clear();
        self.activated
            .extend(input.iter().enumerate().map(|(at, v)| {
                let v = v.to_f64() as f32;
                // x, y, objectness and classes through the sigmoid.
                match (at / stride) % len {
                    2 | 3 => v,
                    _ => sigmoid(v),
                }
            }));
        drop(input);
        self.delta.clear();
        self.delta.resize(self.activated.len(), 0.0);
        let labels: Vec<f32> = bottoms[1]
            .cpu_data()?
            .iter()
            .map(|v| v.to_f64() as f32)
            .collect();
        let totals = self.deltas(&labels, sizes)?;
        let mut loss = 0.0f32;
        if self.s.iou_loss == IouLoss::Mse {
            for d in &self.delta {
                loss += d * d;
            }
        } else {
            // The coordinates' deltas are gradients of the overlap, not
            // errors: the overlap counts instead.
            for (at, d) in self.delta.iter().enumerate() {
                if (at / stride) % len >= 4 {
                    loss += d * d;
                }
            }
            if totals.count > 0 {
                loss += self.s.iou_normalizer * totals.iou_loss / totals.count as f32;
            }
        }
        tops[0].mutable_cpu_data()?[0] = T::from_f64(f64::from(loss / images as f32));
        self.ready = true;
        Ok(())
    }

    fn backward(&mut self, tops: &[&Blob<T>], down: &[bool], bottoms: &[&Blob<T>]) -> Result<()> {
        let shape = bottoms[0].shape();
        let Some(alpha) = delta_scale((RUN, "Yolov3"), self.ready, down, tops[0], shape[0])? else {
            return Ok(());
        };
        let (len, stride) = (self.s.len(), shape[2] * shape[3]);
        let mut diff = bottoms[0].mutable_cpu_diff()?;
        for (at, ((d, &delta), &a)) in diff
            .iter_mut()
            .zip(&self.delta)
            .zip(&self.activated)
            .enumerate()
        {
            let through_sigmoid = self.s.logic_gradient && !matches!((at / stride) % len, 2 | 3);
            let delta = if through_sigmoid {
                delta * ((1.0 - a) * a)
            } else {
                delta
            };
            *d = T::from_f64(f64::from(alpha * delta));
        }
        Ok(())
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
