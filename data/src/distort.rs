//! The SSD fork's photometric distortion (`transform_param.distort_param`,
//! its `ApplyDistort`): random brightness, contrast, saturation and hue
//! changes and a random channel order, on 8-bit BGR planes, with
//! OpenCV's arithmetic (`convertTo`'s rounding, `cvtColor`'s 8-bit HSV).

use blob_kernels::cpu::SeededRng;
use blob_proto::ParamMessage;

use crate::annotated_data::uniform;

/// `distort_param`: each change's probability and range.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Distortion {
    brightness: (f32, f32),
    contrast: (f32, f32, f32),
    saturation: (f32, f32, f32),
    hue: (f32, f32),
    random_order: f32,
}

impl Distortion {
    /// From `distort_param`, refusing what the fork's checks refuse.
    pub(crate) fn from_param(p: &ParamMessage) -> Result<Self, String> {
        let f = |name: &str| p.float(name) as f32;
        let d = Self {
            brightness: (f("brightness_prob"), f("brightness_delta")),
            contrast: (f("contrast_prob"), f("contrast_lower"), f("contrast_upper")),
            saturation: (
                f("saturation_prob"),
                f("saturation_lower"),
                f("saturation_upper"),
            ),
            hue: (f("hue_prob"), f("hue_delta")),
            random_order: f("random_order_prob"),
        };
        let all = [
            d.brightness.0,
            d.brightness.1,
            d.contrast.0,
            d.contrast.1,
            d.contrast.2,
            d.saturation.0,
            d.saturation.1,
            d.saturation.2,
            d.hue.0,
            d.hue.1,
            d.random_order,
        ];
        if all.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return Err(format!(
                "distort_param's probabilities, deltas and bounds must be non-negative \
                 numbers: {d:?}"
            ));
        }
        for (what, (_, lower, upper)) in [("contrast", d.contrast), ("saturation", d.saturation)] {
            if upper < lower {
                return Err(format!("{what} upper must be >= lower: {lower} to {upper}"));
            }
        }
        Ok(d)
    }

    /// The fork's `ApplyDistort` on `planes` (channels x height x width,
    /// BGR), drawing from `rng` in the fork's order.
    pub(crate) fn apply(
        &self,
        planes: &mut [u8],
        channels: usize,
        rng: &mut SeededRng,
    ) -> Result<(), String> {
        let colour = |what: &str| {
            if channels == 3 {
                Ok(())
            } else {
                Err(format!(
                    "{what} distortion takes a BGR image; this record has {channels} channels"
                ))
            }
        };
        let contrast_first = uniform(rng, 0.0, 1.0) > 0.5;
        self.brightness(planes, rng);
        if contrast_first {
            self.contrast(planes, rng);
        }
        if draw(rng, self.saturation.0) {
            colour("saturation")?;
            let s = uniform(rng, self.saturation.1, self.saturation.2);
            in_hsv(planes, |_, sat| *sat = convert(*sat, s, 0.0));
        }
        if draw(rng, self.hue.0) {
            colour("hue")?;
            let delta = uniform(rng, -self.hue.1, self.hue.1);
            if delta != 0.0 {
                // OpenCV saturates the shifted hue to a byte: no wrap
                // below 0; above 180 the conversion back wraps it.
                in_hsv(planes, |hue, _| *hue = convert(*hue, 1.0, delta));
            }
        }
        if !contrast_first {
            self.contrast(planes, rng);
        }
        if draw(rng, self.random_order) {
            colour("channel order")?;
            let plane = planes.len() / 3;
            let mut order = [0, 1, 2];
            // std::random_shuffle's walk.
            for i in (1..3).rev() {
                let j = (rng.next_u32() as usize) % (i + 1);
                order.swap(i, j);
            }
            let copy = planes.to_vec();
            for (c, &from) in order.iter().enumerate() {
                planes[c * plane..][..plane].copy_from_slice(&copy[from * plane..][..plane]);
            }
        }
        Ok(())
    }

    fn brightness(&self, planes: &mut [u8], rng: &mut SeededRng) {
        if draw(rng, self.brightness.0) {
            let delta = uniform(rng, -self.brightness.1, self.brightness.1);
            if delta != 0.0 {
                planes.iter_mut().for_each(|v| *v = convert(*v, 1.0, delta));
            }
        }
    }

    fn contrast(&self, planes: &mut [u8], rng: &mut SeededRng) {
        if draw(rng, self.contrast.0) {
            let alpha = uniform(rng, self.contrast.1, self.contrast.2);
            if (alpha - 1.0).abs() > 1e-3 {
                planes.iter_mut().for_each(|v| *v = convert(*v, alpha, 0.0));
            }
        }
    }
}

/// Whether a change at probability `p` happens (the fork draws, then
/// compares strictly).
fn draw(rng: &mut SeededRng, p: f32) -> bool {
    uniform(rng, 0.0, 1.0) < p
}

/// OpenCV's `convertTo` of a byte: `v * alpha + beta` in float, rounded
/// half to even and saturated.
fn convert(v: u8, alpha: f32, beta: f32) -> u8 {
    (f32::from(v) * alpha + beta)
        .round_ties_even()
        .clamp(0.0, 255.0) as u8
}

/// Each pixel of BGR `planes` through OpenCV's 8-bit HSV: `change` gets
/// its hue (0 to 180) and saturation, the pixel is converted back.
fn in_hsv(planes: &mut [u8], mut change: impl FnMut(&mut u8, &mut u8)) {
    const SHIFT: u32 = 12;
    let sdiv = |v: i32| -> i32 {
        if v == 0 {
            0
        } else {
            (f64::from(255 << SHIFT) / f64::from(v)).round_ties_even() as i32
        }
    };
    let hdiv = |d: i32| -> i32 {
        if d == 0 {
            0
        } else {
            (f64::from(180 << SHIFT) / (6.0 * f64::from(d))).round_ties_even() as i32
        }
    };
    let half = 1 << (SHIFT - 1);
    let plane = planes.len() / 3;
    for i in 0..plane {
        let (b, g, r) = (
            i32::from(planes[i]),
            i32::from(planes[plane + i]),
            i32::from(planes[2 * plane + i]),
        );
        // cvtColor(BGR2HSV), 8-bit.
        let v = b.max(g).max(r);
        let diff = v - b.min(g).min(r);
        let vr = if v == r { -1 } else { 0 };
        let vg = if v == g { -1 } else { 0 };
        let s = (diff * sdiv(v) + half) >> SHIFT;
        let mut h =
            (vr & (g - b)) + (!vr & ((vg & (b - r + 2 * diff)) + (!vg & (r - g + 4 * diff))));
        h = (h * hdiv(diff) + half) >> SHIFT;
        if h < 0 {
            h += 180;
        }
        let (mut hue, mut sat) = (h as u8, s as u8);
        change(&mut hue, &mut sat);
        // cvtColor(HSV2BGR), 8-bit: through float as OpenCV goes.
        let (s, v) = (f32::from(sat) / 255.0, v as f32 / 255.0);
        let (b, g, r) = if s == 0.0 {
            (v, v, v)
        } else {
            let mut h = f32::from(hue) * (6.0 / 180.0);
            while h >= 6.0 {
                h -= 6.0;
            }
            let mut sector = h.floor() as usize;
            h -= sector as f32;
            if sector >= 6 {
                sector = 0;
                h = 0.0;
            }
            let tab = [
                v,
                v * (1.0 - s),
                v * (1.0 - s * h),
                v * (1.0 - s * (1.0 - h)),
            ];
            const SECTORS: [[usize; 3]; 6] = [
                [1, 3, 0],
                [1, 0, 2],
                [3, 0, 1],
                [0, 2, 1],
                [0, 1, 3],
                [2, 1, 0],
            ];
            let at = SECTORS[sector];
            (tab[at[0]], tab[at[1]], tab[at[2]])
        };
        let byte = |x: f32| (x * 255.0).round_ties_even().clamp(0.0, 255.0) as u8;
        planes[i] = byte(b);
        planes[plane + i] = byte(g);
        planes[2 * plane + i] = byte(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hsv_round_trip(bgr: [u8; 3]) -> [u8; 3] {
        let mut p = bgr.to_vec();
        in_hsv(&mut p, |_, _| {});
        [p[0], p[1], p[2]]
    }

    #[test]
    fn hsv_as_opencv_converts_eight_bit_colours() {
        // Pure colours and grays come back as they were.
        for c in [
            [0, 0, 255],
            [0, 255, 0],
            [255, 0, 0],
            [0, 0, 0],
            [128, 128, 128],
            [255, 255, 255],
        ] {
            assert_eq!(hsv_round_trip(c), c);
        }
        // Others within OpenCV's own 8-bit loss.
        for c in [[10, 200, 30], [250, 3, 77], [90, 91, 200]] {
            let back = hsv_round_trip(c);
            for k in 0..3 {
                assert!(back[k].abs_diff(c[k]) <= 3, "{c:?} -> {back:?}");
            }
        }
        // OpenCV's hue of pure red is 0, green 60, blue 120 (of 180).
        let mut seen = Vec::new();
        let mut p = vec![0, 0, 255, 0, 255, 0, 255, 0, 0];
        p = vec![p[0], p[3], p[6], p[1], p[4], p[7], p[2], p[5], p[8]];
        in_hsv(&mut p, |h, s| seen.push((*h, *s)));
        assert_eq!(seen, [(0, 255), (60, 255), (120, 255)]);
    }

    #[test]
    fn a_hue_shift_turns_red_towards_green_and_saturation_zero_is_gray() {
        let mut red = vec![0u8, 0, 255];
        in_hsv(&mut red, |h, _| *h = convert(*h, 1.0, 60.0));
        assert_eq!(red, [0, 255, 0]);
        let mut colour = vec![10u8, 200, 30];
        in_hsv(&mut colour, |_, s| *s = convert(*s, 0.0, 0.0));
        assert_eq!(colour, [200, 200, 200]);
        assert_eq!(convert(250, 1.0, 10.0), 255);
        assert_eq!(convert(3, 1.0, -10.0), 0);
        assert_eq!(convert(5, 0.5, 0.0), 2, "2.5 rounds to even");
    }

    #[test]
    fn distortion_draws_reproducibly_and_refuses_bad_settings() {
        let text = blob_proto::TextMessage::parse(
            "brightness_prob: 1 brightness_delta: 32 contrast_prob: 1 contrast_lower: 0.5 \
             contrast_upper: 1.5 saturation_prob: 1 saturation_lower: 0.5 saturation_upper: 1.5 \
             hue_prob: 1 hue_delta: 18 random_order_prob: 1",
        )
        .unwrap();
        let p = ParamMessage::from_text(&blob_proto::schema::DISTORTION, &text).unwrap();
        let d = Distortion::from_param(&p).unwrap();
        let image: Vec<u8> = (0..48).map(|i| (i * 5) as u8).collect();
        let run = |seed| {
            let mut x = image.clone();
            d.apply(&mut x, 3, &mut SeededRng::new(seed)).unwrap();
            x
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), image);
        let mut gray = vec![0u8; 16];
        assert!(d.apply(&mut gray, 1, &mut SeededRng::new(1)).is_err());
        let bad = blob_proto::TextMessage::parse("contrast_lower: 2 contrast_upper: 1").unwrap();
        let bad = ParamMessage::from_text(&blob_proto::schema::DISTORTION, &bad).unwrap();
        assert!(Distortion::from_param(&bad).unwrap_err().contains("upper"));
    }
}
