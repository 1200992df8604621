//! How MultiBoxLoss pairs its predictions with the ground truth: the SSD
//! fork's `MatchBBox` (bipartite, then per prediction above an overlap)
//! and `MineHardExamples`' MAX_NEGATIVE choice of the negatives that
//! score worst as background.

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

/// MAX_NEGATIVE mining of one prediction set: of the unmatched
/// predictions overlapping no ground truth by `neg_overlap` or more,
/// the `neg_pos_ratio` times the positives with the highest `loss`
/// (ties: the lower index), returned in prediction order as the fork
/// lists them.
pub(super) fn mine_negatives(
    m: &Matched,
    loss: &[f32],
    neg_pos_ratio: f32,
    neg_overlap: f32,
) -> Vec<usize> {
    let mut eligible: Vec<usize> = (0..m.indices.len())
        .filter(|&p| m.unmatched(p) && m.overlaps[p] < neg_overlap)
        .collect();
    let wanted = (m.positives() as f32 * neg_pos_ratio) as usize;
    let take = wanted.min(eligible.len());
    eligible.sort_by(|&a, &b| loss[b].total_cmp(&loss[a]));
    let mut chosen = eligible[..take].to_vec();
    chosen.sort_unstable();
    chosen
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
        assert_eq!(mine_negatives(&m, &[9.0, 0.0, 1.0], 3.0, 0.5), [2]);
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
        assert_eq!(mine_negatives(&m, &loss, 3.0, 0.5), [3, 4, 5]);
        assert_eq!(mine_negatives(&m, &loss, 1.0, 0.5), [3]);
        assert_eq!(mine_negatives(&m, &loss, 10.0, 0.5), [1, 3, 4, 5]);
        // No positive, no negative.
        let none = Matched {
            indices: vec![None; 6],
            ..m.clone()
        };
        assert!(mine_negatives(&none, &loss, 3.0, 0.5).is_empty());
    }
}
