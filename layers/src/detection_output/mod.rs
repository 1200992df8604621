//! The SSD fork's DetectionOutput: box offsets decoded against the prior
//! boxes, per-class greedy non-maximum suppression, and the kept boxes as
//! rows `[image, label, score, xmin, ymin, xmax, ymax]`. On the host
//! whatever the device; no backward (as in the fork).
//!
//! The number of rows depends on the scores, and a run-time layer's
//! tops are sized by its reshape step: the detections are found there
//! (the net reshapes each layer just before its forward, its bottoms
//! already computed) and forward writes them. A net also reshapes before
//! any forward (at build), on inputs not yet computed: what their values
//! make wrong (a prior box of no width) is reported by forward.
//!
//! With `save_output_param`, each forward also keeps its detections for
//! the test set's result files (see [`save`]).

mod nms;
mod save;

use std::collections::BTreeMap;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;
use crate::normalized_box::{Code, Corners, decode};
use nms::greedy_nms;
use save::SaveOutput;

const OP: &str = "set up DetectionOutput";

/// SSD `DetectionOutput`: bottoms (loc, conf, priors), one top.
pub(crate) struct DetectionOutputLayer {
    num_classes: usize,
    share_location: bool,
    background: i64,
    nms_threshold: f32,
    top_k: Option<usize>,
    eta: f32,
    code: Code,
    keep_top_k: Option<usize>,
    variance_encoded_in_target: bool,
    confidence_threshold: f32,
    /// The rows found at the last reshape, or why there are none.
    rows: Result<Vec<[f32; 7]>>,
    /// Where the test set's detections are saved, if anywhere.
    save: Option<SaveOutput>,
}

impl DetectionOutputLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "detection_output_param");
        if !p.has("num_classes") || p.uint("num_classes") == 0 {
            return Err(bad_param(OP, "must specify num_classes (at least 1)"));
        }
        let nms = sub_param(&p, "nms_param");
        let nms_threshold = nms.float("nms_threshold") as f32;
        if nms_threshold.is_nan() || nms_threshold < 0.0 {
            return Err(bad_param(
                OP,
                format!("nms_threshold must be non negative, not {nms_threshold}"),
            ));
        }
        let eta = nms.float("eta") as f32;
        if !(eta > 0.0 && eta <= 1.0) {
            return Err(bad_param(OP, format!("eta must be in (0, 1], not {eta}")));
        }
        let count = |v: i64| usize::try_from(v).ok();
        let num_classes = p.uint("num_classes") as usize;
        let background = p.int("background_label_id");
        Ok(Self {
            save: SaveOutput::from_param(&p, num_classes, background)?,
            num_classes,
            share_location: p.boolean("share_location"),
            background,
            nms_threshold,
            top_k: if nms.has("top_k") {
                count(nms.int("top_k"))
            } else {
                None
            },
            eta,
            code: Code::from_param(&p, "code_type"),
            keep_top_k: count(p.int("keep_top_k")),
            variance_encoded_in_target: p.boolean("variance_encoded_in_target"),
            confidence_threshold: if p.has("confidence_threshold") {
                p.float("confidence_threshold") as f32
            } else {
                -f32::MAX
            },
            rows: Ok(Vec::new()),
        })
    }

    /// The fork's checks of the inputs' shapes.
    fn check_shapes<T: MathElement>(
        &self,
        loc: &Blob<T>,
        conf: &Blob<T>,
        priors: &Blob<T>,
    ) -> Result<()> {
        let num = loc.shape().first().copied().unwrap_or(0);
        let num_priors = priors.shape().get(2).copied().unwrap_or(0) / 4;
        let loc_classes = if self.share_location {
            1
        } else {
            self.num_classes
        };
        let width = |b: &Blob<T>| b.count() / num.max(1);
        let check = |what: &str, got: usize, want: usize| {
            if got == want {
                return Ok(());
            }
            Err(bad_param(
                "detection output",
                format!(
                    "Number of priors must match number of {what} predictions: {num_priors} priors want {want} values per image, the input has {got}"
                ),
            ))
        };
        if priors.count() < num_priors * 8 {
            return Err(bad_param(
                "detection output",
                format!(
                    "the priors {} hold no variances (want shape (1, 2, P*4))",
                    priors.shape_string()
                ),
            ));
        }
        if conf.shape().first().copied().unwrap_or(0) != num {
            return Err(bad_param(
                "detection output",
                format!(
                    "location {} and confidence {} differ in batch",
                    loc.shape_string(),
                    conf.shape_string()
                ),
            ));
        }
        if num > 0 {
            check("location", width(loc), num_priors * loc_classes * 4)?;
            check("confidence", width(conf), num_priors * self.num_classes)?;
        }
        Ok(())
    }

    /// Every image's detections, in the fork's row order (the shapes
    /// checked).
    fn detect<T: MathElement>(
        &self,
        loc: &Blob<T>,
        conf: &Blob<T>,
        priors: &Blob<T>,
    ) -> Result<Vec<[f32; 7]>> {
        let num = loc.shape().first().copied().unwrap_or(0);
        let num_priors = priors.shape().get(2).copied().unwrap_or(0) / 4;
        let loc_classes = if self.share_location {
            1
        } else {
            self.num_classes
        };
        let (loc, conf, priors) = (loc.cpu_data()?, conf.cpu_data()?, priors.cpu_data()?);
        let value = |v: &T| v.to_f64() as f32;
        let quad = |s: &[T]| [value(&s[0]), value(&s[1]), value(&s[2]), value(&s[3])];
        let mut rows = Vec::new();
        for image in 0..num {
            // Decoded boxes per location class.
            let mut boxes = vec![Vec::with_capacity(num_priors); loc_classes];
            for p in 0..num_priors {
                let prior = Corners::from(quad(&priors[p * 4..]));
                let variance = quad(&priors[(num_priors + p) * 4..]);
                for (l, set) in boxes.iter_mut().enumerate() {
                    let at = ((image * num_priors + p) * loc_classes + l) * 4;
                    set.push(decode(
                        self.code,
                        self.variance_encoded_in_target,
                        prior,
                        variance,
                        quad(&loc[at..]),
                    )?);
                }
            }
            let scores_of = |c: usize| -> Vec<f32> {
                (0..num_priors)
                    .map(|p| value(&conf[(image * num_priors + p) * self.num_classes + c]))
                    .collect()
            };
            let mut kept: BTreeMap<usize, Vec<(usize, f32)>> = BTreeMap::new();
            let mut total = 0;
            for c in 0..self.num_classes {
                if c as i64 == self.background {
                    continue;
                }
                let scores = scores_of(c);
                let set = &boxes[if self.share_location { 0 } else { c }];
                let picked = greedy_nms(
                    set,
                    &scores,
                    self.confidence_threshold,
                    self.nms_threshold,
                    self.eta,
                    self.top_k,
                );
                total += picked.len();
                kept.insert(c, picked.into_iter().map(|i| (i, scores[i])).collect());
            }
            if let Some(keep) = self.keep_top_k
                && total > keep
            {
                let mut pooled: Vec<(f32, usize, usize)> = kept
                    .iter()
                    .flat_map(|(&c, v)| v.iter().map(move |&(i, s)| (s, c, i)))
                    .collect();
                pooled.sort_by(|a, b| b.0.total_cmp(&a.0));
                pooled.truncate(keep);
                kept.clear();
                for (s, c, i) in pooled {
                    kept.entry(c).or_default().push((i, s));
                }
            }
            for (&c, picked) in &kept {
                let set = &boxes[if self.share_location { 0 } else { c }];
                for &(i, score) in picked {
                    let b = set[i];
                    rows.push([
                        image as f32,
                        c as f32,
                        score,
                        b.xmin,
                        b.ymin,
                        b.xmax,
                        b.ymax,
                    ]);
                }
            }
        }
        if rows.is_empty() {
            rows = nothing_detected(num);
        }
        Ok(rows)
    }
}

/// One row per image, -1 but for the image index: the SSD fork's (and
/// the YOLO forks') "nothing detected".
pub(crate) fn nothing_detected(images: usize) -> Vec<[f32; 7]> {
    (0..images)
        .map(|i| {
            let mut r = [-1.0; 7];
            r[0] = i as f32;
            r
        })
        .collect()
}

/// The rows a reshape found into the top it sized, or why there are none
/// (taken, so a pass without its reshape writes nothing stale).
pub(crate) fn write_rows<T: MathElement>(
    rows: &mut Result<Vec<[f32; 7]>>,
    top: &Blob<T>,
) -> Result<()> {
    let rows = std::mem::replace(rows, Ok(Vec::new()))?;
    let mut top = top.mutable_cpu_data()?;
    for (out, v) in top.iter_mut().zip(rows.iter().flatten()) {
        *out = T::from_f64(f64::from(*v));
    }
    Ok(())
}

impl<T: MathElement> DynLayer<T> for DetectionOutputLayer {
    fn type_name(&self) -> &str {
        "DetectionOutput"
    }

    fn bottoms(&self) -> Arity {
        Arity::range(3, 4)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        self.check_shapes(bottoms[0], bottoms[1], bottoms[2])?;
        self.rows = self.detect(bottoms[0], bottoms[1], bottoms[2]);
        let rows = self.rows.as_ref().map_or(1, Vec::len);
        Ok(vec![TopShape::new(vec![1, 1, rows, 7])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        if let (Some(save), Ok(rows)) = (&mut self.save, &self.rows) {
            save.record(rows, bottoms[0].shape().first().copied().unwrap_or(0))?;
        }
        write_rows(&mut self.rows, tops[0])
    }

    fn backward(&mut self, _tops: &[&Blob<T>], down: &[bool], _bottoms: &[&Blob<T>]) -> Result<()> {
        if down.iter().any(|&d| d) {
            return Err(bad_param(
                "detection output",
                "DetectionOutput has no backward pass (as in the SSD fork)",
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
