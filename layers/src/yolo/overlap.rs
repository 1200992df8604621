//! The overlaps the YOLO fork's training loss measures boxes by (its
//! `bbox_util.cpp`: `box_iou`, `box_giou`, `box_diou`, `box_ciou`) and
//! the gradient of the overlap that trains a box (`dx_box_iou`, after
//! AlexeyAB's darknet), all in float as the fork computes them.

use std::f64::consts::PI;

/// A box by its centre and size, relative to the image (the fork's
/// `vector<Dtype>` of x, y, w, h).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CenterBox {
    pub x: f32,
    pub y: f32,
    pub w: f32,
    pub h: f32,
}

/// Which overlap the loss trains boxes by (the fork's `IOU_LOSS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IouLoss {
    /// Intersection over union.
    Iou,
    /// Generalized IoU: less the share of the enclosing box neither
    /// covers.
    Giou,
    /// darknet's squared error on the box's codes (the fork's default).
    Mse,
    /// Distance IoU: less the centres' distance against the enclosing
    /// box's diagonal.
    Diou,
    /// Complete IoU: DIoU less an aspect-ratio term.
    Ciou,
}

impl IouLoss {
    /// The fork's enum by its name.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "IOU" => Self::Iou,
            "GIOU" => Self::Giou,
            "MSE" => Self::Mse,
            "DIOU" => Self::Diou,
            "CIOU" => Self::Ciou,
            _ => return None,
        })
    }
}

/// The edges of a box: top, bottom, left, right (the fork's `boxabs`).
#[derive(Clone, Copy, Debug)]
struct Edges {
    top: f32,
    bottom: f32,
    left: f32,
    right: f32,
}

/// How far two spans of centre `x` and width `w` overlap (negative when
/// apart).
fn overlap(x1: f32, w1: f32, x2: f32, w2: f32) -> f32 {
    let left = (x1 - w1 / 2.0).max(x2 - w2 / 2.0);
    let right = (x1 + w1 / 2.0).min(x2 + w2 / 2.0);
    right - left
}

impl CenterBox {
    fn edges(&self) -> Edges {
        Edges {
            top: self.y - self.h / 2.0,
            bottom: self.y + self.h / 2.0,
            left: self.x - self.w / 2.0,
            right: self.x + self.w / 2.0,
        }
    }

    fn intersection(&self, o: &CenterBox) -> f32 {
        let w = overlap(self.x, self.w, o.x, o.w);
        let h = overlap(self.y, self.h, o.y, o.h);
        if w < 0.0 || h < 0.0 { 0.0 } else { w * h }
    }

    fn union(&self, o: &CenterBox) -> f32 {
        self.w * self.h + o.w * o.h - self.intersection(o)
    }

    /// The fork's `box_iou`.
    pub(crate) fn iou(&self, o: &CenterBox) -> f32 {
        self.intersection(o) / self.union(o)
    }

    /// The box enclosing both (the fork's `box_c`).
    fn enclosing(&self, o: &CenterBox) -> Edges {
        let (a, b) = (self.edges(), o.edges());
        Edges {
            top: a.top.min(b.top),
            bottom: a.bottom.max(b.bottom),
            left: a.left.min(b.left),
            right: a.right.max(b.right),
        }
    }

    /// The squared diagonal of the enclosing box and the squared
    /// distance of the centres.
    fn spread(&self, o: &CenterBox) -> (f32, f32) {
        let c = self.enclosing(o);
        let (w, h) = (c.right - c.left, c.bottom - c.top);
        let (dx, dy) = (self.x - o.x, self.y - o.y);
        (w * w + h * h, dx * dx + dy * dy)
    }

    /// The fork's `box_giou`.
    pub(crate) fn giou(&self, o: &CenterBox) -> f32 {
        let c = self.enclosing(o);
        let area = (c.right - c.left) * (c.bottom - c.top);
        let iou = self.iou(o);
        if area == 0.0 {
            return iou;
        }
        iou - (area - self.union(o)) / area
    }

    /// The fork's `box_diou`: its distance term raised to 0.6 (in
    /// double, as `pow(float, 0.6)` computes).
    pub(crate) fn diou(&self, o: &CenterBox) -> f32 {
        let (c, d) = self.spread(o);
        let iou = self.iou(o);
        if c == 0.0 {
            return iou;
        }
        iou - f64::from(d / c).powf(0.6) as f32
    }

    /// The fork's `box_ciou` (`self` the prediction, `o` the truth).
    pub(crate) fn ciou(&self, o: &CenterBox) -> f32 {
        let (c, d) = self.spread(o);
        let iou = self.iou(o);
        if c == 0.0 {
            return iou;
        }
        let ar_loss = aspect_term(o, self);
        let alpha = (f64::from(ar_loss) / (f64::from(1.0 - iou + ar_loss) + 1e-6)) as f32;
        iou - (d / c + alpha * ar_loss)
    }

    /// The fork's `box_iou(a, b, type)`: the overlap `loss` names (plain
    /// IoU for `Iou` and `Mse`).
    pub(crate) fn overlap_by(&self, o: &CenterBox, loss: IouLoss) -> f32 {
        match loss {
            IouLoss::Giou => self.giou(o),
            IouLoss::Diou => self.diou(o),
            IouLoss::Ciou => self.ciou(o),
            IouLoss::Iou | IouLoss::Mse => self.iou(o),
        }
    }
}

/// The difference of the aspect ratios' arctangents.
fn aspect_gap(truth: &CenterBox, pred: &CenterBox) -> f32 {
    (truth.w / truth.h).atan() - (pred.w / pred.h).atan()
}

/// CIoU's `4 / pi^2 * (atan(w/h truth) - atan(w/h pred))^2`.
fn aspect_term(truth: &CenterBox, pred: &CenterBox) -> f32 {
    let gap = f64::from(aspect_gap(truth, pred));
    (4.0 / (PI * PI) * gap * gap) as f32
}

/// The fork's `dx_box_iou`: how the overlap `loss` names grows with the
/// prediction's centre and size, `[dx, dy, dw, dh]`. The IoU part's `dw`
/// and `dh` are those of the right/bottom edge less the left/top one,
/// twice the derivative by the width (darknet leaves out the halving);
/// where the boxes do not meet, GIoU, DIoU and CIoU keep their own terms
/// alone.
pub(crate) fn overlap_gradient(pred: &CenterBox, truth: &CenterBox, loss: IouLoss) -> [f32; 4] {
    let p = pred.edges();
    let (pt, pb) = (p.top.min(p.bottom), p.top.max(p.bottom));
    let (pl, pr) = (p.left.min(p.right), p.left.max(p.right));
    let t = truth.edges();
    let area = (pb - pt) * (pr - pl);
    let truth_area = (t.bottom - t.top) * (t.right - t.left);
    let ih = pb.min(t.bottom) - pt.max(t.top);
    let iw = pr.min(t.right) - pl.max(t.left);
    let inter = iw * ih;
    let union = area + truth_area - inter;
    let (dxc, dyc) = (pred.x - truth.x, pred.y - truth.y);
    let s = dxc * dxc + dyc * dyc;
    let giou_cw = pr.max(t.right) - pl.min(t.left);
    let giou_ch = pb.max(t.bottom) - pt.min(t.top);
    let giou_c = giou_cw * giou_ch;
    // Edges t, b, l, r: the prediction's area, the intersection, the
    // union and GIoU's enclosing area by each.
    let d_area = [-(pr - pl), pr - pl, -(pb - pt), pb - pt];
    let d_inter = [
        if pt > t.top { -iw } else { 0.0 },
        if pb < t.bottom { iw } else { 0.0 },
        if pl > t.left { -ih } else { 0.0 },
        if pr < t.right { ih } else { 0.0 },
    ];
    let d_union: [f32; 4] = std::array::from_fn(|k| d_area[k] - d_inter[k]);
    let d_enclosing = [
        if pt < t.top { -giou_cw } else { 0.0 },
        if pb > t.bottom { giou_cw } else { 0.0 },
        if pl < t.left { -giou_ch } else { 0.0 },
        if pr > t.right { giou_ch } else { 0.0 },
    ];
    let mut d = [0.0f32; 4];
    if union > 0.0 {
        d = std::array::from_fn(|k| (union * d_inter[k] - inter * d_union[k]) / (union * union));
    }
    // An inverted prediction takes the other edge's value, in the
    // fork's order (the second line reads the first's result).
    if p.top >= p.bottom {
        d[0] = d[1];
    }
    if p.left >= p.right {
        d[2] = d[3];
    }
    if loss == IouLoss::Giou {
        let term = |k: usize| (giou_c * d_union[k] - union * d_enclosing[k]) / (giou_c * giou_c);
        if giou_c > 0.0 {
            d = std::array::from_fn(|k| d[k] + term(k));
        }
        if iw <= 0.0 || ih <= 0.0 {
            d = std::array::from_fn(term);
        }
    }
    let [d_t, d_b, d_l, d_r] = d;
    let mut g = [d_l + d_r, d_t + d_b, d_r - d_l, d_b - d_t];
    if matches!(loss, IouLoss::Diou | IouLoss::Ciou) {
        // The enclosing box's edges by the centre and size: where the
        // prediction sets an edge, it moves with x (or y) by 1 and with
        // w (or h) by a half.
        let c_top = (pred.y - pred.h / 2.0).min(truth.y - truth.h / 2.0);
        let c_bottom = (pred.y + pred.h / 2.0).max(truth.y + truth.h / 2.0);
        let c_left = (pred.x - pred.w / 2.0).min(truth.x - truth.w / 2.0);
        let c_right = (pred.x + pred.w / 2.0).max(truth.x + truth.w / 2.0);
        let (cw, ch) = (c_right - c_left, c_bottom - c_top);
        let c = cw * cw + ch * ch;
        let sets = |b: bool, v: f32| if b { v } else { 0.0 };
        let dcw_dx = sets(pr > t.right, 1.0) - sets(pl < t.left, 1.0);
        let dcw_dw = sets(pr > t.right, 0.5) - sets(pl < t.left, -0.5);
        let dch_dy = sets(pb > t.bottom, 1.0) - sets(pt < t.top, 1.0);
        let dch_dh = sets(pb > t.bottom, 0.5) - sets(pt < t.top, -0.5);
        let c2 = c * c;
        let mut term = [
            (2.0 * (truth.x - pred.x) * c - (2.0 * cw * dcw_dx) * s) / c2,
            (2.0 * (truth.y - pred.y) * c - (2.0 * ch * dch_dy) * s) / c2,
            (2.0 * cw * dcw_dw) * s / c2,
            (2.0 * ch * dch_dh) * s / c2,
        ];
        if loss == IouLoss::Ciou {
            let ar_loss = aspect_term(truth, pred);
            let alpha =
                (f64::from(ar_loss) / (f64::from(1.0 - inter / union + ar_loss) + 1e-6)) as f32;
            let gap = f64::from(aspect_gap(truth, pred));
            let ar_dw = (8.0 / (PI * PI) * gap * f64::from(pred.h)) as f32;
            let ar_dh = (-8.0 / (PI * PI) * gap * f64::from(pred.w)) as f32;
            term[2] += alpha * ar_dw;
            term[3] += alpha * ar_dh;
        }
        if c > 0.0 {
            g = std::array::from_fn(|k| g[k] + term[k]);
        }
        if iw <= 0.0 || ih <= 0.0 {
            g = term;
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(x: f32, y: f32, w: f32, h: f32) -> CenterBox {
        CenterBox { x, y, w, h }
    }

    #[test]
    fn overlaps_of_two_boxes_by_hand() {
        // Side by side, half of each over the other: 0.5 x 1 of 1.5 x 1.
        let (a, o) = (b(0.5, 0.5, 1.0, 1.0), b(1.0, 0.5, 1.0, 1.0));
        assert!((a.iou(&o) - 1.0 / 3.0).abs() < 1e-6);
        // The enclosing box is the union: GIoU is IoU.
        assert!((a.giou(&o) - 1.0 / 3.0).abs() < 1e-6);
        // Centres 0.5 apart, diagonal^2 = 1.5^2 + 1.
        let diou = 1.0 / 3.0 - (0.25f64 / 3.25).powf(0.6);
        assert!((f64::from(a.diou(&o)) - diou).abs() < 1e-6);
        // Equal aspect ratios: CIoU's own term is 0.
        assert!((a.ciou(&o) - (1.0 / 3.0 - 0.25 / 3.25)).abs() < 1e-6);
        // Apart: no intersection, GIoU below 0.
        let far = b(3.0, 0.5, 1.0, 1.0);
        assert_eq!(a.iou(&far), 0.0);
        // Enclosed by 3.5 x 1, of which the union covers 2.
        assert!((a.giou(&far) - (0.0 - 1.5 / 3.5)).abs() < 1e-6);
        assert_eq!(a.overlap_by(&far, IouLoss::Mse), 0.0);
    }

    /// IoU's and GIoU's gradients against central differences: the
    /// centre's exact, the size's twice the derivative (darknet's).
    #[test]
    fn the_overlap_gradients_follow_their_overlaps() {
        let truth = b(0.52, 0.47, 0.3, 0.42);
        for pred in [b(0.45, 0.5, 0.25, 0.3), b(0.6, 0.4, 0.5, 0.2)] {
            for (loss, f) in [
                (
                    IouLoss::Iou,
                    CenterBox::iou as fn(&CenterBox, &CenterBox) -> f32,
                ),
                (IouLoss::Giou, CenterBox::giou),
            ] {
                let g = overlap_gradient(&pred, &truth, loss);
                let at = |k: usize, e: f64| {
                    let mut p = [pred.x, pred.y, pred.w, pred.h].map(f64::from);
                    p[k] += e;
                    let p = p.map(|v| v as f32);
                    f64::from(f(&b(p[0], p[1], p[2], p[3]), &truth))
                };
                for (k, &gk) in g.iter().enumerate() {
                    let e = 1e-3;
                    let numeric = (at(k, e) - at(k, -e)) / (2.0 * e);
                    let want = if k < 2 { numeric } else { 2.0 * numeric };
                    assert!(
                        (f64::from(gk) - want).abs() < 2e-3,
                        "{loss:?} {pred:?} d{k}: {gk} against {want}"
                    );
                }
            }
        }
    }

    /// DIoU's distance term by the centre: IoU's derivative, plus
    /// darknet's `(2 (tx - px) C - 2 Cw dCw/dx S) / C^2` (`S` the centres'
    /// squared distance, `C` the enclosing box's squared diagonal; its
    /// second term has the opposite sign of the derivative of `S / C`,
    /// which darknet and the fork share).
    #[test]
    fn diou_pulls_the_centres_together() {
        let truth = b(0.5, 0.5, 0.2, 0.2);
        let pred = b(0.58, 0.5, 0.2, 0.2);
        let g = overlap_gradient(&pred, &truth, IouLoss::Diou);
        let iou = |x: f32| f64::from(b(x, 0.5, 0.2, 0.2).iou(&truth));
        let d_iou = (iou(0.58 + 1e-3) - iou(0.58 - 1e-3)) / 2e-3;
        // Enclosed by 0.4..0.68 x 0.4..0.6; the prediction sets the right edge.
        let (cw, c, s) = (0.28f64, 0.28f64 * 0.28 + 0.2 * 0.2, 0.08f64 * 0.08);
        let want = d_iou + (2.0 * (0.5 - 0.58) * c - 2.0 * cw * s) / (c * c);
        assert!((f64::from(g[0]) - want).abs() < 2e-3, "{g:?} {want}");
        assert!(g[0] < 0.0, "moving left grows DIoU");
        // Apart, only the distance term pulls.
        let apart = overlap_gradient(&b(0.9, 0.5, 0.1, 0.1), &truth, IouLoss::Ciou);
        assert!(
            apart[0] < 0.0 && apart.iter().all(|v| v.is_finite()),
            "{apart:?}"
        );
    }
}
