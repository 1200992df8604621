//! The SSD fork's greedy non-maximum suppression over normalized boxes.

/// A box by its corners, in image-relative coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Corners {
    pub xmin: f32,
    pub ymin: f32,
    pub xmax: f32,
    pub ymax: f32,
}

impl From<[f32; 4]> for Corners {
    fn from(v: [f32; 4]) -> Self {
        Self {
            xmin: v[0],
            ymin: v[1],
            xmax: v[2],
            ymax: v[3],
        }
    }
}

impl Corners {
    /// The area; 0 for an inverted box.
    fn area(&self) -> f32 {
        if self.xmax < self.xmin || self.ymax < self.ymin {
            return 0.0;
        }
        (self.xmax - self.xmin) * (self.ymax - self.ymin)
    }

    /// Intersection over union (the fork's `JaccardOverlap`, normalized:
    /// no +1 on the sides); 0 for disjoint boxes.
    pub(crate) fn iou(&self, o: &Corners) -> f32 {
        if o.xmin > self.xmax || o.xmax < self.xmin || o.ymin > self.ymax || o.ymax < self.ymin {
            return 0.0;
        }
        let w = self.xmax.min(o.xmax) - self.xmin.max(o.xmin);
        let h = self.ymax.min(o.ymax) - self.ymin.max(o.ymin);
        let inter = w * h;
        if inter <= 0.0 {
            return 0.0;
        }
        inter / (self.area() + o.area() - inter)
    }
}

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

    fn b(xmin: f32, ymin: f32, xmax: f32, ymax: f32) -> Corners {
        Corners {
            xmin,
            ymin,
            xmax,
            ymax,
        }
    }

    #[test]
    fn iou_of_overlapping_disjoint_and_inverted_boxes() {
        assert_eq!(b(0.0, 0.0, 1.0, 1.0).iou(&b(0.5, 0.0, 1.5, 1.0)), 0.5 / 1.5);
        assert_eq!(b(0.0, 0.0, 1.0, 1.0).iou(&b(2.0, 2.0, 3.0, 3.0)), 0.0);
        // Touching edges: no area in common.
        assert_eq!(b(0.0, 0.0, 1.0, 1.0).iou(&b(1.0, 0.0, 2.0, 1.0)), 0.0);
        assert_eq!(b(0.0, 0.0, 1.0, 1.0).iou(&b(0.0, 0.0, 1.0, 1.0)), 1.0);
    }

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
