//! The SSD fork's greedy non-maximum suppression over normalized boxes.

use crate::normalized_box::Corners;

/// The fork's `ApplyNMSFast`: the indices of `boxes` with a score above
/// `threshold` (strictly), best first (ties: lower index first), at most
/// `top_k` of them considered; each kept if it overlaps no kept box by
/// more than the NMS threshold, which shrinks by `eta` after each keep
/// while above 0.5.
pub(crate) fn greedy_nms(
    boxes: &[Corners],
    scores: &[f32],
    threshold: f32,
    nms_threshold: f32,
    eta: f32,
    top_k: Option<usize>,
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len())
        .filter(|&i| scores[i] > threshold)
        .collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    if let Some(k) = top_k {
        order.truncate(k);
    }
    let mut adaptive = nms_threshold;
    let mut kept: Vec<usize> = Vec::new();
    for i in order {
        if kept.iter().all(|&k| boxes[i].iou(&boxes[k]) <= adaptive) {
            kept.push(i);
            if eta < 1.0 && adaptive > 0.5 {
                adaptive *= eta;
            }
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::normalized_box::corners as b;

    #[test]
    fn nms_keeps_the_best_of_each_cluster_in_score_order() {
        let boxes = [
            b(0.0, 0.0, 1.0, 1.0),
            b(0.05, 0.0, 1.05, 1.0),
            b(3.0, 3.0, 4.0, 4.0),
            b(0.0, 0.0, 1.0, 1.0),
        ];
        let scores = [0.6, 0.9, 0.7, 0.1];
        assert_eq!(greedy_nms(&boxes, &scores, 0.0, 0.45, 1.0, None), [1, 2]);
        // The threshold is strict, top_k cuts before suppression.
        assert_eq!(greedy_nms(&boxes, &scores, 0.6, 0.45, 1.0, None), [1, 2]);
        assert_eq!(greedy_nms(&boxes, &scores, 0.0, 0.45, 1.0, Some(1)), [1]);
        // Ties go to the lower index.
        assert_eq!(greedy_nms(&boxes[..1], &[0.5], 0.0, 0.45, 1.0, None), [0]);
        let tied = [b(0.0, 0.0, 1.0, 1.0), b(0.0, 0.0, 1.0, 1.0)];
        assert_eq!(greedy_nms(&tied, &[0.5, 0.5], 0.0, 0.45, 1.0, None), [0]);
    }
}
