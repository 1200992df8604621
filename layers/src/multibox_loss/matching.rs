//! How MultiBoxLoss pairs its predictions with the ground truth: the SSD
//! fork's `MatchBBox` (bipartite, then per prediction above an overlap)
//! and `MineHardExamples`: MAX_NEGATIVE's choice of the negatives that
//! score worst as background, or HARD_EXAMPLE's of the predictions of
//! highest loss, positives and negatives alike, with or without a
//! suppression of overlapping ones first.

use crate::normalized_box::Corners;

/// A prediction's match: the ground truth's index among the image's.
pub(super) type Match = Option<usize>;

/// What one prediction set (one location class) of one image matched.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Matched {
    /// Per prediction: its ground truth, if any.
    pub indices: Vec<Match>,
    /// Per prediction: ignored for crossing the image's boundary (the
    /// fork's index -2: neither positive nor a negative to mine).
    pub ignored: Vec<bool>,
    /// Per prediction: its best overlap with any ground truth considered
    /// (the matched one's, once matched).
    pub overlaps: Vec<f32>,
}

impl Matched {
    /// How many predictions have a ground truth.
    pub(super) fn positives(&self) -> usize {
        self.indices.iter().filter(|m| m.is_some()).count()
    }

    /// Whether prediction `p` is neither matched nor ignored.
    pub(super) fn unmatched(&self, p: usize) -> bool {
        self.indices[p].is_none() && !self.ignored[p]
    }
}

/// The fork's `MatchBBox`: `candidates` (the ground truth's indices into
/// `gts` that may be matched) against `preds`. First each ground truth,
/// in turn of the highest overlap left, takes its best prediction; then,
/// unless `bipartite_only`, every prediction still free takes the ground
/// truth it overlaps most, at `threshold` or above.
pub(super) fn match_boxes(
    gts: &[Corners],
    candidates: &[usize],
    preds: &[Corners],
    bipartite_only: bool,
    threshold: f32,
    ignore_cross_boundary: bool,
) -> Matched {
    let n = preds.len();
    let mut m = Matched {
        indices: vec![None; n],
        ignored: vec![false; n],
        overlaps: vec![0.0; n],
    };
    if candidates.is_empty() {
        return m;
    }
    // Per prediction, its overlaps above 1e-6 with each candidate (by
    // position in `candidates`), as the fork's sparse map keeps them.
    let mut overlaps: Vec<Vec<(usize, f32)>> = vec![Vec::new(); n];
    for (p, pred) in preds.iter().enumerate() {
        if ignore_cross_boundary && pred.crosses_boundary() {
            m.ignored[p] = true;
            continue;
        }
        for (j, &g) in candidates.iter().enumerate() {
            let o = pred.iou(&gts[g]);
            if o > 1e-6 {
                m.overlaps[p] = m.overlaps[p].max(o);
                overlaps[p].push((j, o));
            }
        }
    }
    let free = |m: &Matched, p: usize| m.indices[p].is_none() && !m.ignored[p];
    // Bipartite: the pair of highest overlap among free predictions and
    // unmatched ground truth, until none is left (ties: the first
    // prediction, then the first ground truth in the pool's order).
    let mut pool: Vec<usize> = (0..candidates.len()).collect();
    while !pool.is_empty() {
        let mut best: Option<(usize, usize, f32)> = None;
        for (p, row) in overlaps.iter().enumerate() {
            if !free(&m, p) {
                continue;
            }
            for &j in &pool {
                if let Some(&(_, o)) = row.iter().find(|(k, _)| *k == j)
                    && best.is_none_or(|(_, _, b)| o > b)
                {
                    best = Some((p, j, o));
                }
            }
        }
        let Some((p, j, o)) = best else { break };
        m.indices[p] = Some(candidates[j]);
        m.overlaps[p] = o;
        pool.retain(|&k| k != j);
    }
    if bipartite_only {
        return m;
    }
    // Per prediction: the most overlapped ground truth at the threshold.
    for (p, row) in overlaps.iter().enumerate() {
        if !free(&m, p) {
            continue;
        }
        let mut best: Option<(usize, f32)> = None;
        for &(j, o) in row {
            if o >= threshold && best.is_none_or(|(_, b)| o > b) {
                best = Some((j, o));
            }
        }
        if let Some((j, o)) = best {
            m.indices[p] = Some(candidates[j]);
            m.overlaps[p] = o;
        }
    }
    m
}

/// Which predictions `MineHardExamples` chooses from, and how many.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Mining {
    /// Of the unmatched predictions overlapping no ground truth by
    /// `neg_overlap` or more, `neg_pos_ratio` times the positives.
    MaxNegative {
        neg_pos_ratio: f32,
        neg_overlap: f32,
    },
    /// Of all predictions, `sample_size`: the matched ones not chosen
    /// lose their match, the unmatched ones chosen are the negatives.
    HardExample { sample_size: usize },
}

/// The suppression before choosing (a mining `nms_param`): the fork's
/// `ApplyNMS` over the candidates' boxes, by loss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct MiningNms {
    pub threshold: f32,
    pub top_k: usize,
}

/// `MineHardExamples` on one prediction set: the predictions of highest
/// `loss` that `mining` allows (ties: the lower index), after `nms` over
/// `boxes` where given. Returns the negatives, in prediction order as the
/// fork lists them; under HARD_EXAMPLE, `m` loses the matches not
/// chosen.
pub(super) fn mine(
    m: &mut Matched,
    loss: &[f32],
    mining: Mining,
    nms: Option<(MiningNms, &[Corners])>,
) -> Vec<usize> {
    let n = m.indices.len();
    let (eligible, wanted): (Vec<usize>, usize) = match mining {
        Mining::MaxNegative {
            neg_pos_ratio,
            neg_overlap,
        } => (
            (0..n)
                .filter(|&p| m.unmatched(p) && m.overlaps[p] < neg_overlap)
                .collect(),
            (m.positives() as f32 * neg_pos_ratio) as usize,
        ),
        Mining::HardExample { sample_size } => ((0..n).collect(), sample_size),
    };
    let mut by_loss = eligible;
    by_loss.sort_by(|&a, &b| loss[b].total_cmp(&loss[a]));
    let ranked = match nms {
        Some((nms, boxes)) => suppress_by_loss(&by_loss, boxes, nms),
        None => by_loss,
    };
    let mut chosen = vec![false; n];
    for &p in ranked.iter().take(wanted) {
        chosen[p] = true;
    }
    let negatives = (0..n).filter(|&p| chosen[p] && m.unmatched(p)).collect();
    if let Mining::HardExample { .. } = mining {
        for (p, index) in m.indices.iter_mut().enumerate() {
            if !chosen[p] {
                *index = None;
            }
        }
    }
    negatives
}

/// The fork's `ApplyNMS` over `ranked` (predictions, highest loss
/// first): its first `top_k`; each in turn is kept unless its box is
/// smaller than 1e-5 (then dropped), and the later ones overlapping it
/// by more than the threshold (or too small) are dropped; at most
/// `top_k` kept.
fn suppress_by_loss(ranked: &[usize], boxes: &[Corners], nms: MiningNms) -> Vec<usize> {
    let mut left: Vec<usize> = ranked.iter().copied().take(nms.top_k).collect();
    let mut kept = Vec::new();
    while !left.is_empty() {
        let best = left.remove(0);
        if boxes[best].area() < 1e-5 {
            continue;
        }
        kept.push(best);
        if kept.len() >= nms.top_k {
            break;
        }
        left.retain(|&p| boxes[p].area() >= 1e-5 && boxes[best].iou(&boxes[p]) <= nms.threshold);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::normalized_box::corners as b;

    #[test]
    fn bipartite_first_then_each_prediction_above_the_threshold() {
        let gts = [b(0.0, 0.0, 0.4, 0.4), b(0.5, 0.5, 1.0, 1.0)];
        let preds = [
            b(0.0, 0.0, 0.4, 0.5),  // 0.8 with gt 0
            b(0.0, 0.0, 0.4, 0.4),  // 1.0 with gt 0
            b(0.5, 0.5, 0.9, 0.9),  // 0.64 with gt 1
            b(0.6, 0.6, 0.9, 0.9),  // 0.36 with gt 1
            b(0.45, 0.0, 0.5, 0.1), // overlaps nothing
        ];
        let all = [0, 1];
        let bip = match_boxes(&gts, &all, &preds, true, 0.5, false);
        assert_eq!(bip.indices, [None, Some(0), Some(1), None, None]);
        let per = match_boxes(&gts, &all, &preds, false, 0.5, false);
        assert_eq!(per.indices, [Some(0), Some(0), Some(1), None, None]);
        assert!((per.overlaps[0] - 0.8).abs() < 1e-6);
        assert!((per.overlaps[3] - 0.36).abs() < 1e-6);
        assert_eq!(per.overlaps[4], 0.0);
        // Only the candidates are matched.
        let one = match_boxes(&gts, &[1], &preds, false, 0.5, false);
        assert_eq!(one.indices, [None, None, Some(1), None, None]);
        assert_eq!(one.overlaps[1], 0.0);
    }

    #[test]
    fn a_ground_truth_takes_its_best_prediction_even_below_the_threshold() {
        let gts = [b(0.0, 0.0, 0.2, 0.2)];
        let preds = [b(0.1, 0.1, 0.5, 0.5), b(0.0, 0.0, 0.2, 0.5)];
        let m = match_boxes(&gts, &[0], &preds, false, 0.5, false);
        assert_eq!(m.indices, [None, Some(0)]);
    }

    #[test]
    fn boundary_crossers_are_ignored_and_not_mined() {
        let gts = [b(0.0, 0.0, 0.4, 0.4)];
        let preds = [
            b(-0.1, 0.0, 0.4, 0.4),
            b(0.0, 0.0, 0.4, 0.45),
            b(0.6, 0.6, 0.9, 0.9),
        ];
        let m = match_boxes(&gts, &[0], &preds, false, 0.5, true);
        assert_eq!(m.indices, [None, Some(0), None]);
        assert_eq!(m.ignored, [true, false, false]);
        let mining = Mining::MaxNegative {
            neg_pos_ratio: 3.0,
            neg_overlap: 0.5,
        };
        assert_eq!(mine(&mut m.clone(), &[9.0, 0.0, 1.0], mining, None), [2]);
    }

    #[test]
    fn mining_takes_the_worst_eligible_negatives_in_prediction_order() {
        let m = Matched {
            indices: vec![Some(0), None, None, None, None, None],
            ignored: vec![false; 6],
            overlaps: vec![0.9, 0.1, 0.6, 0.0, 0.2, 0.3],
        };
        let loss = [5.0, 1.0, 9.0, 3.0, 2.0, 3.0];
        // Prediction 2 overlaps too much to be a negative; of the rest
        // 3 and 5 tie, the lower index first.
        let max_negative = |ratio: f32| Mining::MaxNegative {
            neg_pos_ratio: ratio,
            neg_overlap: 0.5,
        };
        let negatives =
            |m: &Matched, ratio: f32| mine(&mut m.clone(), &loss, max_negative(ratio), None);
        assert_eq!(negatives(&m, 3.0), [3, 4, 5]);
        assert_eq!(negatives(&m, 1.0), [3]);
        assert_eq!(negatives(&m, 10.0), [1, 3, 4, 5]);
        // No positive, no negative.
        let none = Matched {
            indices: vec![None; 6],
            ..m.clone()
        };
        assert!(negatives(&none, 3.0).is_empty());
    }

    #[test]
    fn hard_examples_are_the_highest_losses_positives_included() {
        let mut m = Matched {
            indices: vec![Some(0), Some(1), None, None, None, None],
            ignored: vec![false, false, false, false, true, false],
            overlaps: vec![0.9, 0.8, 0.6, 0.0, 0.2, 0.3],
        };
        let loss = [5.0, 1.0, 9.0, 3.0, 8.0, 3.0];
        // The four highest: 2, 4, 0, then 3 (tied with 5, the lower
        // index). Prediction 4 is ignored: chosen, but no negative; 1
        // was not chosen and loses its match.
        let negatives = mine(&mut m, &loss, Mining::HardExample { sample_size: 4 }, None);
        assert_eq!(negatives, [2, 3]);
        assert_eq!(m.indices, [Some(0), None, None, None, None, None]);
    }

    #[test]
    fn suppression_before_mining_drops_overlapping_and_tiny_boxes() {
        let m = Matched {
            indices: vec![Some(0), None, None, None, None],
            ignored: vec![false; 5],
            overlaps: vec![0.9, 0.0, 0.0, 0.0, 0.0],
        };
        let boxes = [
            b(0.0, 0.0, 0.3, 0.3),
            b(0.5, 0.5, 0.9, 0.9),
            b(0.5, 0.5, 0.9, 0.85), // IoU 0.875 with 1
            b(0.1, 0.6, 0.1, 0.9),  // no area
            b(0.0, 0.5, 0.3, 0.9),
        ];
        let loss = [1.0, 7.0, 9.0, 8.0, 2.0];
        let nms = MiningNms {
            threshold: 0.5,
            top_k: 10,
        };
        let mining = Mining::MaxNegative {
            neg_pos_ratio: 3.0,
            neg_overlap: 0.5,
        };
        // By loss: 2, 3, 1, 4; 3 has no area, 1 overlaps 2: 2 and 4.
        assert_eq!(
            mine(&mut m.clone(), &loss, mining, Some((nms, &boxes))),
            [2, 4]
        );
        // top_k cuts the candidates before the suppression.
        let two = MiningNms { top_k: 2, ..nms };
        assert_eq!(
            mine(&mut m.clone(), &loss, mining, Some((two, &boxes))),
            [2]
        );
    }
}
