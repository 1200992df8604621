//! The SSD fork's `resize_param` as AnnotatedData applies it (its
//! `ApplyResize` and `UpdateBBoxByResizePolicy`): WARP to the size,
//! FIT_SMALL_SIZE (the aspect kept, the smaller side fitted, so each
//! image has a size of its own) or FIT_LARGE_SIZE_AND_PAD (the aspect
//! kept, the larger side fitted, the rest padded by `pad_mode`), with an
//! OpenCV interpolation drawn from `interp_mode`; the boxes follow.

use blob_kernels::cpu::SeededRng;
use blob_proto::ParamMessage;
use blob_runtime::BlobError;

use crate::annotated_data::{Rect, uniform};
use crate::datum::{Example, Pixels};
use crate::resize::{resize_area, resize_cubic, resize_lanczos4, resize_linear, resize_nearest};

/// How `resize_param` draws OpenCV's interpolation.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Interp {
    Linear,
    Area,
    Nearest,
    Cubic,
    Lanczos4,
}

/// How FIT_LARGE_SIZE_AND_PAD fills its margins (`pad_mode`, OpenCV's
/// `copyMakeBorder`).
#[derive(Clone, Debug, PartialEq)]
enum Pad {
    /// CONSTANT: `pad_value`, one or one a channel (0 without).
    Constant(Vec<f32>),
    /// MIRRORED: `BORDER_REFLECT_101`.
    Mirrored,
    /// REPEAT_NEAREST: `BORDER_REPLICATE`.
    Nearest,
}

/// `resize_mode`.
#[derive(Clone, Debug, PartialEq)]
enum Mode {
    Warp,
    FitSmall,
    FitLargeAndPad(Pad),
}

/// One `resize_param`: its mode and size, the interpolations it draws
/// from, and the weight the YOLO fork's multi-scale training draws it by.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ResizePolicy {
    pub prob: f32,
    mode: Mode,
    height: usize,
    width: usize,
    modes: Vec<Interp>,
}

impl ResizePolicy {
    /// `resize_param` number `i`, checked; `refused` words the error.
    pub(crate) fn from_param(
        r: &ParamMessage,
        i: usize,
        refused: fn(String) -> BlobError,
    ) -> Result<Self, BlobError> {
        let (h, w) = (r.uint("height") as usize, r.uint("width") as usize);
        if h == 0 || w == 0 || h > 16384 || w > 16384 {
            return Err(refused(format!(
                "resize_param {i} wants a height and a width from 1 to 16384, not {h} x {w}"
            )));
        }
        let mode = match r.enum_name("resize_mode") {
            "FIT_SMALL_SIZE" => Mode::FitSmall,
            "FIT_LARGE_SIZE_AND_PAD" => Mode::FitLargeAndPad(match r.enum_name("pad_mode") {
                "MIRRORED" => Pad::Mirrored,
                "REPEAT_NEAREST" => Pad::Nearest,
                _ => Pad::Constant(r.floats("pad_value").iter().map(|&v| v as f32).collect()),
            }),
            _ => Mode::Warp,
        };
        let modes = r
            .values("interp_mode")
            .map(|v| match v {
                // The fork's Interp_mode: LINEAR 1, AREA 2, NEAREST 3,
                // CUBIC 4, LANCZOS4 5.
                blob_proto::ParamValue::Enum(2) => Interp::Area,
                blob_proto::ParamValue::Enum(3) => Interp::Nearest,
                blob_proto::ParamValue::Enum(4) => Interp::Cubic,
                blob_proto::ParamValue::Enum(5) => Interp::Lanczos4,
                _ => Interp::Linear,
            })
            .collect();
        Ok(Self {
            prob: r.float("prob") as f32,
            mode,
            height: h,
            width: w,
            modes,
        })
    }

    /// Whether the YOLO fork's jitter keeps the aspect for this policy.
    pub(crate) fn keeps_aspect(&self) -> bool {
        matches!(self.mode, Mode::FitLargeAndPad(_))
    }

    /// Whether it warps to its size (`WARP`), keeping no aspect.
    pub(crate) fn warps(&self) -> bool {
        matches!(self.mode, Mode::Warp)
    }

    /// `ApplyResize` of an 8-bit record, and `UpdateBBoxByResizePolicy`
    /// of each of its boxes; the interpolation drawn from `rng`.
    pub(crate) fn apply(
        &self,
        example: &Example,
        boxes: &mut [Rect],
        rng: &mut SeededRng,
    ) -> Result<Example, String> {
        let interp = match self.modes.len() {
            0 => Interp::Linear,
            n => {
                // The fork's roll of an even die.
                let v = uniform(rng, 0.0, 1.0);
                self.modes[((v * n as f32) as usize).min(n - 1)]
            }
        };
        let (old_h, old_w) = (example.height, example.width);
        let (new_h, new_w) = (self.height as f32, self.width as f32);
        let orig_aspect = old_w as f32 / old_h as f32;
        let new_aspect = new_w / new_h;
        let resized = |h: f32, w: f32| -> Result<Example, String> {
            let (h, w) = (h as usize, w as usize);
            if h == 0 || w == 0 || h > 16384 || w > 16384 {
                return Err(format!(
                    "its {old_w} x {old_h} image keeps its aspect at {w} x {h} pixels, \
                     which cannot be an image"
                ));
            }
            Ok(resize_image(example, (h, w), interp))
        };
        // Each box in pixels of the old size, moved, then relative to the
        // new size (float, as the fork).
        let mut each = |f: &dyn Fn([f32; 4]) -> [f32; 4], (nw, nh): (f32, f32)| {
            for b in boxes.iter_mut() {
                let px = [
                    b.xmin * old_w as f32,
                    b.ymin * old_h as f32,
                    b.xmax * old_w as f32,
                    b.ymax * old_h as f32,
                ];
                let [x0, y0, x1, y1] = f(px);
                *b = Rect {
                    xmin: x0 / nw,
                    ymin: y0 / nh,
                    xmax: x1 / nw,
                    ymax: y1 / nh,
                };
            }
        };
        let (ow, oh) = (old_w as f32, old_h as f32);
        if let Mode::FitLargeAndPad(Pad::Constant(v)) = &self.mode
            && v.len() > 1
            && v.len() != example.channels
        {
            return Err(format!(
                "Specify either 1 pad_value or as many as channels: {} for {} channels",
                v.len(),
                example.channels
            ));
        }
        match &self.mode {
            Mode::Warp => {
                each(
                    &|[x0, y0, x1, y1]| {
                        [
                            (x0 * new_w / ow).max(0.0),
                            (y0 * new_h / oh).max(0.0),
                            (x1 * new_w / ow).min(new_w),
                            (y1 * new_h / oh).min(new_h),
                        ]
                    },
                    (new_w, new_h),
                );
                Ok(resize_image(example, (self.height, self.width), interp))
            }
            Mode::FitSmall => {
                let (fit_w, fit_h) = if orig_aspect < new_aspect {
                    (new_w, new_w / orig_aspect)
                } else {
                    (orig_aspect * new_h, new_h)
                };
                each(
                    &|[x0, y0, x1, y1]| {
                        [
                            (x0 * fit_w / ow).max(0.0),
                            (y0 * fit_h / oh).max(0.0),
                            (x1 * fit_w / ow).min(fit_w),
                            (y1 * fit_h / oh).min(fit_h),
                        ]
                    },
                    (fit_w, fit_h),
                );
                resized(fit_h.floor(), fit_w.floor())
            }
            Mode::FitLargeAndPad(pad) => {
                if orig_aspect > new_aspect {
                    let padding = (new_h - new_w / orig_aspect) / 2.0;
                    each(
                        &|[x0, y0, x1, y1]| {
                            let inner = new_h - 2.0 * padding;
                            [
                                (x0 * new_w / ow).max(0.0),
                                padding + (y0 * inner / oh).max(0.0),
                                (x1 * new_w / ow).min(new_w),
                                padding + (y1 * inner / oh).min(new_h),
                            ]
                        },
                        (new_w, new_h),
                    );
                    let img = resized((new_w / orig_aspect).floor(), new_w)?;
                    Ok(padded(&img, (self.height, self.width), pad))
                } else {
                    let padding = (new_w - orig_aspect * new_h) / 2.0;
                    each(
                        &|[x0, y0, x1, y1]| {
                            let inner = new_w - 2.0 * padding;
                            [
                                padding + (x0 * inner / ow).max(0.0),
                                (y0 * new_h / oh).max(0.0),
                                padding + (x1 * inner / ow).min(new_w),
                                (y1 * new_h / oh).min(new_h),
                            ]
                        },
                        (new_w, new_h),
                    );
                    let img = resized(new_h, (orig_aspect * new_h).floor())?;
                    Ok(padded(&img, (self.height, self.width), pad))
                }
            }
        }
    }
}

/// `cv::resize` of an 8-bit record to `height x width`.
fn resize_image(example: &Example, (height, width): (usize, usize), interp: Interp) -> Example {
    let Pixels::Bytes(src) = &example.pixels else {
        unreachable!("AnnotatedData resizes 8-bit records alone")
    };
    let (c, h, w) = (example.channels, example.height, example.width);
    let out = match interp {
        Interp::Linear => resize_linear(src, c, h, w, height, width),
        Interp::Area => resize_area(src, c, h, w, height, width),
        Interp::Nearest => resize_nearest(src, c, (h, w), (height, width)),
        Interp::Cubic => resize_cubic(src, c, h, w, height, width),
        Interp::Lanczos4 => resize_lanczos4(src, c, h, w, height, width),
    };
    Example {
        channels: c,
        height,
        width,
        pixels: Pixels::Bytes(out),
        label: example.label,
    }
}

/// OpenCV's `borderInterpolate` of an index `p` outside `0..n`.
fn border(p: i64, n: i64, pad: &Pad) -> usize {
    match pad {
        Pad::Nearest | Pad::Constant(_) => p.clamp(0, n - 1) as usize,
        Pad::Mirrored => {
            if n == 1 {
                return 0;
            }
            let mut p = p;
            while p < 0 || p >= n {
                p = if p < 0 { -p } else { 2 * n - 2 - p };
            }
            p as usize
        }
    }
}

/// `AspectKeepingResizeAndPad`'s `copyMakeBorder`: `img` centred in
/// `height x width` (the odd pixel of margin after it), its margins
/// filled by `pad`.
fn padded(img: &Example, (height, width): (usize, usize), pad: &Pad) -> Example {
    let Pixels::Bytes(src) = &img.pixels else {
        unreachable!("AnnotatedData resizes 8-bit records alone")
    };
    let (c, h, w) = (img.channels, img.height, img.width);
    let top = ((height - h) as f64 / 2.0).floor() as i64;
    let left = ((width - w) as f64 / 2.0).floor() as i64;
    let mut out = Vec::with_capacity(c * height * width);
    for ch in 0..c {
        // cv::Scalar's channel value, saturated to a byte.
        let fill = match pad {
            Pad::Constant(v) => match v.len() {
                0 => 0,
                1 => v[0].round_ties_even().clamp(0.0, 255.0) as u8,
                _ => v
                    .get(ch)
                    .map_or(0, |x| x.round_ties_even().clamp(0.0, 255.0) as u8),
            },
            _ => 0,
        };
        let plane = &src[ch * h * w..][..h * w];
        for y in 0..height as i64 {
            let sy = y - top;
            for x in 0..width as i64 {
                let sx = x - left;
                let inside = (0..h as i64).contains(&sy) && (0..w as i64).contains(&sx);
                out.push(if inside {
                    plane[sy as usize * w + sx as usize]
                } else if matches!(pad, Pad::Constant(_)) {
                    fill
                } else {
                    plane[border(sy, h as i64, pad) * w + border(sx, w as i64, pad)]
                });
            }
        }
    }
    Example {
        channels: c,
        height,
        width,
        pixels: Pixels::Bytes(out),
        label: img.label,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str) -> ResizePolicy {
        let t = blob_proto::TextMessage::parse(text).unwrap();
        let m = ParamMessage::from_text(&blob_proto::schema::RESIZE, &t).unwrap();
        ResizePolicy::from_param(&m, 0, |d| BlobError::InvalidParameter {
            op: "test",
            detail: d,
        })
        .unwrap()
    }

    fn image(h: usize, w: usize) -> Example {
        Example {
            channels: 1,
            height: h,
            width: w,
            pixels: Pixels::Bytes((0..h * w).map(|v| v as u8).collect()),
            label: 0,
        }
    }

    fn bytes(e: &Example) -> &[u8] {
        match &e.pixels {
            Pixels::Bytes(b) => b,
            Pixels::Floats(_) => unreachable!(),
        }
    }

    #[test]
    fn warp_clips_each_box_to_the_image() {
        let p = policy("height: 8 width: 2");
        let mut boxes = [Rect {
            xmin: -0.1,
            ymin: 0.2,
            xmax: 0.5,
            ymax: 1.2,
        }];
        let out = p
            .apply(&image(4, 4), &mut boxes, &mut SeededRng::new(1))
            .unwrap();
        assert_eq!((out.height, out.width), (8, 2));
        let b = boxes[0];
        assert_eq!([b.xmin, b.ymin, b.xmax, b.ymax], [0.0, 0.2, 0.5, 1.0]);
    }

    #[test]
    fn fit_large_size_pads_the_short_side_and_moves_the_boxes() {
        // 2 x 4 into 4 x 4: resized to 2 x 4 (unchanged), one row of
        // margin above and below.
        let p = policy("resize_mode: FIT_LARGE_SIZE_AND_PAD height: 4 width: 4 pad_value: 9");
        let mut boxes = [Rect {
            xmin: 0.25,
            ymin: 0.0,
            xmax: 0.75,
            ymax: 1.0,
        }];
        let mut rng = SeededRng::new(1);
        let out = p.apply(&image(2, 4), &mut boxes, &mut rng).unwrap();
        assert_eq!((out.height, out.width), (4, 4));
        assert_eq!(
            bytes(&out),
            [9, 9, 9, 9, 0, 1, 2, 3, 4, 5, 6, 7, 9, 9, 9, 9]
        );
        // The fork's float padding: a quarter of the height each side.
        let b = boxes[0];
        assert_eq!([b.xmin, b.ymin, b.xmax, b.ymax], [0.25, 0.25, 0.75, 0.75]);
        // Mirrored (reflect 101) and nearest margins, left and right.
        for (mode, want) in [
            ("MIRRORED", [1, 0, 1, 0, 3, 2, 3, 2]),
            ("REPEAT_NEAREST", [0, 0, 1, 1, 2, 2, 3, 3]),
        ] {
            let p = policy(&format!(
                "resize_mode: FIT_LARGE_SIZE_AND_PAD pad_mode: {mode} height: 2 width: 4"
            ));
            let tall = Example {
                pixels: Pixels::Bytes(vec![0, 1, 2, 3]),
                ..image(2, 2)
            };
            let out = p.apply(&tall, &mut [], &mut rng).unwrap();
            assert_eq!(bytes(&out), want, "{mode}");
        }
    }

    #[test]
    fn fit_small_size_keeps_the_aspect_at_the_smaller_side() {
        let p = policy("resize_mode: FIT_SMALL_SIZE height: 4 width: 4");
        let mut boxes = [Rect {
            xmin: 0.5,
            ymin: 0.0,
            xmax: 1.0,
            ymax: 1.0,
        }];
        let out = p
            .apply(&image(4, 8), &mut boxes, &mut SeededRng::new(1))
            .unwrap();
        // 4 x 8 fits 4 high: 8 wide, so the image is unchanged.
        assert_eq!((out.height, out.width), (4, 8));
        assert_eq!(bytes(&out), bytes(&image(4, 8)));
        let b = boxes[0];
        assert_eq!([b.xmin, b.ymin, b.xmax, b.ymax], [0.5, 0.0, 1.0, 1.0]);
        // An aspect no image can keep at the size.
        let thin = policy("resize_mode: FIT_LARGE_SIZE_AND_PAD height: 2 width: 2");
        let e = thin
            .apply(&image(1, 200), &mut [], &mut SeededRng::new(1))
            .unwrap_err();
        assert!(e.contains("cannot be an image"), "{e}");
    }
}
