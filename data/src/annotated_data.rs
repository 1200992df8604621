//! The SSD fork's `AnnotatedData` (weiliu89/caffe, branch ssd): batches
//! of `AnnotatedDatum` records (an image and its objects' boxes, what the
//! fork's `create_annoset` writes) from an LMDB or LevelDB store, each
//! expanded onto a larger canvas, cropped to a patch one of the batch
//! samplers finds, warped to `resize_param`'s size and mirrored, its
//! boxes moved with it; the second top holds every box of the batch as
//! rows of `[item, label, instance, xmin, ymin, xmax, ymax, difficult]`
//! (MultiBoxLoss's ground truth), one row of -1 where there is none.
//! Before all this each record is distorted in colour (`distort_param`,
//! in `distort.rs`). The YOLO fork's additions (its label layout, crop
//! jitter and multi-scale `resize_param`s) are in `yolo_labels.rs`, its
//! segmentation labels (a third top) in `segmentation_labels.rs`.

use std::sync::Arc;

use blob_kernels::cpu::SeededRng;
use blob_layers::Arity;
use blob_proto::{AnnotatedDatum, ParamMessage};
use blob_runtime::{BlobError, MathElement};
use prost::Message;

use crate::data_layer::StoreSource;
use crate::datum::{ColorMode, Example, Pixels, datum_example, decode_image};
use crate::distort::Distortion;
use crate::lane_data::{self, LaneLabels};
use crate::prefetch::{Decoded, Decoder, PrefetchingDataLayer, Raw, Setup};
use crate::resize_policy::ResizePolicy;
use crate::segmentation_labels::SegmentationLabels;
use crate::transform::{DataTransformer, Placement};
use crate::yolo_labels::{LabelLayout, jitter_crop};

fn refused(detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "set up AnnotatedData",
        detail: detail.into(),
    }
}

/// A box relative to its image, 0 to 1 (the fork's `NormalizedBBox`), in
/// float as the fork computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rect {
    pub xmin: f32,
    pub ymin: f32,
    pub xmax: f32,
    pub ymax: f32,
}

impl Rect {
    /// The fork's `BBoxSize` (normalized): 0 for an inverted box.
    fn size(&self) -> f32 {
        if self.xmax < self.xmin || self.ymax < self.ymin {
            return 0.0;
        }
        (self.xmax - self.xmin) * (self.ymax - self.ymin)
    }

    /// The fork's `ClipBBox`: each coordinate into 0 to 1.
    pub(crate) fn clip(&self) -> Rect {
        let c = |v: f32| v.clamp(0.0, 1.0);
        Rect {
            xmin: c(self.xmin),
            ymin: c(self.ymin),
            xmax: c(self.xmax),
            ymax: c(self.ymax),
        }
    }

    /// The fork's `IntersectBBox`: none where they are apart.
    fn intersect(&self, o: &Rect) -> Option<Rect> {
        if o.xmin > self.xmax || o.xmax < self.xmin || o.ymin > self.ymax || o.ymax < self.ymin {
            return None;
        }
        Some(Rect {
            xmin: self.xmin.max(o.xmin),
            ymin: self.ymin.max(o.ymin),
            xmax: self.xmax.min(o.xmax),
            ymax: self.ymax.min(o.ymax),
        })
    }

    /// The fork's `JaccardOverlap` (normalized).
    fn iou(&self, o: &Rect) -> f32 {
        let Some(i) = self.intersect(o) else {
            return 0.0;
        };
        let (w, h) = (i.xmax - i.xmin, i.ymax - i.ymin);
        if w > 0.0 && h > 0.0 {
            let inter = w * h;
            inter / (self.size() + o.size() - inter)
        } else {
            0.0
        }
    }

    /// The fork's `BBoxCoverage`: the share of this box inside `by`.
    fn coverage(&self, by: &Rect) -> f32 {
        let inter = self.intersect(by).map_or(0.0, |i| i.size());
        if inter > 0.0 {
            inter / self.size()
        } else {
            0.0
        }
    }

    /// The fork's `ProjectBBox`: this box in the coordinates of `src`,
    /// clipped; none where it is outside or left with no area.
    fn project(&self, src: &Rect) -> Option<Rect> {
        if self.xmin >= src.xmax
            || self.xmax <= src.xmin
            || self.ymin >= src.ymax
            || self.ymax <= src.ymin
        {
            return None;
        }
        let (w, h) = (src.xmax - src.xmin, src.ymax - src.ymin);
        let p = Rect {
            xmin: (self.xmin - src.xmin) / w,
            ymin: (self.ymin - src.ymin) / h,
            xmax: (self.xmax - src.xmin) / w,
            ymax: (self.ymax - src.ymin) / h,
        }
        .clip();
        (p.size() > 0.0).then_some(p)
    }
}

/// One object of an annotated record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Object {
    pub label: i32,
    pub instance: i32,
    pub rect: Rect,
    pub difficult: bool,
}

impl Object {
    /// Its label-top row after the item index.
    pub(crate) fn row(&self) -> [f32; 7] {
        let r = &self.rect;
        [
            self.label as f32,
            self.instance as f32,
            r.xmin,
            r.ymin,
            r.xmax,
            r.ymax,
            if self.difficult { 1.0 } else { 0.0 },
        ]
    }
}

/// Decodes a serialized `AnnotatedDatum` into its image, its objects in
/// group order where the record is annotated (`type` set, or
/// `anno_type` in the layer; `None` for a record labelled by its
/// datum's `label` alone), and where `segmentation` asks, its label
/// image (`seg_label`, decoded to one channel).
pub(crate) fn decode_annotated(
    bytes: &[u8],
    mode: ColorMode,
    annotated: bool,
    segmentation: bool,
) -> Result<Decoded, String> {
    let record =
        AnnotatedDatum::decode(bytes).map_err(|e| format!("not an AnnotatedDatum record: {e}"))?;
    let mut datum = record
        .datum
        .ok_or("an AnnotatedDatum record without its datum")?;
    let label_image = datum.seg_label.take();
    let encoded = datum.encoded == Some(true);
    let example = datum_example(datum, mode)?;
    let segmentation = if segmentation {
        let bytes = label_image.ok_or(
            "it has no seg_label, and the layer's third top wants segmentation labels \
             (convert-annoset --anno-type detection_with_segmentation writes them)",
        )?;
        if !encoded {
            return Err(
                "its datum is not encoded: the YOLO fork reads seg_label as an \
                        encoded image, of encoded records alone"
                    .into(),
            );
        }
        let (_, height, width, pixels) =
            decode_image(&bytes, ColorMode::Gray).map_err(|e| format!("its seg_label: {e}"))?;
        Some(Example {
            channels: 1,
            height,
            width,
            pixels: Pixels::Bytes(pixels),
            label: 0,
        })
    } else {
        None
    };
    let decoded = |objects| Decoded {
        example,
        label_plane: None,
        objects,
        segmentation,
        lanes: None,
    };
    if !(annotated || record.r#type.is_some()) {
        return Ok(decoded(None));
    }
    if let Some(t) = record.r#type.filter(|&t| t != 0 && t != 1) {
        return Err(format!(
            "annotation type {t}: BBOX (0) and the YOLO fork's BBOXandSeg (1) are the types \
             the forks know"
        ));
    }
    let mut objects = Vec::new();
    for group in &record.annotation_group {
        for a in &group.annotation {
            let b = a.bbox.clone().unwrap_or_default();
            let rect = Rect {
                xmin: b.xmin.unwrap_or(0.0),
                ymin: b.ymin.unwrap_or(0.0),
                xmax: b.xmax.unwrap_or(0.0),
                ymax: b.ymax.unwrap_or(0.0),
            };
            if [rect.xmin, rect.ymin, rect.xmax, rect.ymax]
                .iter()
                .any(|v| !v.is_finite())
            {
                return Err(format!(
                    "an object of label {} has a box {rect:?} that is not finite",
                    group.group_label.unwrap_or(0)
                ));
            }
            objects.push(Object {
                label: group.group_label.unwrap_or(0),
                instance: a.instance_id.unwrap_or(0),
                rect,
                difficult: b.difficult.unwrap_or(false),
            });
        }
    }
    Ok(decoded(Some(objects)))
}

/// A uniform float in `[a, b)` (Caffe's `caffe_rng_uniform`), `a` where
/// the range is empty.
pub(crate) fn uniform(rng: &mut SeededRng, a: f32, b: f32) -> f32 {
    if b <= a {
        return a;
    }
    let u = f64::from(rng.next_u32()) / 4_294_967_296.0;
    (f64::from(a) + (f64::from(b) - f64::from(a)) * u) as f32
}

/// A bound of a sampled patch against the objects: `None` where unset.
type Range = (Option<f32>, Option<f32>);

/// The fork's `SampleConstraint`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Constraint {
    jaccard: Range,
    sample_coverage: Range,
    object_coverage: Range,
}

/// The fork's `BatchSampler` with its `Sampler`.
#[derive(Clone, Debug, PartialEq)]
struct BatchSampler {
    scale: (f32, f32),
    aspect_ratio: (f32, f32),
    constraint: Constraint,
    max_sample: Option<u32>,
    max_trials: u32,
}

impl BatchSampler {
    fn from_param(p: &ParamMessage, i: usize) -> Result<Option<Self>, BlobError> {
        if !p.boolean("use_original_image") {
            // The fork samples only from the original image.
            return Ok(None);
        }
        let s = p
            .message("sampler")
            .cloned()
            .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::SAMPLER));
        let f = |name: &str| s.float(name) as f32;
        let (min_scale, max_scale) = (f("min_scale"), f("max_scale"));
        let (min_ar, max_ar) = (f("min_aspect_ratio"), f("max_aspect_ratio"));
        if !(min_scale > 0.0 && min_scale <= max_scale && max_scale <= 1.0) {
            return Err(refused(format!(
                "batch_sampler {i}: scales {min_scale} to {max_scale} must lie in (0, 1], \
                 the smaller first"
            )));
        }
        if !(min_ar > 0.0 && min_ar <= max_ar && max_ar < f32::MAX) {
            return Err(refused(format!(
                "batch_sampler {i}: aspect ratios {min_ar} to {max_ar} must be positive, \
                 the smaller first"
            )));
        }
        let c = p
            .message("sample_constraint")
            .cloned()
            .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::SAMPLE_CONSTRAINT));
        let range = |lo: &str, hi: &str| {
            (
                c.has(lo).then(|| c.float(lo) as f32),
                c.has(hi).then(|| c.float(hi) as f32),
            )
        };
        Ok(Some(Self {
            scale: (min_scale, max_scale),
            aspect_ratio: (min_ar, max_ar),
            constraint: Constraint {
                jaccard: range("min_jaccard_overlap", "max_jaccard_overlap"),
                sample_coverage: range("min_sample_coverage", "max_sample_coverage"),
                object_coverage: range("min_object_coverage", "max_object_coverage"),
            },
            max_sample: p.has("max_sample").then(|| p.uint("max_sample") as u32),
            max_trials: p.uint("max_trials").min(u64::from(u32::MAX)) as u32,
        }))
    }

    /// The fork's `SampleBBox`: a patch of random scale and aspect ratio
    /// at a random place.
    fn sample(&self, rng: &mut SeededRng) -> Rect {
        let scale = uniform(rng, self.scale.0, self.scale.1);
        let ar = uniform(rng, self.aspect_ratio.0, self.aspect_ratio.1);
        let ar = ar.max(scale * scale).min(1.0 / (scale * scale));
        let (w, h) = (scale * ar.sqrt(), scale / ar.sqrt());
        let x = uniform(rng, 0.0, 1.0 - w);
        let y = uniform(rng, 0.0, 1.0 - h);
        Rect {
            xmin: x,
            ymin: y,
            xmax: x + w,
            ymax: y + h,
        }
    }

    /// The fork's `SatisfySampleConstraint`. Its `found` carries over
    /// from one object to the next, as the fork's does.
    fn satisfied(&self, patch: &Rect, objects: &[Object]) -> bool {
        let c = &self.constraint;
        let set = |r: &Range| r.0.is_some() || r.1.is_some();
        let (j, s, o) = (
            set(&c.jaccard),
            set(&c.sample_coverage),
            set(&c.object_coverage),
        );
        if !(j || s || o) {
            return true;
        }
        let outside =
            |r: &Range, v: f32| r.0.is_some_and(|lo| v < lo) || r.1.is_some_and(|hi| v > hi);
        let mut found = false;
        for object in objects {
            let b = &object.rect;
            if j {
                if outside(&c.jaccard, patch.iou(b)) {
                    continue;
                }
                found = true;
            }
            if s {
                if outside(&c.sample_coverage, patch.coverage(b)) {
                    continue;
                }
                found = true;
            }
            if o {
                if outside(&c.object_coverage, b.coverage(patch)) {
                    continue;
                }
                found = true;
            }
            if found {
                return true;
            }
        }
        found
    }
}

/// The fork's `EmitConstraint`: which boxes a crop keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Emit {
    /// Those whose centre lies in the crop.
    Center,
    /// Those more than this share inside the crop.
    MinOverlap(f32),
}

impl Emit {
    fn keeps(self, crop: &Rect, b: &Rect) -> bool {
        match self {
            Emit::Center => {
                let (x, y) = ((b.xmin + b.xmax) / 2.0, (b.ymin + b.ymax) / 2.0);
                x >= crop.xmin && x <= crop.xmax && y >= crop.ymin && y <= crop.ymax
            }
            Emit::MinOverlap(least) => b.coverage(crop) > least,
        }
    }
}

/// A record's image and boxes after [`Geometry::apply`]'s steps, and the
/// patch its image was cropped to, if it was.
type Reshaped = (Example, Option<Vec<Object>>, Option<Rect>);

/// What AnnotatedData does to a record before Caffe's transform:
/// `expand_param`, the batch samplers (or the YOLO fork's jitter),
/// `resize_param` (in `resize_policy.rs`) and `emit_constraint`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Geometry {
    distort: Option<Distortion>,
    expand: Option<(f32, f32)>,
    samplers: Vec<BatchSampler>,
    /// The `resize_param`s: one, or the YOLO fork's several, one drawn
    /// for each ten batches.
    resize: Vec<ResizePolicy>,
    /// The YOLO fork's crop jitter, where there are no samplers.
    jitter: Option<f32>,
    emit: Option<Emit>,
    /// How the label top holds the boxes.
    pub(crate) labels: LabelLayout,
    /// The YOLO fork's segmentation labels, where the layer has a third
    /// top.
    pub(crate) segmentation: Option<SegmentationLabels>,
    /// The YOLO fork's lane labels (LaneData).
    pub(crate) lanes: Option<LaneLabels>,
    /// The canvas an expansion paints (`mean_value`), per channel.
    fill: Vec<f32>,
}

impl Geometry {
    /// AnnotatedData's steps from its parameters; with `lanes`,
    /// LaneData's (its records hold lanes, and its tops are the lanes'
    /// labels), its errors naming LaneData.
    pub(crate) fn from_param(layer: &ParamMessage, lanes: bool) -> Result<Self, BlobError> {
        Self::parse(layer, lanes).map_err(|e| match e {
            BlobError::InvalidParameter { detail, .. } if lanes => BlobError::InvalidParameter {
                op: "set up LaneData",
                detail,
            },
            e => e,
        })
    }

    /// [`from_param`](Self::from_param), its errors AnnotatedData's.
    fn parse(layer: &ParamMessage, lanes: bool) -> Result<Self, BlobError> {
        let t = layer
            .message("transform_param")
            .cloned()
            .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::TRANSFORMATION));
        for (field, why) in [
            (
                "noise_param",
                "noise (blur, JPEG, salt and pepper) is not supported",
            ),
            (
                "crop_h",
                "crop_h / crop_w are not supported; crop_size crops a square",
            ),
            (
                "crop_w",
                "crop_h / crop_w are not supported; crop_size crops a square",
            ),
        ] {
            if t.has(field) {
                return Err(refused(format!("transform_param.{field}: {why}")));
            }
        }
        let distort = match t.message("distort_param") {
            Some(d) => Some(
                Distortion::from_param(d)
                    .map_err(|e| refused(format!("transform_param.distort_param: {e}")))?,
            ),
            None => None,
        };
        let expand = match t.message("expand_param") {
            Some(e) => {
                let (prob, ratio) = (e.float("prob") as f32, e.float("max_expand_ratio") as f32);
                if !(1.0..=16.0).contains(&ratio) {
                    return Err(refused(format!(
                        "expand_param.max_expand_ratio {ratio} must be from 1 to 16"
                    )));
                }
                if t.has("mean_file") {
                    return Err(refused(
                        "expand_param with a mean_file: the fork paints the canvas with a mean \
                         image of the expanded size, which no record has; use mean_value",
                    ));
                }
                Some((prob, ratio))
            }
            None => None,
        };
        let mut resize = Vec::new();
        for (i, r) in t.messages("resize_param").enumerate() {
            resize.push(ResizePolicy::from_param(r, i, refused)?);
        }
        if resize.len() > 1 {
            // The YOLO fork's checks of its multi-scale policies.
            if let Some((i, p)) = resize
                .iter()
                .enumerate()
                .find(|(_, p)| !(0.0..=1.0).contains(&p.prob))
            {
                return Err(refused(format!(
                    "resize_param {i}: prob {} must be from 0 to 1",
                    p.prob
                )));
            }
            let sum: f32 = resize.iter().map(|p| p.prob).sum();
            if (sum - 1.0).abs() > 0.01 {
                return Err(refused(format!(
                    "the {} resize_params' probs add up to {sum}, not 1: one is drawn by them \
                     for each ten batches",
                    resize.len()
                )));
            }
        }
        let emit = t
            .message("emit_constraint")
            .map(|e| match e.enum_name("emit_type") {
                "MIN_OVERLAP" => Emit::MinOverlap(e.float("emit_overlap") as f32),
                _ => Emit::Center,
            });
        let p = layer
            .message("annotated_data_param")
            .cloned()
            .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::ANNOTATED_DATA));
        let mut samplers = Vec::new();
        for (i, s) in p.messages("batch_sampler").enumerate() {
            samplers.extend(BatchSampler::from_param(s, i)?);
        }
        let labels = match p.int("yolo_data_type") {
            0 => LabelLayout::Ssd,
            1 => LabelLayout::Yolo {
                train_difficult: p.boolean("train_diffcult"),
            },
            other => {
                return Err(refused(format!(
                    "annotated_data_param.yolo_data_type {other}: 0 (SSD's rows) or 1 (YOLO's)"
                )));
            }
        };
        if p.boolean("difficult_label_warmup") {
            return Err(refused(
                "annotated_data_param.difficult_label_warmup: the fork holds difficult boxes back \
                 for the first twentieth of the solver's max_iter, which a data layer does not \
                 know here; set train_diffcult instead",
            ));
        }
        // The YOLO fork jitters every record without samplers (its
        // default jitter is 0.3); here only YOLO's set-ups do, so that an
        // SSD prototxt reads as the SSD fork reads it.
        let yolo = labels != LabelLayout::Ssd || p.has("yolo_data_jitter");
        let jitter = (yolo && p.messages("batch_sampler").next().is_none())
            .then(|| p.float("yolo_data_jitter") as f32);
        if let Some(j) = jitter
            && !(0.0..1.0).contains(&j)
        {
            return Err(refused(format!(
                "annotated_data_param.yolo_data_jitter {j} must be from 0 to below 1"
            )));
        }
        let label_planes = layer.strings("top").count() > 2;
        let segmentation = if lanes || label_planes {
            let why = if expand.is_some() {
                Some("expand_param: the fork crops the label image by the expanded image's patch")
            } else if resize.iter().any(|r| !r.warps()) {
                Some("a resize_param that keeps the aspect: the fork warps the labels all the same")
            } else if t.uint("crop_size") > 0 {
                Some("crop_size: the fork's labels are not cropped with the image")
            } else {
                None
            };
            if let Some(why) = why {
                let what = if lanes {
                    "lane labels (LaneData)"
                } else {
                    "segmentation labels (a third top)"
                };
                return Err(refused(format!(
                    "{what} with {why}, so labels and image would not match"
                )));
            }
            if lanes {
                None
            } else {
                Some(SegmentationLabels::from_param(&p).map_err(refused)?)
            }
        } else {
            None
        };
        let lanes = if lanes {
            Some(LaneLabels::from_param(&p).map_err(refused)?)
        } else {
            None
        };
        Ok(Self {
            distort,
            expand,
            samplers,
            resize,
            jitter,
            labels,
            segmentation,
            lanes,
            emit,
            fill: t.floats("mean_value").iter().map(|&v| v as f32).collect(),
        })
    }

    /// The fork's `TransformAnnotation`: the boxes inside `crop` that the
    /// emit constraint keeps (all, without one), in its coordinates,
    /// mirrored where asked.
    fn move_boxes(&self, objects: &[Object], crop: &Rect, mirror: bool) -> Vec<Object> {
        let mut moved = Vec::with_capacity(objects.len());
        for o in objects {
            if self.emit.is_some_and(|e| !e.keeps(crop, &o.rect)) {
                continue;
            }
            if let Some(mut p) = o.rect.project(crop) {
                if mirror {
                    (p.xmin, p.xmax) = (1.0 - p.xmax, 1.0 - p.xmin);
                }
                moved.push(Object { rect: p, ..*o });
            }
        }
        moved
    }

    /// Expansion, sampling and resizing of one record (the fork's
    /// `ExpandImage`, `GenerateBatchSamples` with `CropImage`, and
    /// `ApplyResize`), its boxes moved along and its label image (where
    /// it has one) cut as its image was; the draws from `rng`.
    pub(crate) fn apply(
        &self,
        decoded: Decoded,
        rng: &mut SeededRng,
        policy: usize,
    ) -> Result<Decoded, String> {
        let Decoded {
            example,
            label_plane,
            objects,
            segmentation,
            lanes,
        } = decoded;
        let (example, objects, patch) = self.reshape(example, objects, rng, policy)?;
        let segmentation = match (segmentation, patch) {
            (Some(label), Some(patch)) => Some(SegmentationLabels::crop(&label, &patch)?),
            (label, _) => label,
        };
        let lanes = match (lanes, patch) {
            (Some(lanes), Some(patch)) => Some(lane_data::project(lanes, &patch)),
            (lanes, _) => lanes,
        };
        Ok(Decoded {
            example,
            label_plane,
            objects,
            segmentation,
            lanes,
        })
    }

    /// [`apply`](Self::apply)'s image and boxes, and the patch the image
    /// was cropped to, if it was.
    fn reshape(
        &self,
        mut example: Example,
        mut objects: Option<Vec<Object>>,
        rng: &mut SeededRng,
        policy: usize,
    ) -> Result<Reshaped, String> {
        let plain = self.distort.is_none()
            && self.expand.is_none()
            && self.samplers.is_empty()
            && self.jitter.is_none()
            && self.resize.is_empty();
        if plain {
            return Ok((example, objects, None));
        }
        let mut cropped = None;
        let Pixels::Bytes(pixels) = &mut example.pixels else {
            return Err(
                "a record of float_data: distortion, expansion, sampling and resizing \
                 take 8-bit images"
                    .into(),
            );
        };
        if let Some(d) = &self.distort {
            d.apply(pixels, example.channels, rng)?;
        }
        if let Some((prob, ratio)) = self.expand {
            let draw = uniform(rng, 0.0, 1.0);
            if draw <= prob && (ratio - 1.0).abs() >= 1e-2 {
                let r = uniform(rng, 1.0, ratio);
                let (canvas, window) = self.expand_image(&example, r, rng)?;
                example = canvas;
                objects = objects.map(|o| self.move_boxes(&o, &window, false));
            }
        }
        if !self.samplers.is_empty() {
            let boxes: Vec<Object> = objects.clone().unwrap_or_default();
            let mut found = Vec::new();
            for s in &self.samplers {
                let mut here = 0;
                for _ in 0..s.max_trials {
                    if s.max_sample.is_some_and(|m| here >= m) {
                        break;
                    }
                    let patch = s.sample(rng);
                    if s.satisfied(&patch, &boxes) {
                        here += 1;
                        found.push(patch);
                    }
                }
            }
            if !found.is_empty() {
                let patch = found[(rng.next_u32() as usize) % found.len()].clip();
                example = crop_image(&example, &patch);
                objects = objects.map(|o| self.move_boxes(&o, &patch, false));
                cropped = Some(patch);
            }
        } else if let Some(jitter) = self.jitter {
            let keep = self.resize.get(policy).is_some_and(|p| p.keeps_aspect());
            let patch = jitter_crop(rng, jitter, keep);
            example = crop_image(&example, &patch);
            objects = objects.map(|o| self.move_boxes(&o, &patch, false));
            cropped = Some(patch);
        }
        if let Some(policy) = self.resize.get(policy) {
            let mut boxes: Vec<Rect> = objects.iter().flatten().map(|o| o.rect).collect();
            example = policy.apply(&example, &mut boxes, rng)?;
            if let Some(objects) = objects.as_mut() {
                for (o, b) in objects.iter_mut().zip(boxes) {
                    o.rect = b;
                }
            }
        }
        Ok((example, objects, cropped))
    }

    /// The fork's `ExpandImage`: `example` at a random place on a canvas
    /// `ratio` times its size, painted with the mean values; also the
    /// canvas's box in the image's coordinates.
    fn expand_image(
        &self,
        example: &Example,
        ratio: f32,
        rng: &mut SeededRng,
    ) -> Result<(Example, Rect), String> {
        let (c, h, w) = (example.channels, example.height, example.width);
        let height = (h as f32 * ratio) as usize;
        let width = (w as f32 * ratio) as usize;
        if c * height * width > crate::datum::MOST_VALUES {
            return Err(format!(
                "expanding the {w} x {h} image {ratio} times gives {width} x {height}, more \
                 than an image may hold"
            ));
        }
        let h_off = uniform(rng, 0.0, (height - h) as f32).floor() as usize;
        let w_off = uniform(rng, 0.0, (width - w) as f32).floor() as usize;
        let window = Rect {
            xmin: -(w_off as f32) / w as f32,
            ymin: -(h_off as f32) / h as f32,
            xmax: (width - w_off) as f32 / w as f32,
            ymax: (height - h_off) as f32 / h as f32,
        };
        if !self.fill.is_empty() && self.fill.len() != 1 && self.fill.len() != c {
            return Err(format!(
                "Specify either 1 mean_value or as many as channels: {} for {c} channels",
                self.fill.len()
            ));
        }
        let src = bytes(example);
        let mut out = vec![0u8; c * height * width];
        for (ch, plane) in out.chunks_mut(height * width).enumerate() {
            // OpenCV's saturate_cast of the mean to a byte.
            let paint = match self.fill.len() {
                0 => 0.0,
                1 => self.fill[0],
                _ => self.fill[ch],
            };
            plane.fill(paint.round_ties_even().clamp(0.0, 255.0) as u8);
            for y in 0..h {
                let from = &src[(ch * h + y) * w..][..w];
                plane[(h_off + y) * width + w_off..][..w].copy_from_slice(from);
            }
        }
        Ok((reshaped(example, height, width, out), window))
    }

    /// How many resize policies there are to draw from.
    pub(crate) fn policies(&self) -> usize {
        self.resize.len()
    }

    /// The YOLO fork's draw of a resize policy (its
    /// `roll_weighted_die`), made for each ten batches: 0 where there
    /// is one policy or none.
    pub(crate) fn draw_policy(&self, rng: &mut SeededRng) -> usize {
        if self.resize.len() < 2 {
            return 0;
        }
        let total: f32 = self.resize.iter().map(|p| p.prob).sum();
        let v = uniform(rng, 0.0, total);
        let mut sum = 0.0;
        for (i, p) in self.resize.iter().enumerate() {
            sum += p.prob;
            if v <= sum {
                return i;
            }
        }
        self.resize.len() - 1
    }

    /// The boxes of a record after Caffe's transform placed its output
    /// (`placement`) in an image of `height x width`.
    pub(crate) fn place_boxes(
        &self,
        objects: &[Object],
        placement: &Placement,
        (height, width): (usize, usize),
    ) -> Vec<Object> {
        let crop = Rect {
            xmin: placement.w_off as f32 / width as f32,
            ymin: placement.h_off as f32 / height as f32,
            xmax: (placement.w_off + placement.width) as f32 / width as f32,
            ymax: (placement.h_off + placement.height) as f32 / height as f32,
        };
        self.move_boxes(objects, &crop, placement.mirrored)
    }
}

/// An 8-bit record's bytes (`apply` refuses float records first).
fn bytes(example: &Example) -> &[u8] {
    match &example.pixels {
        Pixels::Bytes(b) => b,
        Pixels::Floats(_) => unreachable!("apply takes 8-bit records alone"),
    }
}

/// `example`'s channels and label over new pixels of `height x width`.
fn reshaped(example: &Example, height: usize, width: usize, pixels: Vec<u8>) -> Example {
    Example {
        channels: example.channels,
        height,
        width,
        pixels: Pixels::Bytes(pixels),
        label: example.label,
    }
}

/// The fork's `CropImage`: the pixels under `patch` (clipped), their
/// offsets and sizes truncated as the fork's integer casts truncate.
pub(crate) fn crop_image(example: &Example, patch: &Rect) -> Example {
    let (c, h, w) = (example.channels, example.height, example.width);
    let (xmin, ymin) = (patch.xmin * w as f32, patch.ymin * h as f32);
    let (xmax, ymax) = (patch.xmax * w as f32, patch.ymax * h as f32);
    let (w_off, h_off) = (xmin as usize, ymin as usize);
    let width = ((xmax - xmin) as usize).min(w - w_off);
    let height = ((ymax - ymin) as usize).min(h - h_off);
    let src = bytes(example);
    let mut out = Vec::with_capacity(c * height * width);
    for ch in 0..c {
        for y in 0..height {
            out.extend_from_slice(&src[(ch * h + h_off + y) * w + w_off..][..width]);
        }
    }
    reshaped(example, height, width, out)
}

/// The SSD fork's `AnnotatedData` (`data_param { source batch_size
/// backend }`, `annotated_data_param { batch_sampler ... }` and
/// `transform_param` with the fork's `resize_param`, `expand_param` and
/// `emit_constraint`): each record of the store (an `AnnotatedDatum`)
/// is distorted in brightness, contrast, saturation, hue and channel
/// order (`distort_param`, OpenCV's 8-bit arithmetic), expanded onto a
/// canvas painted with the mean values
/// (`expand_param`: at probability `prob`, up to `max_expand_ratio`
/// times its size), cropped to a patch drawn by one of the batch
/// samplers (each tries `max_trials` patches of its scales and aspect
/// ratios, keeping those that meet its `sample_constraint` of overlap
/// with the objects; one of all kept is taken), resized by
/// `resize_param` (WARP to its height and width; FIT_LARGE_SIZE_AND_PAD
/// keeping the aspect within them and padding by `pad_mode`;
/// FIT_SMALL_SIZE keeping the aspect with the shorter side fitted, each
/// image at its own size, so one a batch), then mirrored, cropped, centred
/// and scaled as Caffe's `DataTransformer` does. The boxes follow the
/// image; those whose centre leaves a crop are dropped
/// (`emit_constraint`). The label top is `(1, 1, boxes, 8)`: `[item,
/// label, instance, xmin, ymin, xmax, ymax, difficult]` per box, a row
/// of -1 when the batch has none; records without annotations give
/// their datum's label, one an item.
///
/// The YOLO fork's set-ups (eric612/MobileNet-YOLO) read too:
/// `annotated_data_param { yolo_data_type: 1 }` makes the label top
/// `(N, 1, 300, 5)`, each image's boxes as `[label - 1, centre x, centre
/// y, width, height]` then zeros (difficult boxes left out when
/// `train_diffcult: false`; more than 300 boxes is an error naming the
/// record), what its `Yolov3` loss reads; without batch samplers each
/// record is cropped by `yolo_data_jitter` (darknet's jitter: each side
/// 1 - jitter to 1 of the image, four times in five); several
/// `resize_param`s are its multi-scale training, one drawn by their
/// `prob`s for each ten batches. The fork jitters every record of a
/// layer without samplers; here a layer jitters only with
/// `yolo_data_type: 1` or a `yolo_data_jitter` of its own, so that SSD's
/// prototxts read as the SSD fork reads them. A third top holds the
/// fork's segmentation labels (its cityscapes set-ups): each record's
/// label image (`seg_label`, written by `convert-annoset --anno-type
/// detection_with_segmentation`) cut, warped and mirrored as its image,
/// as `(N, classes, H / seg_scales, W / seg_scales)` planes of each
/// class's share of a pixel, the classes from `label_map_file` in the
/// fork's format (`item { name: "road" label: 7 label_id: 1 }`), or
/// one plane with `single_class` (the fork's default); see
/// `segmentation_labels.rs`.
///
/// Departures from the fork: the crops and expansions are not
/// re-encoded as JPEG between steps (the fork's are, losing detail);
/// every `interp_mode` (LINEAR, AREA, NEAREST, CUBIC and LANCZOS4)
/// gives OpenCV's bytes; `noise_param`,
/// `crop_h`/`crop_w` and `difficult_label_warmup` are refused. The draws come from each
/// record's own generator (seeded in record order), so a batch is the
/// same on any number of decoding threads, though not Caffe's draws.
///
/// ```
/// use blob_data::{Backend, StoreWriter, data_registry};
/// use blob_layers::net::{Net, NetState};
/// use blob_proto::{AnnotatedDatum, Annotation, AnnotationGroup, Datum, NormalizedBBox};
/// use prost::Message;
/// let dir = std::env::temp_dir().join(format!("blobflow-annotated-doc-{}", std::process::id()));
/// let _ = std::fs::remove_dir_all(&dir);
/// let mut store = StoreWriter::create(&dir, Backend::Lmdb)?;
/// let datum = Datum { channels: Some(1), height: Some(2), width: Some(4),
///     data: Some(vec![10; 8]), ..Default::default() };
/// let bbox = NormalizedBBox { xmin: Some(0.0), ymin: Some(0.0), xmax: Some(0.5), ymax: Some(1.0), ..Default::default() };
/// let record = AnnotatedDatum { datum: Some(datum), r#type: Some(0),
///     annotation_group: vec![AnnotationGroup { group_label: Some(3),
///         annotation: vec![Annotation { instance_id: Some(0), bbox: Some(bbox), lanes: None }] }] };
/// store.put(b"0", &record.encode_to_vec())?;
/// store.finish()?;
/// let text = format!(r#"layer {{ name: "data" type: "AnnotatedData" top: "data" top: "label"
///     transform_param {{ resize_param {{ height: 4 width: 4 }} }}
///     data_param {{ source: "{}" batch_size: 2 backend: LMDB }} }}"#, dir.display());
/// let mut net = Net::<f32>::builder().registry(&data_registry()).from_prototxt(&text)?;
/// net.forward()?;
/// assert_eq!(net.blob("data").unwrap().shape(), [2, 1, 4, 4]);
/// let label = net.blob("label").unwrap();
/// assert_eq!(label.shape(), [1, 1, 2, 8]);
/// assert_eq!(&label.to_vec()?[8..], [1.0, 3.0, 0.0, 0.0, 0.0, 0.5, 1.0, 0.0]);
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn annotated_data_layer<T: MathElement>(
    layer: &ParamMessage,
) -> Result<PrefetchingDataLayer<T>, BlobError> {
    let geometry = Geometry::from_param(layer, false)?;
    let transformer = DataTransformer::<T>::from_layer(layer)?;
    let annotated = layer
        .message("annotated_data_param")
        .is_some_and(|a| a.has("anno_type"));
    let color = transformer.color_mode();
    let segmentation = geometry.segmentation.is_some();
    let decode: Decoder =
        Arc::new(move |raw: Raw| decode_annotated(&raw.bytes, color, annotated, segmentation));
    let store = StoreSource::open(layer, decode, refused)?;
    PrefetchingDataLayer::start(
        Setup {
            type_name: "AnnotatedData",
            transformer,
            batch_size: store.batch_size,
            prefetch: store.prefetch,
            tops: Arity::range(1, 3),
            geometry: Some(Arc::new(geometry)),
        },
        store.records,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(xmin: f32, ymin: f32, xmax: f32, ymax: f32) -> Rect {
        Rect {
            xmin,
            ymin,
            xmax,
            ymax,
        }
    }

    #[test]
    fn boxes_project_into_a_crop_and_leave_it_by_the_emit_constraint() {
        let crop = rect(0.5, 0.0, 1.0, 1.0);
        let b = rect(0.25, 0.2, 0.75, 0.6);
        assert_eq!(b.project(&crop), Some(rect(0.0, 0.2, 0.5, 0.6)));
        assert_eq!(rect(0.0, 0.0, 0.5, 1.0).project(&crop), None);
        // Its centre (0.5, 0.4) is on the crop's edge: kept.
        assert!(Emit::Center.keeps(&crop, &b));
        assert!(!Emit::Center.keeps(&crop, &rect(0.0, 0.0, 0.6, 1.0)));
        assert!(Emit::MinOverlap(0.4).keeps(&crop, &b));
        assert!(!Emit::MinOverlap(0.5).keeps(&crop, &b));
        assert!((b.coverage(&crop) - 0.5).abs() < 1e-6);
        assert!(
            (rect(0.0, 0.0, 0.5, 1.0).iou(&rect(0.25, 0.0, 0.75, 1.0)) - 1.0 / 3.0).abs() < 1e-6
        );
    }

    #[test]
    fn a_sampler_keeps_patches_meeting_its_constraint() {
        let s = BatchSampler {
            scale: (0.3, 1.0),
            aspect_ratio: (0.5, 2.0),
            constraint: Constraint {
                jaccard: (Some(0.5), None),
                ..Default::default()
            },
            max_sample: Some(1),
            max_trials: 50,
        };
        let objects = [Object {
            label: 1,
            instance: 0,
            rect: rect(0.1, 0.1, 0.6, 0.7),
            difficult: false,
        }];
        let mut rng = SeededRng::new(5);
        for _ in 0..200 {
            let p = s.sample(&mut rng);
            assert!(p.xmin >= 0.0 && p.ymin >= 0.0 && p.xmax <= 1.0 + 1e-6 && p.ymax <= 1.0 + 1e-6);
            let w = p.xmax - p.xmin;
            let h = p.ymax - p.ymin;
            assert!((w * h).sqrt() >= 0.3 - 1e-5 && w * h <= 1.0 + 1e-5, "{p:?}");
            assert_eq!(s.satisfied(&p, &objects), p.iou(&objects[0].rect) >= 0.5);
        }
        // No constraint: every patch.
        let free = BatchSampler {
            constraint: Constraint::default(),
            ..s
        };
        assert!(free.satisfied(&rect(0.9, 0.9, 1.0, 1.0), &objects));
    }

    #[test]
    fn expansion_paints_the_mean_and_moves_the_boxes() {
        let g = Geometry {
            expand: Some((1.0, 2.0)),
            samplers: Vec::new(),
            resize: Vec::new(),
            jitter: None,
            labels: LabelLayout::Ssd,
            segmentation: None,
            lanes: None,
            emit: None,
            fill: vec![7.4],
            distort: None,
        };
        let e = Example {
            channels: 1,
            height: 2,
            width: 2,
            pixels: Pixels::Bytes(vec![1, 2, 3, 4]),
            label: 0,
        };
        let objects = vec![Object {
            label: 2,
            instance: 1,
            rect: rect(0.0, 0.0, 0.5, 1.0),
            difficult: true,
        }];
        let mut rng = SeededRng::new(11);
        let (out, moved, _) = g.reshape(e, Some(objects), &mut rng, 0).unwrap();
        let Pixels::Bytes(px) = &out.pixels else {
            panic!()
        };
        assert!(out.height >= 2 && out.width >= 2);
        // The image's four pixels once each, the rest the mean.
        assert_eq!(px.iter().filter(|&&v| v == 7).count(), px.len() - 4);
        let at = px.iter().position(|&v| v == 1).unwrap();
        let (y, x) = (at / out.width, at % out.width);
        assert_eq!(px[at + 1], 2);
        assert_eq!(px[at + out.width], 3);
        let b = moved.unwrap()[0];
        assert!(b.difficult && b.label == 2 && b.instance == 1);
        let (w, h) = (out.width as f32, out.height as f32);
        assert!((b.rect.xmin - x as f32 / w).abs() < 1e-6);
        assert!((b.rect.xmax - (x as f32 + 1.0) / w).abs() < 1e-6);
        assert!((b.rect.ymin - y as f32 / h).abs() < 1e-6);
        assert!((b.rect.ymax - (y as f32 + 2.0) / h).abs() < 1e-6);
    }

    #[test]
    fn a_crop_keeps_its_pixels() {
        let e = Example {
            channels: 1,
            height: 4,
            width: 4,
            pixels: Pixels::Bytes((0..16).collect()),
            label: 0,
        };
        let c = crop_image(&e, &rect(0.25, 0.5, 0.75, 1.0));
        assert_eq!((c.height, c.width), (2, 2));
        assert_eq!(c.pixels, Pixels::Bytes(vec![9, 10, 13, 14]));
    }
}
