//! The SSD fork's `MultiBoxLoss` (weiliu89/caffe, branch ssd): SSD's
//! training loss. Bottoms: the location offsets `(N, P * L * 4)`, the
//! class scores `(N, P * C)`, PriorBox's priors `(1, 2, P * 4)` and the
//! ground truth `(1, 1, G, 8)` that AnnotatedData writes (rows of item,
//! label, instance, xmin, ymin, xmax, ymax, difficult; item -1 for
//! none). Each image's priors (or decoded predictions) are matched to
//! its boxes, the matched offsets regress the boxes' codes (smooth L1 or
//! L2), and the matched priors and the hardest negatives classify
//! (softmax or logistic), both divided by the normalizer
//! (`loss_param`'s, VALID by default: the number of matches). Mining
//! (see [`matching`]) picks the negatives (MAX_NEGATIVE) or the priors
//! of highest loss, matched or not (HARD_EXAMPLE, online hard example
//! mining), after a suppression of overlapping candidates where
//! `nms_param` asks for one.
//!
//! Caffe runs the loss on the host (the fork's GPU side only computes
//! the confidences for mining); here too, whatever the device: the
//! blobs' heads move the scores and the gradients.

mod matching;

use std::collections::BTreeMap;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;
use crate::loss::{Normalization, loss_settings};
use crate::normalized_box::{Code, Corners, decode, encode};
use matching::{Matched, Mining, MiningNms, match_boxes, mine};

const OP: &str = "set up MultiBoxLoss";
const RUN: &str = "multibox loss";

/// How the matched offsets are held to the boxes' codes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum LocLoss {
    /// The fork's `SmoothL1Loss`: `0.5 d^2` below 1, `|d| - 0.5` above.
    SmoothL1,
    /// Caffe's `EuclideanLoss` of one item: `d^2 / 2`.
    L2,
}

/// How the chosen priors classify.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ConfLoss {
    /// Caffe's `SoftmaxWithLoss` over each prior's classes.
    Softmax,
    /// Caffe's `SigmoidCrossEntropyLoss`, each class on its own.
    Logistic,
}

/// The layer's `multibox_loss_param` and `loss_param`.
#[derive(Clone, Debug)]
struct Settings {
    num_classes: usize,
    share_location: bool,
    bipartite_only: bool,
    overlap_threshold: f32,
    use_prior_for_matching: bool,
    background: usize,
    use_difficult_gt: bool,
    /// Which priors classify besides the matched ones (none: every prior
    /// classifies, NONE).
    mining: Option<Mining>,
    /// The suppression of overlapping candidates before mining.
    mining_nms: Option<MiningNms>,
    /// Whether that suppression compares the priors (else the decoded
    /// predictions).
    use_prior_for_nms: bool,
    code: Code,
    variance_in_target: bool,
    agnostic: bool,
    ignore_cross_boundary: bool,
    bp_inside: bool,
    loc_loss: LocLoss,
    conf_loss: ConfLoss,
    loc_weight: f64,
    normalization: Normalization,
    /// `propagate_down` of the location and confidence bottoms: which
    /// of the two losses count (the fork's default: both).
    loc_counts: bool,
    conf_counts: bool,
    /// Whether the prototxt asks for a gradient to the priors or the
    /// ground truth, which the fork refuses at backward.
    down_to_inputs: [bool; 2],
}

impl Settings {
    fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "multibox_loss_param");
        if !p.has("num_classes") || p.uint("num_classes") == 0 {
            return Err(bad_param(
                OP,
                "Must provide num_classes (at least 1) in multibox_loss_param",
            ));
        }
        let num_classes = p.uint("num_classes") as usize;
        let background = p.uint("background_label_id") as usize;
        let share_location = p.boolean("share_location");
        let positive = |name: &str| -> Result<f32> {
            let v = p.float(name) as f32;
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(bad_param(
                    OP,
                    format!("{name} must be a non-negative number, not {v}"),
                ))
            }
        };
        let mining = match p.enum_name("mining_type") {
            "MAX_NEGATIVE" => Some(Mining::MaxNegative {
                neg_pos_ratio: positive("neg_pos_ratio")?,
                neg_overlap: positive("neg_overlap")?,
            }),
            "HARD_EXAMPLE" => {
                let sample_size = p.int("sample_size");
                if sample_size <= 0 {
                    return Err(bad_param(
                        OP,
                        format!(
                            "sample_size must be positive for HARD_EXAMPLE mining, not {sample_size}"
                        ),
                    ));
                }
                Some(Mining::HardExample {
                    sample_size: sample_size as usize,
                })
            }
            _ => None,
        };
        if p.has("do_neg_mining") && p.boolean("do_neg_mining") != mining.is_some() {
            return Err(bad_param(
                OP,
                format!(
                    "do_neg_mining: {} contradicts mining_type {} (do_neg_mining is deprecated; \
                     give mining_type alone)",
                    p.boolean("do_neg_mining"),
                    p.enum_name("mining_type")
                ),
            ));
        }
        if mining.is_some() && !share_location {
            return Err(bad_param(
                OP,
                "Currently only support negative mining if share_location is true.",
            ));
        }
        let nms = sub_param(&p, "nms_param");
        let threshold = nms.float("nms_threshold") as f32;
        // The fork suppresses where nms_param is given with a positive
        // threshold; its top_k unset reads 0, which would choose nothing.
        let mining_nms = if mining.is_some() && p.has("nms_param") && threshold > 0.0 {
            let top_k = nms.int("top_k");
            if !nms.has("top_k") || top_k == 0 {
                return Err(bad_param(
                    OP,
                    "nms_param before mining needs a top_k (-1 for no limit): the fork's unset \
                     top_k is 0 and mines nothing",
                ));
            }
            Some(MiningNms {
                threshold,
                top_k: usize::try_from(top_k).unwrap_or(usize::MAX),
            })
        } else {
            None
        };
        let conf_loss = match p.enum_name("conf_loss_type") {
            "LOGISTIC" => ConfLoss::Logistic,
            _ => ConfLoss::Softmax,
        };
        if conf_loss == ConfLoss::Softmax && background >= num_classes {
            return Err(bad_param(
                OP,
                format!(
                    "background_label_id should be within [0, num_classes) for Softmax: \
                     {background} with {num_classes} classes"
                ),
            ));
        }
        let agnostic = p.boolean("map_object_to_agnostic");
        if agnostic && num_classes != 2 {
            return Err(bad_param(
                OP,
                format!(
                    "map_object_to_agnostic wants num_classes 2 (background and object), not \
                     {num_classes}"
                ),
            ));
        }
        let down = layer.bools("propagate_down");
        let down_at = |i: usize, unset: bool| down.get(i).copied().unwrap_or(unset);
        let (normalization, ignore) = loss_settings(layer, Normalization::Valid);
        if ignore.is_some() {
            return Err(bad_param(
                OP,
                "loss_param's ignore_label has no meaning for MultiBoxLoss (its labels are \
                 boxes'); leave it out",
            ));
        }
        Ok(Self {
            num_classes,
            share_location,
            bipartite_only: p.enum_name("match_type") == "BIPARTITE",
            overlap_threshold: positive("overlap_threshold")?,
            use_prior_for_matching: p.boolean("use_prior_for_matching"),
            background,
            use_difficult_gt: p.boolean("use_difficult_gt"),
            mining,
            mining_nms,
            use_prior_for_nms: p.boolean("use_prior_for_nms"),
            code: Code::from_param(&p, "code_type"),
            variance_in_target: p.boolean("encode_variance_in_target"),
            agnostic,
            ignore_cross_boundary: p.boolean("ignore_cross_boundary_bbox"),
            bp_inside: p.boolean("bp_inside"),
            loc_loss: match p.enum_name("loc_loss_type") {
                "L2" => LocLoss::L2,
                _ => LocLoss::SmoothL1,
            },
            conf_loss,
            loc_weight: f64::from(positive("loc_weight")?),
            normalization,
            loc_counts: down_at(0, true),
            conf_counts: down_at(1, true),
            down_to_inputs: [down_at(2, false), down_at(3, false)],
        })
    }

    /// How many location sets each prior has.
    fn loc_classes(&self) -> usize {
        if self.share_location {
            1
        } else {
            self.num_classes
        }
    }
}

/// One ground-truth box.
#[derive(Clone, Copy, Debug)]
struct Truth {
    label: usize,
    bbox: Corners,
}

/// What a forward pass found, for its backward.
#[derive(Debug, Default)]
struct Pass {
    normalizer: f64,
    /// The location loss's gradient (before the loss weight and the
    /// normalizer), at the index of the location bottom it belongs to.
    loc_grad: Vec<(usize, [f64; 4])>,
    /// The confidence loss's gradient per classified prior, at the
    /// index of its first class in the confidence bottom.
    conf_grad: Vec<(usize, Vec<f64>)>,
}

/// SSD `MultiBoxLoss`: four bottoms, one scalar top.
pub(crate) struct MultiBoxLossLayer {
    s: Settings,
    pass: Option<Pass>,
}

impl MultiBoxLossLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        Ok(Self {
            s: Settings::from_param(layer)?,
            pass: None,
        })
    }
}

/// The sizes the bottoms agree on.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    num: usize,
    priors: usize,
    truths: usize,
}

impl Settings {
    /// The fork's shape checks, and the sizes they agree on.
    fn sizes<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<Sizes> {
        let (loc, conf, priors, gt) = (bottoms[0], bottoms[1], bottoms[2], bottoms[3]);
        let num = loc.shape().first().copied().unwrap_or(1);
        let at = |b: &Blob<T>, i: usize| b.shape().get(i).copied().unwrap_or(1);
        let num_priors = at(priors, 2) / 4;
        if priors.count() != 2 * num_priors * 4 || at(priors, 2) % 4 != 0 {
            return Err(bad_param(
                RUN,
                format!(
                    "the priors {} are not PriorBox's (1, 2, P*4): coordinates and variances",
                    priors.shape_string()
                ),
            ));
        }
        if conf.shape().first().copied().unwrap_or(1) != num {
            return Err(bad_param(
                RUN,
                format!(
                    "the location {} and confidence {} inputs differ in batch",
                    loc.shape_string(),
                    conf.shape_string()
                ),
            ));
        }
        let per_image = |b: &Blob<T>| b.count() / num.max(1);
        if per_image(loc) != num_priors * self.loc_classes() * 4 {
            return Err(bad_param(
                RUN,
                format!(
                    "Number of priors must match number of location predictions: {num_priors} \
                     priors x {} location classes x 4 per image, the input {} has {}",
                    self.loc_classes(),
                    loc.shape_string(),
                    per_image(loc)
                ),
            ));
        }
        if per_image(conf) != num_priors * self.num_classes {
            return Err(bad_param(
                RUN,
                format!(
                    "Number of priors must match number of confidence predictions: \
                     {num_priors} priors x {} classes per image, the input {} has {}",
                    self.num_classes,
                    conf.shape_string(),
                    per_image(conf)
                ),
            ));
        }
        let truths = at(gt, 2);
        if gt.count() != truths * 8 {
            return Err(bad_param(
                RUN,
                format!(
                    "the ground truth {} is not AnnotatedData's (1, 1, G, 8)",
                    gt.shape_string()
                ),
            ));
        }
        Ok(Sizes {
            num,
            priors: num_priors,
            truths,
        })
    }

    /// The fork's `GetGroundTruth`: each image's boxes, difficult ones
    /// left out unless used; rows of item -1 are padding.
    fn truths(&self, gt: &[f32], sizes: Sizes) -> Result<BTreeMap<usize, Vec<Truth>>> {
        let mut all: BTreeMap<usize, Vec<Truth>> = BTreeMap::new();
        for (row, v) in gt.chunks_exact(8).enumerate().take(sizes.truths) {
            let item = v[0];
            if item == -1.0 {
                continue;
            }
            let whole = |x: f32| x.is_finite() && x >= 0.0 && x.fract() == 0.0;
            if !whole(item) || item as usize >= sizes.num {
                return Err(bad_param(
                    RUN,
                    format!(
                        "ground-truth row {row} is for item {item}, not one of the batch's {} \
                         images (or -1)",
                        sizes.num
                    ),
                ));
            }
            let label = v[1];
            if !whole(label) || label as usize >= self.num_classes {
                return Err(bad_param(
                    RUN,
                    format!(
                        "ground-truth row {row} has label {label}, not a class below {}",
                        self.num_classes
                    ),
                ));
            }
            if label as usize == self.background {
                return Err(bad_param(
                    RUN,
                    format!(
                        "Found background label in the dataset: ground-truth row {row} has \
                         label {label}, the background_label_id"
                    ),
                ));
            }
            if v[7] != 0.0 && !self.use_difficult_gt {
                continue;
            }
            all.entry(item as usize).or_default().push(Truth {
                label: label as usize,
                bbox: Corners::from([v[3], v[4], v[5], v[6]]),
            });
        }
        Ok(all)
    }

    /// The fork's `FindMatches` for one image: per location label (-1
    /// when shared), what matched.
    fn find_matches(
        &self,
        truths: &[Truth],
        priors: &[Corners],
        variances: &[[f32; 4]],
        loc_of: impl Fn(usize, usize) -> [f32; 4],
    ) -> Result<BTreeMap<i64, Matched>> {
        let boxes: Vec<Corners> = truths.iter().map(|t| t.bbox).collect();
        let all: Vec<usize> = (0..truths.len()).collect();
        let mut matches = BTreeMap::new();
        let matcher = |preds: &[Corners], candidates: &[usize]| {
            match_boxes(
                &boxes,
                candidates,
                preds,
                self.bipartite_only,
                self.overlap_threshold,
                self.ignore_cross_boundary,
            )
        };
        if self.use_prior_for_matching {
            let m = matcher(priors, &all);
            if self.share_location {
                matches.insert(-1, m);
            } else {
                for c in (0..self.num_classes).filter(|&c| c != self.background) {
                    // Each class keeps the matches of its own label; the
                    // fork's per-class copies forget the ignored ones.
                    let indices = m
                        .indices
                        .iter()
                        .map(|&g| g.filter(|&g| truths[g].label == c))
                        .collect();
                    let per_class = Matched {
                        indices,
                        ignored: vec![false; priors.len()],
                        overlaps: m.overlaps.clone(),
                    };
                    matches.insert(c as i64, per_class);
                }
            }
        } else {
            for c in 0..self.loc_classes() {
                if !self.share_location && c == self.background {
                    continue;
                }
                let decoded = (0..priors.len())
                    .map(|p| {
                        decode(
                            self.code,
                            self.variance_in_target,
                            priors[p],
                            variances[p],
                            loc_of(p, c),
                        )
                    })
                    .collect::<Result<Vec<_>>>()?;
                let (label, candidates): (i64, Vec<usize>) = if self.share_location {
                    (-1, all.clone())
                } else {
                    let of_class = all.iter().copied().filter(|&g| truths[g].label == c);
                    (c as i64, of_class.collect())
                };
                matches.insert(label, matcher(&decoded, &candidates));
            }
        }
        Ok(matches)
    }
}

/// The fork's `ComputeConfLoss` of one prior: its scores' loss against
/// `label`, in float as the fork ranks negatives by it.
fn confidence_loss(kind: ConfLoss, scores: &[f32], label: usize) -> f32 {
    match kind {
        ConfLoss::Softmax => {
            let max = scores.iter().copied().fold(scores[0], f32::max);
            let sum: f32 = scores.iter().map(|&s| (s - max).exp()).sum();
            let prob = (scores[label] - max).exp() / sum;
            -prob.max(f32::MIN_POSITIVE).ln()
        }
        ConfLoss::Logistic => scores
            .iter()
            .enumerate()
            .map(|(c, &x)| logistic_term(f64::from(x), c == label) as f32)
            .sum(),
    }
}

/// Caffe's stable sigmoid cross-entropy of one score against `target`.
fn logistic_term(x: f64, target: bool) -> f64 {
    let pos = if x >= 0.0 { 1.0 } else { 0.0 };
    let t = if target { 1.0 } else { 0.0 };
    -(x * (t - pos) - (1.0 + (x - 2.0 * x * pos).exp()).ln())
}

/// One classified prior's loss and gradient (Caffe's SoftmaxWithLoss
/// or SigmoidCrossEntropyLoss on a row, unnormalized); `target` None:
/// no class is 1 (a logistic negative whose background is no class).
fn classify(kind: ConfLoss, scores: &[f64], target: Option<usize>) -> (f64, Vec<f64>) {
    match kind {
        ConfLoss::Softmax => {
            let target = target.unwrap_or(0);
            let max = scores.iter().copied().fold(scores[0], f64::max);
            let exps: Vec<f64> = scores.iter().map(|&s| (s - max).exp()).collect();
            let sum: f64 = exps.iter().sum();
            let mut grad: Vec<f64> = exps.iter().map(|e| e / sum).collect();
            let loss = -grad[target].max(f64::from(f32::MIN_POSITIVE)).ln();
            grad[target] -= 1.0;
            (loss, grad)
        }
        ConfLoss::Logistic => {
            let mut loss = 0.0;
            let grad = scores
                .iter()
                .enumerate()
                .map(|(c, &x)| {
                    let hit = target == Some(c);
                    loss += logistic_term(x, hit);
                    let sigmoid = 1.0 / (1.0 + (-x).exp());
                    sigmoid - if hit { 1.0 } else { 0.0 }
                })
                .collect();
            (loss, grad)
        }
    }
}

/// The location loss of one offset's difference, and its derivative.
fn regress(kind: LocLoss, d: f64) -> (f64, f64) {
    match kind {
        LocLoss::SmoothL1 if d.abs() < 1.0 => (0.5 * d * d, d),
        LocLoss::SmoothL1 => (d.abs() - 0.5, d.signum()),
        LocLoss::L2 => (0.5 * d * d, d),
    }
}

impl MultiBoxLossLayer {
    /// The loss, with what backward needs.
    fn compute<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<(f64, Pass)> {
        let s = &self.s;
        let sizes = s.sizes(bottoms)?;
        // Matching and mining in float, as the fork; the losses and
        // their gradients from the bottoms' own values.
        let doubles = |b: &Blob<T>| -> Result<Vec<f64>> {
            Ok(b.cpu_data()?.iter().map(|v| v.to_f64()).collect())
        };
        let floats = |v: &[f64]| -> Vec<f32> { v.iter().map(|&v| v as f32).collect() };
        let (loc64, conf64) = (doubles(bottoms[0])?, doubles(bottoms[1])?);
        let (loc, conf) = (floats(&loc64), floats(&conf64));
        let (prior_data, gt) = (floats(&doubles(bottoms[2])?), floats(&doubles(bottoms[3])?));
        let (num, np, nc, lc) = (sizes.num, sizes.priors, s.num_classes, s.loc_classes());
        let truths = s.truths(&gt, sizes)?;
        let quad = |v: &[f32]| [v[0], v[1], v[2], v[3]];
        let priors: Vec<Corners> = (0..np)
            .map(|p| Corners::from(quad(&prior_data[p * 4..])))
            .collect();
        let variances: Vec<[f32; 4]> = (0..np).map(|p| quad(&prior_data[(np + p) * 4..])).collect();
        let loc_index = |i: usize, p: usize, c: usize| ((i * np + p) * lc + c) * 4;
        let scores = |i: usize, p: usize| &conf[(i * np + p) * nc..][..nc];

        // A match's location loss and its gradient per offset: the
        // fork's EncodeLocPrediction, then smooth L1 or L2.
        let offsets = |i: usize, p: usize, g: usize, c: usize| -> Result<(f64, [f64; 4])> {
            let target = encode(
                s.code,
                s.variance_in_target,
                priors[p],
                variances[p],
                truths[&i][g].bbox,
            )?;
            let at = loc_index(i, p, c);
            // With bp_inside, a coordinate of the matched box outside
            // the image takes no gradient: the fork sets its prediction
            // to its target.
            let outside = if s.bp_inside {
                let matched = if s.use_prior_for_matching {
                    priors[p]
                } else {
                    let pred = quad(&loc[at..]);
                    decode(s.code, s.variance_in_target, priors[p], variances[p], pred)?
                };
                [matched.xmin, matched.ymin, matched.xmax, matched.ymax]
                    .map(|v| !(0.0..=1.0).contains(&v))
            } else {
                [false; 4]
            };
            let (mut loss, mut grad) = (0.0, [0.0; 4]);
            for k in 0..4 {
                let predicted = if outside[k] {
                    f64::from(target[k])
                } else {
                    loc64[at + k]
                };
                let (mut a, mut b) = (predicted, f64::from(target[k]));
                if s.variance_in_target {
                    let v = f64::from(variances[p][k]);
                    if v.is_nan() || v <= 0.0 {
                        return Err(bad_param(
                            RUN,
                            format!(
                                "prior {p}'s variance is {v}; it divides the offsets and must be positive"
                            ),
                        ));
                    }
                    (a, b) = (a / v, b / v);
                }
                let (l, d) = regress(s.loc_loss, a - b);
                loss += l;
                // The gradient of the divided prediction goes to the
                // bottom as it is, as the fork copies it (not divided by
                // the variance once more).
                grad[k] = d;
            }
            Ok((loss, grad))
        };

        // Matching, then mining, image by image.
        let mut all_matches: Vec<BTreeMap<i64, Matched>> = Vec::with_capacity(num);
        let mut negatives: Vec<Vec<usize>> = vec![Vec::new(); num];
        for (i, negs) in negatives.iter_mut().enumerate() {
            let Some(ts) = truths.get(&i) else {
                all_matches.push(BTreeMap::new());
                continue;
            };
            let mut matches = s.find_matches(ts, &priors, &variances, |p, c| {
                quad(&loc[loc_index(i, p, c)..])
            })?;
            if let Some(mining) = s.mining {
                // Each prior's loss against its matched label, or the
                // background (in float, as the fork's); hard examples
                // add their location loss.
                let mut losses: Vec<f32> = (0..np)
                    .map(|p| {
                        let label = matches
                            .values()
                            .find_map(|m| m.indices[p])
                            .map_or(s.background, |g| ts[g].label);
                        confidence_loss(s.conf_loss, scores(i, p), label)
                    })
                    .collect();
                if let Mining::HardExample { .. } = mining {
                    for m in matches.values() {
                        for (p, g) in m.indices.iter().enumerate() {
                            if let Some(g) = *g {
                                losses[p] += offsets(i, p, g, 0)?.0 as f32;
                            }
                        }
                    }
                }
                let boxes = match s.mining_nms {
                    Some(_) if s.use_prior_for_nms => priors.clone(),
                    Some(_) => (0..np)
                        .map(|p| {
                            let pred = quad(&loc[loc_index(i, p, 0)..]);
                            decode(s.code, s.variance_in_target, priors[p], variances[p], pred)
                        })
                        .collect::<Result<_>>()?,
                    None => Vec::new(),
                };
                for m in matches.values_mut() {
                    let nms = s.mining_nms.map(|nms| (nms, &boxes[..]));
                    negs.extend(mine(m, &losses, mining, nms));
                }
            }
            all_matches.push(matches);
        }
        let num_matches: usize = all_matches
            .iter()
            .flat_map(|m| m.values())
            .map(Matched::positives)
            .sum();

        // Location: each match's offsets against its box's code.
        let mut loc_loss = 0.0;
        let mut loc_grad = Vec::with_capacity(num_matches);
        for (i, matches) in all_matches.iter().enumerate() {
            for (&label, m) in matches {
                let c = if s.share_location { 0 } else { label as usize };
                for (p, g) in m.indices.iter().enumerate() {
                    let Some(g) = *g else { continue };
                    let (l, grad) = offsets(i, p, g, c)?;
                    loc_loss += l;
                    let at = loc_index(i, p, c);
                    loc_grad.push((at, grad));
                }
            }
        }

        // Confidence: the matched priors and the mined negatives, or
        // every prior.
        let mut conf_loss = 0.0;
        let mut conf_grad = Vec::new();
        let label_of = |i: usize, g: usize| {
            if s.agnostic {
                s.background + 1
            } else {
                truths[&i][g].label
            }
        };
        // A mined negative's target is the background; the fork's
        // logistic targets of every other unmatched prior are all 0.
        let background = (s.background < nc).then_some(s.background);
        let unmatched = match s.conf_loss {
            ConfLoss::Softmax => background,
            ConfLoss::Logistic => None,
        };
        let mut classify_at = |i: usize, p: usize, target: Option<usize>| {
            let at = (i * np + p) * nc;
            let (l, g) = classify(s.conf_loss, &conf64[at..at + nc], target);
            conf_loss += l;
            conf_grad.push((at, g));
        };
        for (i, matches) in all_matches.iter().enumerate() {
            if s.mining.is_some() {
                for m in matches.values() {
                    for (p, g) in m.indices.iter().enumerate() {
                        if let Some(g) = *g {
                            classify_at(i, p, Some(label_of(i, g)));
                        }
                    }
                }
                for &p in &negatives[i] {
                    classify_at(i, p, background);
                }
            } else {
                for p in 0..np {
                    // The last label set matching the prior names it.
                    let target = matches
                        .values()
                        .filter_map(|m| m.indices[p])
                        .next_back()
                        .map_or(unmatched, |g| Some(label_of(i, g)));
                    classify_at(i, p, target);
                }
            }
        }

        let normalizer = s.normalization.divisor(num, np, num_matches);
        let mut loss = 0.0;
        if s.loc_counts && num_matches > 0 {
            loss += s.loc_weight * loc_loss / normalizer;
        }
        if s.conf_counts {
            loss += conf_loss / normalizer;
        }
        Ok((
            loss,
            Pass {
                normalizer,
                loc_grad,
                conf_grad,
            },
        ))
    }
}

impl<T: MathElement> DynLayer<T> for MultiBoxLossLayer {
    fn type_name(&self) -> &str {
        "MultiBoxLoss"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(4)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        self.s.sizes(bottoms)?;
        Ok(vec![TopShape::new(Vec::new())])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        self.pass = None;
        let (loss, pass) = self.compute(bottoms)?;
        tops[0].mutable_cpu_data()?[0] = T::from_f64(loss);
        self.pass = Some(pass);
        Ok(())
    }

    fn backward(&mut self, tops: &[&Blob<T>], down: &[bool], bottoms: &[&Blob<T>]) -> Result<()> {
        for (i, what) in [(2, "prior"), (3, "label")] {
            if down.get(i) == Some(&true) && self.s.down_to_inputs[i - 2] {
                return Err(bad_param(
                    "multibox loss backward",
                    format!("MultiBoxLoss Layer cannot backpropagate to {what} inputs."),
                ));
            }
        }
        if !down[0] && !down[1] {
            return Ok(());
        }
        let Some(pass) = &self.pass else {
            return Err(bad_param(
                "multibox loss backward",
                "backward before any forward: the matches it scatters come from forward",
            ));
        };
        let scale = tops[0].cpu_diff()?[0].to_f64() / pass.normalizer;
        if down[0] {
            let mut diff = bottoms[0].mutable_cpu_diff()?;
            diff.fill(T::from_f64(0.0));
            let weight = self.s.loc_weight * scale;
            for &(at, g) in &pass.loc_grad {
                for k in 0..4 {
                    diff[at + k] = T::from_f64(weight * g[k]);
                }
            }
        }
        if down[1] {
            let mut diff = bottoms[1].mutable_cpu_diff()?;
            diff.fill(T::from_f64(0.0));
            for (at, g) in &pass.conf_grad {
                for (d, &v) in diff[*at..].iter_mut().zip(g) {
                    *d = T::from_f64(scale * v);
                }
            }
        }
        Ok(())
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom < 2
    }

    fn is_loss(&self) -> bool {
        true
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
