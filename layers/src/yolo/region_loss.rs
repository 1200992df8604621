//! `RegionLoss`: YOLOv2's training loss, as the YOLO fork
//! (eric612/MobileNet-YOLO, `region_loss_layer.cpp`) computes it, after
//! darknet's region layer.
//!
//! Bottoms: the predictions `(N, num·(5 + classes), S, S)` (box `n`'s x,
//! y, w, h, objectness and class scores in channels `n·len` on, a square
//! map) and the labels `(N, 1, 300, 5)` of `AnnotatedData` with
//! `yolo_data_type: 1`. The top is the loss.
//!
//! The objectness goes through a sigmoid, the class scores through a
//! softmax; x and y go through a sigmoid where the box is read. Every
//! box learns "no object" (`noobject_scale`, through the sigmoid's
//! gradient) unless its predicted box overlaps a true box by more than
//! `thresh`. Each true box goes to its cell and to the anchor (`biases`,
//! in cells) whose shape overlaps it best (the predicted shape without
//! `bias_match`): that box learns darknet's codes (x and y through the
//! sigmoid, scaled by `coord_scale`, times `2 - w·h` without
//! `rescore`), its objectness towards the overlap it reached
//! (`rescore`) or towards 1, times `object_scale`, and its class
//! probabilities towards the true class. The loss is the deltas' squares
//! over the batch, the gradient the deltas over the batch.
//!
//! As the fork, on the host, in float; `softmax` is always applied and
//! `coords` must be 4 (the fork's layout), while `jitter`, `absolute`,
//! `random`, `class_map` and `side` (the map's width is taken) are read
//! but change nothing, as in the fork. Departures: fewer anchors than
//! `num` are refused (the fork fills ten zeros and divides by them), a
//! map that is not square is refused (the fork indexes it as a square
//! of its width), a true box's cell is clipped into the map, a box whose
//! shape overlaps no anchor goes to anchor 0 of its own cell (the fork's
//! goes to the batch's first value), and a class outside `num_class` is
//! an error naming the image and the row.

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use super::overlap::CenterBox;
use super::truth::{cell_of, check_labels, class_of, rows, truth_of};
use super::{delta_scale, sigmoid, write_gradient};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

const OP: &str = "set up RegionLoss";
const RUN: &str = "run RegionLoss";

/// The fork's `RegionLossParameter`.
pub(crate) static REGION_LOSS_PARAMETER: MessageSchema = MessageSchema {
    name: "RegionLossParameter",
    fields: &[
        FieldSchema::optional("side", 1, FieldKind::UInt32).with_default(FieldDefault::Int(13)),
        FieldSchema::optional("num_class", 2, FieldKind::UInt32)
            .with_default(FieldDefault::Int(20)),
        FieldSchema::optional("bias_match", 3, FieldKind::UInt32)
            .with_default(FieldDefault::Int(1)),
        FieldSchema::optional("coords", 4, FieldKind::UInt32).with_default(FieldDefault::Int(4)),
        FieldSchema::optional("num", 5, FieldKind::UInt32).with_default(FieldDefault::Int(5)),
        FieldSchema::optional("softmax", 6, FieldKind::UInt32).with_default(FieldDefault::Int(1)),
        FieldSchema::optional("jitter", 7, FieldKind::Float).with_default(FieldDefault::Float(0.2)),
        FieldSchema::optional("rescore", 8, FieldKind::UInt32).with_default(FieldDefault::Int(1)),
        FieldSchema::optional("object_scale", 9, FieldKind::Float)
            .with_default(FieldDefault::Float(1.0)),
        FieldSchema::optional("class_scale", 10, FieldKind::Float)
            .with_default(FieldDefault::Float(1.0)),
        FieldSchema::optional("noobject_scale", 11, FieldKind::Float)
            .with_default(FieldDefault::Float(0.5)),
        FieldSchema::optional("coord_scale", 12, FieldKind::Float)
            .with_default(FieldDefault::Float(5.0)),
        FieldSchema::optional("absolute", 13, FieldKind::UInt32).with_default(FieldDefault::Int(1)),
        FieldSchema::optional("thresh", 14, FieldKind::Float)
            .with_default(FieldDefault::Float(0.2)),
        FieldSchema::optional("random", 15, FieldKind::UInt32).with_default(FieldDefault::Int(1)),
        FieldSchema::repeated("biases", 16, FieldKind::Float),
        FieldSchema::optional("softmax_tree", 17, FieldKind::String),
        FieldSchema::optional("class_map", 18, FieldKind::String),
    ],
};

/// `region_loss_param`, field 600 as in the fork.
pub(crate) const REGION_LOSS_FIELD: FieldSchema = FieldSchema::optional(
    "region_loss_param",
    600,
    FieldKind::Message(&REGION_LOSS_PARAMETER),
);

/// The layer's `region_loss_param`, checked.
#[derive(Clone, Debug)]
struct Settings {
    classes: usize,
    boxes: usize,
    bias_match: bool,
    rescore: bool,
    object_scale: f32,
    class_scale: f32,
    noobject_scale: f32,
    coord_scale: f32,
    thresh: f32,
    /// Each box's anchor, width and height in cells.
    biases: Vec<f32>,
}

impl Settings {
    fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(layer, &REGION_LOSS_FIELD, &REGION_LOSS_PARAMETER);
        let classes = p.uint("num_class") as usize;
        let boxes = p.uint("num") as usize;
        if classes == 0 || boxes == 0 {
            return Err(bad_param(
                OP,
                format!("num_class ({classes}) and num ({boxes}) must be at least 1"),
            ));
        }
        if p.uint("coords") != 4 {
            return Err(bad_param(
                OP,
                format!(
                    "coords {}: the fork's boxes are x, y, w, h (4)",
                    p.uint("coords")
                ),
            ));
        }
        if p.has("softmax_tree") {
            return Err(bad_param(
                OP,
                "softmax_tree: YOLO9000's class tree is not supported",
            ));
        }
        let biases: Vec<f32> = p.floats("biases").into_iter().map(|b| b as f32).collect();
        if biases.len() < 2 * boxes {
            return Err(bad_param(
                OP,
                format!(
                    "biases must give a width and a height for each of the num ({boxes}) \
                     anchors, not {} values",
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
        Ok(Self {
            classes,
            boxes,
            bias_match: p.uint("bias_match") != 0,
            rescore: p.uint("rescore") != 0,
            object_scale: p.float("object_scale") as f32,
            class_scale: p.float("class_scale") as f32,
            noobject_scale: p.float("noobject_scale") as f32,
            coord_scale: p.float("coord_scale") as f32,
            thresh: p.float("thresh") as f32,
            biases,
        })
    }

    fn len(&self) -> usize {
        5 + self.classes
    }
}

/// The sigmoid's gradient at its output `y` (the fork's
/// `logistic_gradient`).
fn logistic_gradient(y: f32) -> f32 {
    (1.0 - y) * y
}

/// The YOLO fork's `RegionLoss`: see the [module](self) documentation.
pub(crate) struct RegionLossLayer {
    s: Settings,
    /// The predictions with the objectness through its sigmoid and the
    /// classes through their softmax (the fork's `swap_`).
    activated: Vec<f32>,
    /// The fork's `diff_`.
    delta: Vec<f32>,
    ready: bool,
}

impl RegionLossLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        Ok(Self {
            s: Settings::from_param(layer)?,
            activated: Vec::new(),
            delta: Vec::new(),
            ready: false,
        })
    }

    /// The predictions' `(N, S)`, checked, and the labels against them.
    fn sizes<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<(usize, usize)> {
        let shape = bottoms[0].shape();
        let s = &self.s;
        let channels = s.boxes * s.len();
        if shape.len() != 4 || shape[1] != channels || shape[2] != shape[3] {
            return Err(bad_param(
                OP,
                format!(
                    "bottom 0 must be N x {channels} x S x S ({} boxes of 5 + {} classes a \
                     cell, a square map), not {shape:?}",
                    s.boxes, s.classes
                ),
            ));
        }
        check_labels(RUN, bottoms[1], shape[0])?;
        Ok((shape[0], shape[3]))
    }

    /// Box `index`'s prediction in cell `(i, j)` of a `side x side` map
    /// with anchor `n` (the fork's region `get_region_box`).
    fn predicted(
        &self,
        map: &[f32],
        n: usize,
        index: usize,
        (i, j): (usize, usize),
        side: usize,
    ) -> CenterBox {
        let st = side * side;
        let side = side as f32;
        CenterBox {
            x: (i as f32 + sigmoid(map[index])) / side,
            y: (j as f32 + sigmoid(map[index + st])) / side,
            w: map[index + 2 * st].exp() * self.s.biases[2 * n] / side,
            h: map[index + 3 * st].exp() * self.s.biases[2 * n + 1] / side,
        }
    }

    /// The fork's `Forward_cpu` for image `b`: its deltas.
    fn image_deltas(&mut self, labels: &[f32], b: usize, side: usize) -> Result<()> {
        let s = self.s.clone();
        let (len, stride) = (s.len(), side * side);
        let per_image = s.boxes * len * stride;
        let map = &self.activated[b * per_image..][..per_image];
        let rows: Vec<&[f32]> = rows(labels, b).collect();
        let mut delta = vec![0.0f32; per_image];
        for cell in 0..stride {
            let (i, j) = (cell % side, cell / side);
            for n in 0..s.boxes {
                let index = n * len * stride + cell;
                let pred = self.predicted(map, n, index, (i, j), side);
                let best = rows
                    .iter()
                    .take_while(|r| r[1] != 0.0)
                    .map(|r| pred.iou(&truth_of(r)))
                    .fold(0.0f32, |best, iou| if iou > best { iou } else { best });
                let o = map[index + 4 * stride];
                delta[index + 4 * stride] = if best > s.thresh {
                    0.0
                } else {
                    -s.noobject_scale * (0.0 - o) * logistic_gradient(o)
                };
            }
        }
        for (t, r) in rows.iter().enumerate().take_while(|(_, r)| r[3] != 0.0) {
            let truth = truth_of(r);
            let class = class_of(RUN, r, (b, t), s.classes)?;
            let (i, j) = cell_of(&truth, (side, side));
            let pos = j * side + i;
            let shape_only = CenterBox {
                x: 0.0,
                y: 0.0,
                ..truth
            };
            let (mut best_iou, mut best_n) = (0.0f32, 0);
            for n in 0..s.boxes {
                let mut pred = self.predicted(map, n, n * len * stride + pos, (i, j), side);
                if s.bias_match {
                    pred.w = s.biases[2 * n] / side as f32;
                    pred.h = s.biases[2 * n + 1] / side as f32;
                }
                pred.x = 0.0;
                pred.y = 0.0;
                let iou = pred.iou(&shape_only);
                if iou > best_iou {
                    (best_iou, best_n) = (iou, n);
                }
            }
            let index = best_n * len * stride + pos;
            let scale = if s.rescore {
                s.coord_scale
            } else {
                s.coord_scale * (2.0 - truth.w * truth.h)
            };
            // darknet's codes: x and y through the sigmoid.
            let pred = self.predicted(map, best_n, index, (i, j), side);
            let iou = pred.iou(&truth);
            let sides = side as f32;
            let target = [
                truth.x * sides - i as f32,
                truth.y * sides - j as f32,
                (truth.w * sides / s.biases[2 * best_n]).ln(),
                (truth.h * sides / s.biases[2 * best_n + 1]).ln(),
            ];
            for (k, t) in target.into_iter().enumerate() {
                let at = index + k * stride;
                delta[at] = if k < 2 {
                    let v = sigmoid(map[at]);
                    -scale * (t - v) * v * (1.0 - v)
                } else {
                    -scale * (t - map[at])
                };
            }
            let o = map[index + 4 * stride];
            let goal = if s.rescore { iou } else { 1.0 };
            delta[index + 4 * stride] = -s.object_scale * (goal - o) * logistic_gradient(o);
            for c in 0..s.classes {
                let at = index + (5 + c) * stride;
                let y = if c == class { 1.0 } else { 0.0 };
                delta[at] = -s.class_scale * (y - map[at]);
            }
        }
        self.delta[b * per_image..][..per_image].copy_from_slice(&delta);
        Ok(())
    }
}

impl<T: MathElement> DynLayer<T> for RegionLossLayer {
    fn type_name(&self) -> &str {
        "RegionLoss"
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
        let (images, side) = self.sizes(bottoms)?;
        let (len, stride) = (self.s.len(), side * side);
        self.activated.clear();
        self.activated
            .extend(bottoms[0].cpu_data()?.iter().enumerate().map(|(at, v)| {
                let v = v.to_f64() as f32;
                if (at / stride) % len == 4 {
                    sigmoid(v)
                } else {
                    v
                }
            }));
        // Each box's class scores through the fork's `softmax_region`.
        for box_start in (0..self.activated.len()).step_by(len * stride) {
            for cell in 0..stride {
                let at = |c: usize| box_start + (5 + c) * stride + cell;
                let large = (0..self.s.classes)
                    .map(|c| self.activated[at(c)])
                    .fold(self.activated[at(0)], f32::max);
                let mut sum = 0.0f32;
                for c in 0..self.s.classes {
                    let e = (self.activated[at(c)] - large).exp();
                    sum += e;
                    self.activated[at(c)] = e;
                }
                for c in 0..self.s.classes {
                    self.activated[at(c)] /= sum;
                }
            }
        }
        self.delta.clear();
        self.delta.resize(self.activated.len(), 0.0);
        let labels: Vec<f32> = bottoms[1]
            .cpu_data()?
            .iter()
            .map(|v| v.to_f64() as f32)
            .collect();
        for b in 0..images {
            self.image_deltas(&labels, b, side)?;
        }
        let mut loss = 0.0f32;
        for d in &self.delta {
            loss += d * d;
        }
        tops[0].mutable_cpu_data()?[0] = T::from_f64(f64::from(loss / images as f32));
        self.ready = true;
        Ok(())
    }

    fn backward(&mut self, tops: &[&Blob<T>], down: &[bool], bottoms: &[&Blob<T>]) -> Result<()> {
        let images = bottoms[0].shape()[0];
        let Some(alpha) = delta_scale((RUN, "RegionLoss"), self.ready, down, tops[0], images)?
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
