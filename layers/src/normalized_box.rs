//! The SSD fork's boxes in image-relative coordinates (its
//! `NormalizedBBox`) and the ways a prior box codes one (its `CodeType`,
//! `EncodeBBox` and `DecodeBBox`): DetectionOutput decodes with them,
//! MultiBoxLoss matches and encodes.

use blob_proto::ParamMessage;

use crate::dyn_layer::bad_param;
use crate::layer::Result;

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
    /// The area; 0 for an inverted box (the fork's `BBoxSize`,
    /// normalized).
    pub(crate) fn area(&self) -> f32 {
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
        if !(w > 0.0 && h > 0.0) {
            return 0.0;
        }
        let inter = w * h;
        inter / (self.area() + o.area() - inter)
    }

    /// Whether a corner lies outside the image (the fork's
    /// `IsCrossBoundaryBBox`).
    pub(crate) fn crosses_boundary(&self) -> bool {
        [self.xmin, self.ymin, self.xmax, self.ymax]
            .iter()
            .any(|&v| !(0.0..=1.0).contains(&v))
    }
}

/// How location offsets code a box against its prior (the fork's
/// `PriorBoxParameter.CodeType`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Code {
    /// Corner offsets, times the variances.
    Corner,
    /// Centre offsets in prior sizes, and log size ratios.
    CenterSize,
    /// Corner offsets in prior sizes.
    CornerSize,
}

impl Code {
    /// `field` of `p` (an enum of `CodeType`).
    pub(crate) fn from_param(p: &ParamMessage, field: &str) -> Self {
        match p.enum_name(field) {
            "CENTER_SIZE" => Code::CenterSize,
            "CORNER_SIZE" => Code::CornerSize,
            _ => Code::Corner,
        }
    }
}

/// The fork halves sums of floats in double.
fn half(a: f32, b: f32) -> f32 {
    ((f64::from(a) + f64::from(b)) / 2.0) as f32
}

/// The width and height of `prior`, refused unless both are positive
/// where `code` divides by them.
fn prior_size(code: Code, prior: &Corners, op: &'static str) -> Result<(f32, f32)> {
    let (w, h) = (prior.xmax - prior.xmin, prior.ymax - prior.ymin);
    if code != Code::Corner && !(w > 0.0 && h > 0.0) {
        return Err(bad_param(
            op,
            format!("a prior box of width {w} and height {h}; both must be positive"),
        ));
    }
    Ok((w, h))
}

/// The fork's `DecodeBBox` (unclipped): `prior` moved by the offsets
/// `loc`, scaled by its `variance` unless the variance was encoded in
/// the training target.
pub(crate) fn decode(
    code: Code,
    variance_in_target: bool,
    prior: Corners,
    variance: [f32; 4],
    loc: [f32; 4],
) -> Result<Corners> {
    let v = if variance_in_target {
        [1.0; 4]
    } else {
        variance
    };
    let (pw, ph) = prior_size(code, &prior, "detection output")?;
    Ok(match code {
        Code::Corner => Corners {
            xmin: prior.xmin + v[0] * loc[0],
            ymin: prior.ymin + v[1] * loc[1],
            xmax: prior.xmax + v[2] * loc[2],
            ymax: prior.ymax + v[3] * loc[3],
        },
        Code::CornerSize => Corners {
            xmin: prior.xmin + v[0] * loc[0] * pw,
            ymin: prior.ymin + v[1] * loc[1] * ph,
            xmax: prior.xmax + v[2] * loc[2] * pw,
            ymax: prior.ymax + v[3] * loc[3] * ph,
        },
        Code::CenterSize => {
            let (pcx, pcy) = (half(prior.xmin, prior.xmax), half(prior.ymin, prior.ymax));
            let cx = v[0] * loc[0] * pw + pcx;
            let cy = v[1] * loc[1] * ph + pcy;
            let w = (v[2] * loc[2]).exp() * pw;
            let h = (v[3] * loc[3]).exp() * ph;
            let lo = |c: f32, s: f32| (f64::from(c) - f64::from(s) / 2.0) as f32;
            let hi = |c: f32, s: f32| (f64::from(c) + f64::from(s) / 2.0) as f32;
            Corners {
                xmin: lo(cx, w),
                ymin: lo(cy, h),
                xmax: hi(cx, w),
                ymax: hi(cy, h),
            }
        }
    })
}

/// The fork's `EncodeBBox`: the offsets that [`decode`] turns `prior`
/// back into `gt` with, divided by the variances unless they go into
/// the training target. A ground-truth box of no width or height cannot
/// be coded against its centre and size, and is refused.
pub(crate) fn encode(
    code: Code,
    variance_in_target: bool,
    prior: Corners,
    variance: [f32; 4],
    gt: Corners,
) -> Result<[f32; 4]> {
    const OP: &str = "multibox loss";
    let v = if variance_in_target {
        [1.0; 4]
    } else {
        if let Some(bad) = variance.iter().find(|&&v| v.is_nan() || v <= 0.0) {
            return Err(bad_param(
                OP,
                format!(
                    "a prior box's variance is {bad}; the variances divide the offsets and must be positive"
                ),
            ));
        }
        variance
    };
    let (pw, ph) = prior_size(code, &prior, OP)?;
    Ok(match code {
        Code::Corner => [
            (gt.xmin - prior.xmin) / v[0],
            (gt.ymin - prior.ymin) / v[1],
            (gt.xmax - prior.xmax) / v[2],
            (gt.ymax - prior.ymax) / v[3],
        ],
        Code::CornerSize => [
            (gt.xmin - prior.xmin) / pw / v[0],
            (gt.ymin - prior.ymin) / ph / v[1],
            (gt.xmax - prior.xmax) / pw / v[2],
            (gt.ymax - prior.ymax) / ph / v[3],
        ],
        Code::CenterSize => {
            let (w, h) = (gt.xmax - gt.xmin, gt.ymax - gt.ymin);
            if !(w > 0.0 && h > 0.0) {
                return Err(bad_param(
                    OP,
                    format!(
                        "a ground-truth box ({}, {}, {}, {}) of width {w} and height {h}; \
                         CENTER_SIZE codes only boxes of positive size",
                        gt.xmin, gt.ymin, gt.xmax, gt.ymax
                    ),
                ));
            }
            let (pcx, pcy) = (half(prior.xmin, prior.xmax), half(prior.ymin, prior.ymax));
            let (cx, cy) = (half(gt.xmin, gt.xmax), half(gt.ymin, gt.ymax));
            [
                (cx - pcx) / pw / v[0],
                (cy - pcy) / ph / v[1],
                (w / pw).ln() / v[2],
                (h / ph).ln() / v[3],
            ]
        }
    })
}

/// A box from its corners, for tests.
#[cfg(test)]
pub(crate) fn corners(xmin: f32, ymin: f32, xmax: f32, ymax: f32) -> Corners {
    Corners {
        xmin,
        ymin,
        xmax,
        ymax,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::corners as b;

    #[test]
    fn iou_of_overlapping_disjoint_and_inverted_boxes() {
        assert_eq!(b(0.0, 0.0, 1.0, 1.0).iou(&b(0.5, 0.0, 1.5, 1.0)), 0.5 / 1.5);
        assert_eq!(b(0.0, 0.0, 1.0, 1.0).iou(&b(2.0, 2.0, 3.0, 3.0)), 0.0);
        // Touching edges: no area in common.
        assert_eq!(b(0.0, 0.0, 1.0, 1.0).iou(&b(1.0, 0.0, 2.0, 1.0)), 0.0);
        assert_eq!(b(0.0, 0.0, 1.0, 1.0).iou(&b(0.0, 0.0, 1.0, 1.0)), 1.0);
        // An inverted box overlaps nothing, even where the product of
        // its negative sides is positive.
        assert_eq!(b(0.5, 0.5, 0.4, 0.4).iou(&b(0.0, 0.0, 1.0, 1.0)), 0.0);
    }

    #[test]
    fn encoding_then_decoding_gives_the_box_back() {
        let prior = b(0.2, 0.3, 0.6, 0.5);
        let gt = b(0.25, 0.2, 0.7, 0.65);
        let variance = [0.1, 0.1, 0.2, 0.2];
        for code in [Code::Corner, Code::CenterSize, Code::CornerSize] {
            for in_target in [false, true] {
                let loc = encode(code, in_target, prior, variance, gt).unwrap();
                let back = decode(code, in_target, prior, variance, loc).unwrap();
                for (x, y) in [
                    (back.xmin, gt.xmin),
                    (back.ymin, gt.ymin),
                    (back.xmax, gt.xmax),
                    (back.ymax, gt.ymax),
                ] {
                    assert!((x - y).abs() < 1e-6, "{code:?} {in_target}: {back:?}");
                }
            }
        }
        // CENTER_SIZE: the centre's offset in prior widths over the variance.
        let loc = encode(Code::CenterSize, false, prior, variance, gt).unwrap();
        assert!((loc[0] - (0.475 - 0.4) / 0.4 / 0.1).abs() < 1e-5);
        assert!((loc[2] - (0.45f32 / 0.4).ln() / 0.2).abs() < 1e-5);
    }

    #[test]
    fn boxes_that_cannot_be_coded_are_refused() {
        let prior = b(0.2, 0.3, 0.6, 0.5);
        let flat = b(0.2, 0.3, 0.2, 0.5);
        assert!(encode(Code::CenterSize, false, prior, [0.1; 4], flat).is_err());
        assert!(encode(Code::CenterSize, false, flat, [0.1; 4], prior).is_err());
        assert!(encode(Code::Corner, false, prior, [0.0, 0.1, 0.1, 0.1], prior).is_err());
        // With the variance in the target, none is divided by.
        assert!(encode(Code::Corner, true, prior, [0.0; 4], prior).is_ok());
        assert!(b(-0.1, 0.0, 0.5, 0.5).crosses_boundary());
        assert!(!b(0.0, 0.0, 1.0, 1.0).crosses_boundary());
    }
}
