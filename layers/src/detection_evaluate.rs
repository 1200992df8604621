//! The SSD fork's `DetectionEvaluate`: each detection of a batch
//! (DetectionOutput's rows) scored against the ground truth
//! (AnnotatedData's rows) as a true or a false positive, best score
//! first within each image and class, one ground truth matched at most
//! once; and each class's count of ground truth. The solver's
//! `eval_type: "detection"` turns the rows of a test into each class's
//! average precision and their mean (mAP). On the host, as in the fork.
//!
//! Given a `name_size_file`, boxes are matched in each test image's
//! pixels (as the fork's `OutputBBox` places them, end pixels counted)
//! instead of image-relative: the fork's published VOC figures were
//! measured so. As in the fork, the file's lines are taken in turn, one
//! for each image of a batch with a detection row.

use std::collections::BTreeMap;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::image_sizes::{ImageSize, OutputResize, SizedBox, output_box, read_name_sizes};
use crate::layer::Result;
use crate::normalized_box::Corners;

const OP: &str = "set up DetectionEvaluate";
const RUN: &str = "detection evaluate";

/// One box of an image: its corners, and its score (a detection) or
/// whether it is difficult (a ground truth).
#[derive(Clone, Copy, Debug)]
struct Scored {
    bbox: Corners,
    score: f32,
    difficult: bool,
}

/// Each image's boxes by label.
type ByImage = BTreeMap<i64, BTreeMap<i64, Vec<Scored>>>;

/// SSD `DetectionEvaluate`: bottoms (detections, ground truth), one top
/// of rows `[image, label, score, true positive, false positive]`, the
/// first `num_classes - 1` rows `[-1, label, ground truths, -1, -1]`.
pub(crate) struct DetectionEvaluateLayer {
    num_classes: i64,
    background: i64,
    overlap_threshold: f32,
    evaluate_difficult: bool,
    /// The test images' sizes, if boxes are matched in pixels.
    sizes: Vec<ImageSize>,
    resize: Option<OutputResize>,
    /// The line of `sizes` of the next image.
    count: usize,
}

impl DetectionEvaluateLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "detection_evaluate_param");
        if !p.has("num_classes") || p.uint("num_classes") == 0 {
            return Err(bad_param(OP, "Must provide num_classes (at least 1)."));
        }
        let overlap_threshold = p.float("overlap_threshold") as f32;
        if overlap_threshold.is_nan() || overlap_threshold <= 0.0 {
            return Err(bad_param(
                OP,
                format!("overlap_threshold must be positive, not {overlap_threshold}"),
            ));
        }
        let sizes = if p.has("name_size_file") {
            read_name_sizes(p.string("name_size_file"), OP)?
        } else {
            Vec::new()
        };
        Ok(Self {
            num_classes: p.uint("num_classes") as i64,
            background: p.uint("background_label_id") as i64,
            overlap_threshold,
            evaluate_difficult: p.boolean("evaluate_difficult_gt"),
            sizes,
            resize: OutputResize::from_param(&p, OP)?,
            count: 0,
        })
    }

    /// The classes scored (every one but the background).
    fn classes(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.num_classes).filter(move |&c| c != self.background)
    }

    /// The boxes of `rows` (of `width` values each) by image and label:
    /// the fork's `GetDetectionResults` (rows of image -1 passed over)
    /// or, with `stop_at_padding`, its `GetGroundTruth` (the first row of
    /// image -1 ends the list). A background label is refused.
    fn by_image(&self, rows: &[f32], width: usize, stop_at_padding: bool) -> Result<ByImage> {
        let mut all = ByImage::new();
        for (i, r) in rows.chunks_exact(width).enumerate() {
            let (image, label) = (r[0] as i64, r[1] as i64);
            if image == -1 {
                if stop_at_padding {
                    break;
                }
                continue;
            }
            if label == self.background {
                let what = if stop_at_padding {
                    "the dataset: ground-truth"
                } else {
                    "the detection results:"
                };
                return Err(bad_param(
                    RUN,
                    format!("Found background label in {what} row {i}"),
                ));
            }
            let (score, difficult) = if stop_at_padding {
                (0.0, r[7] != 0.0)
            } else {
                (r[2], false)
            };
            all.entry(image)
                .or_default()
                .entry(label)
                .or_default()
                .push(Scored {
                    bbox: Corners::from([r[3], r[4], r[5], r[6]]),
                    score,
                    difficult,
                });
        }
        Ok(all)
    }

    /// The rows of the top.
    fn evaluate(&mut self, detections: &[f32], truth: &[f32]) -> Result<Vec<[f32; 5]>> {
        let mut found = self.by_image(detections, 7, false)?;
        let truths = self.by_image(truth, 8, true)?;
        let mut positives: BTreeMap<i64, usize> = BTreeMap::new();
        for labels in truths.values() {
            for (&label, boxes) in labels {
                let count = boxes
                    .iter()
                    .filter(|b| self.evaluate_difficult || !b.difficult)
                    .count();
                *positives.entry(label).or_default() += count;
            }
        }
        let mut rows: Vec<[f32; 5]> = self
            .classes()
            .map(|c| {
                let n = positives.get(&c).copied().unwrap_or(0);
                [-1.0, c as f32, n as f32, -1.0, -1.0]
            })
            .collect();
        let none = BTreeMap::new();
        for (&image, labels) in &mut found {
            let size = self.sizes.get(self.count);
            if size.is_some() {
                self.count = (self.count + 1) % self.sizes.len();
            }
            let place = |b: Corners| match size {
                Some(size) => output_box(b, size, self.resize.as_ref()),
                None => SizedBox::normalized(b),
            };
            let gt_labels = truths.get(&image).unwrap_or(&none);
            for (&label, boxes) in labels.iter_mut() {
                if label == -1 {
                    continue;
                }
                let row =
                    |d: &Scored, tp: f32, fp: f32| [image as f32, label as f32, d.score, tp, fp];
                let Some(gts) = gt_labels.get(&label) else {
                    rows.extend(boxes.iter().map(|d| row(d, 0.0, 1.0)));
                    continue;
                };
                let mut visited = vec![false; gts.len()];
                let placed: Vec<SizedBox> = gts.iter().map(|g| place(g.bbox)).collect();
                boxes.sort_by(|a, b| b.score.total_cmp(&a.score));
                for d in boxes.iter() {
                    let mut best: (f32, Option<usize>) = (-1.0, None);
                    let d_placed = place(d.bbox);
                    for (j, g) in placed.iter().enumerate() {
                        let o = d_placed.iou(g);
                        if o > best.0 {
                            best = (o, Some(j));
                        }
                    }
                    rows.push(match best {
                        (o, Some(j)) if o >= self.overlap_threshold => {
                            if self.evaluate_difficult || !gts[j].difficult {
                                if visited[j] {
                                    row(d, 0.0, 1.0)
                                } else {
                                    visited[j] = true;
                                    row(d, 1.0, 0.0)
                                }
                            } else {
                                // A difficult match not evaluated: neither.
                                row(d, 0.0, 0.0)
                            }
                        }
                        _ => row(d, 0.0, 1.0),
                    });
                }
            }
        }
        Ok(rows)
    }

    /// The fork's checks of the bottoms' shapes.
    fn check<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<()> {
        for (b, width, what) in [(0, 7, "detections"), (1, 8, "ground truth")] {
            let s = bottoms[b].shape();
            let ok = s.len() == 4 && s[0] == 1 && s[1] == 1 && s[3] == width;
            if !ok {
                return Err(bad_param(
                    RUN,
                    format!(
                        "the {what} {} are not (1, 1, rows, {width})",
                        bottoms[b].shape_string()
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl<T: MathElement> DynLayer<T> for DetectionEvaluateLayer {
    fn type_name(&self) -> &str {
        "DetectionEvaluate"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        self.check(bottoms)?;
        // The fork sizes the top by the rows of a label other than -1
        // (its "nothing detected" rows have label -1).
        let detections = bottoms[0].cpu_data()?;
        let valid = detections
            .chunks_exact(7)
            .filter(|r| r[1].to_f64() != -1.0)
            .count();
        Ok(vec![TopShape::new(vec![
            1,
            1,
            self.classes().count() + valid,
            5,
        ])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let floats = |b: &Blob<T>| -> Result<Vec<f32>> {
            Ok(b.cpu_data()?.iter().map(|v| v.to_f64() as f32).collect())
        };
        let rows = self.evaluate(&floats(bottoms[0])?, &floats(bottoms[1])?)?;
        let mut top = tops[0].mutable_cpu_data()?;
        top.fill(T::from_f64(0.0));
        for (slot, r) in top.chunks_exact_mut(5).zip(&rows) {
            for (t, &v) in slot.iter_mut().zip(r) {
                *t = T::from_f64(f64::from(v));
            }
        }
        Ok(())
    }

    fn backward(&mut self, _tops: &[&Blob<T>], down: &[bool], _bottoms: &[&Blob<T>]) -> Result<()> {
        if down.iter().any(|&d| d) {
            return Err(bad_param(
                "detection evaluate backward",
                "DetectionEvaluate has no backward (as in the fork)",
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

/// How a class's average precision is taken from its precision-recall
/// curve (the fork's `ap_version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApVersion {
    /// VOC2007's: the mean of the best precision at recalls 0, 0.1, ...
    /// 1 (`"11point"`).
    ElevenPoint,
    /// VOC2012's and ILSVRC's: the area under the curve made monotone
    /// (`"MaxIntegral"`).
    MaxIntegral,
    /// The plain area under the curve (`"Integral"`, the fork's default).
    Integral,
}

impl ApVersion {
    /// By the fork's name.
    ///
    /// ```
    /// use blob_layers::solver::ApVersion;
    /// assert_eq!(ApVersion::from_name("11point"), Some(ApVersion::ElevenPoint));
    /// assert_eq!(ApVersion::from_name("11pt"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "11point" => Some(Self::ElevenPoint),
            "MaxIntegral" => Some(Self::MaxIntegral),
            "Integral" => Some(Self::Integral),
            _ => None,
        }
    }
}

/// The fork's `ComputeAP`: a class's average precision from its
/// detections' `(score, true positive)` (each one or the other, as
/// DetectionEvaluate marks them) and its `positives` count, in float as
/// the fork computes it. 0 where there is no detection or no positive.
///
/// ```
/// use blob_layers::solver::{ApVersion, average_precision};
/// // Two of three found, the best-scored right: precision 1 then 1/2.
/// let ap = average_precision(&[(0.9, true), (0.8, false), (0.7, true)], 3, ApVersion::Integral);
/// assert!((ap - (1.0 / 3.0 + 2.0 / 3.0 / 3.0)).abs() < 1e-6);
/// ```
pub fn average_precision(detections: &[(f32, bool)], positives: usize, version: ApVersion) -> f32 {
    if detections.is_empty() || positives == 0 {
        return 0.0;
    }
    // Stable: ties keep their order, as the fork's stable_sort.
    let mut sorted = detections.to_vec();
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (mut tp, mut fp) = (0usize, 0usize);
    let mut precision = Vec::with_capacity(sorted.len());
    let mut recall = Vec::with_capacity(sorted.len());
    for &(_, hit) in &sorted {
        if hit {
            tp += 1;
        } else {
            fp += 1;
        }
        precision.push(tp as f32 / (tp + fp) as f32);
        recall.push(tp as f32 / positives as f32);
    }
    const EPS: f32 = 1e-6;
    let n = sorted.len();
    match version {
        ApVersion::ElevenPoint => {
            let mut best = [0f32; 11];
            let mut start = n as isize - 1;
            for j in (0..=10).rev() {
                let mut i = start;
                while i >= 0 {
                    let k = i as usize;
                    if f64::from(recall[k]) < j as f64 / 10.0 {
                        start = i;
                        if j > 0 {
                            best[j - 1] = best[j];
                        }
                        break;
                    }
                    best[j] = best[j].max(precision[k]);
                    i -= 1;
                }
            }
            best.iter().rev().map(|p| p / 11.0).sum()
        }
        ApVersion::MaxIntegral => {
            let (mut cur_rec, mut cur_prec) = (recall[n - 1], precision[n - 1]);
            let mut ap = 0.0;
            for i in (0..n - 1).rev() {
                cur_prec = cur_prec.max(precision[i]);
                if (cur_rec - recall[i]).abs() > EPS {
                    ap += cur_prec * (cur_rec - recall[i]).abs();
                }
                cur_rec = recall[i];
            }
            ap + cur_rec * cur_prec
        }
        ApVersion::Integral => {
            let mut prev = 0.0;
            let mut ap = 0.0;
            for i in 0..n {
                if (recall[i] - prev).abs() > EPS {
                    ap += precision[i] * (recall[i] - prev).abs();
                }
                prev = recall[i];
            }
            ap
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(extra: &str) -> DetectionEvaluateLayer {
        let text = blob_proto::TextMessage::parse(&format!(
            "name: \"e\" type: \"DetectionEvaluate\" detection_evaluate_param {{ num_classes: 3 {extra} }}"
        ))
        .unwrap();
        let p = ParamMessage::from_text(&blob_proto::schema::LAYER_PARAMETER, &text).unwrap();
        DetectionEvaluateLayer::from_param(&p).unwrap()
    }

    #[test]
    fn detections_are_true_or_false_positives_best_first() {
        let truth = [
            0.0, 1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, //
            0.0, 2.0, 0.0, 0.5, 0.5, 1.0, 1.0, 1.0, //
            -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        ];
        let detections = [
            0.0, 1.0, 0.6, 0.0, 0.0, 0.5, 0.5, // the box: true, but second
            0.0, 1.0, 0.9, 0.0, 0.0, 0.5, 0.45, // best: true positive
            0.0, 2.0, 0.8, 0.5, 0.5, 1.0, 1.0, // a difficult box
            1.0, 1.0, 0.7, 0.0, 0.0, 1.0, 1.0, // an image with no truth
            2.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, // nothing detected
        ];
        let rows = layer("evaluate_difficult_gt: false")
            .evaluate(&detections, &truth)
            .unwrap();
        assert_eq!(
            rows,
            [
                [-1.0, 1.0, 1.0, -1.0, -1.0],
                [-1.0, 2.0, 0.0, -1.0, -1.0],
                [0.0, 1.0, 0.9, 1.0, 0.0],
                [0.0, 1.0, 0.6, 0.0, 1.0],
                [0.0, 2.0, 0.8, 0.0, 0.0],
                [1.0, 1.0, 0.7, 0.0, 1.0],
            ]
        );
        let all = layer("").evaluate(&detections, &truth).unwrap();
        assert_eq!(all[1], [-1.0, 2.0, 1.0, -1.0, -1.0]);
        assert_eq!(all[4], [0.0, 2.0, 0.8, 1.0, 0.0]);
    }

    #[test]
    fn with_a_name_size_file_boxes_match_in_each_images_pixels_in_turn() {
        let dir = std::env::temp_dir().join(format!("blobflow-eval-sizes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sizes = dir.join("test_name_size.txt");
        std::fs::write(&sizes, "000001 100 100\n000002 1000 1000\n").unwrap();
        let truth = [
            0.0, 1.0, 0.0, 0.01, 0.01, 0.03, 0.03, 0.0, //
            1.0, 1.0, 0.0, 0.01, 0.01, 0.03, 0.03, 0.0,
        ];
        let detections = [
            0.0, 1.0, 0.9, 0.0, 0.0, 0.02, 0.02, //
            1.0, 1.0, 0.9, 0.0, 0.0, 0.02, 0.02,
        ];
        let extra = format!(
            "overlap_threshold: 0.25 name_size_file: \"{}\"",
            sizes.display()
        );
        let mut pixels = layer(&extra);
        // Image 0 is 100 pixels a side: 3 x 3 boxes sharing 2 x 2 pixels
        // (4/14); image 1 is 1000: 21 x 21 sharing 11 x 11 (121/761).
        // Image-relative, they share 1/7 of their union.
        let rows = pixels.evaluate(&detections, &truth).unwrap();
        assert_eq!(
            rows[2..],
            [[0.0, 1.0, 0.9, 1.0, 0.0], [1.0, 1.0, 0.9, 0.0, 1.0]]
        );
        // The file's lines are taken in turn, from the first again.
        let again = pixels.evaluate(&detections[..7], &truth[..8]).unwrap();
        assert_eq!(again[2], [0.0, 1.0, 0.9, 1.0, 0.0]);
        let relative = layer("overlap_threshold: 0.25")
            .evaluate(&detections, &truth)
            .unwrap();
        assert_eq!(relative[2][3..], [0.0, 1.0]);
        let err = DetectionEvaluateLayer::from_param(
            &ParamMessage::from_text(
                &blob_proto::schema::LAYER_PARAMETER,
                &blob_proto::TextMessage::parse(
                    "type: \"DetectionEvaluate\" detection_evaluate_param { num_classes: 3 name_size_file: \"/no/such/file\" }",
                )
                .unwrap(),
            )
            .unwrap(),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("/no/such/file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn average_precision_as_voc_computes_it() {
        let d = [(0.9, true), (0.8, false), (0.7, true), (0.6, false)];
        // Recall 1/2 at precision 1, 1 at 2/3: 11 points, 6 of 1 and 5 of
        // 2/3.
        let eleven = average_precision(&d, 2, ApVersion::ElevenPoint);
        assert!(
            (eleven - (6.0 + 5.0 * 2.0 / 3.0) / 11.0).abs() < 1e-6,
            "{eleven}"
        );
        let max = average_precision(&d, 2, ApVersion::MaxIntegral);
        assert!((max - (0.5 + 0.5 * 2.0 / 3.0)).abs() < 1e-6, "{max}");
        let plain = average_precision(&d, 2, ApVersion::Integral);
        assert!((plain - (0.5 + 0.5 * 2.0 / 3.0)).abs() < 1e-6, "{plain}");
        assert_eq!(average_precision(&[], 2, ApVersion::Integral), 0.0);
        assert_eq!(average_precision(&d, 0, ApVersion::Integral), 0.0);
    }
}
