//! The SSD fork's PriorBox: the default boxes of one feature map, from its
//! size and the image's, with their variances. The values depend on
//! shapes alone: computed on the host once per shape and left in the top
//! while nothing else writes it, so on a GPU they are uploaded once,
//! where the fork computes and uploads them on every pass.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

const OP: &str = "set up PriorBox";

/// SSD `PriorBox`: bottoms (feature map, image), one top of shape
/// (1, 2, H·W·P·4).
pub(crate) struct PriorBoxLayer {
    /// The fork truncates the sizes to integers before use.
    min_sizes: Vec<i64>,
    max_sizes: Vec<i64>,
    /// 1 first, then each given ratio (and its inverse with `flip`).
    aspect_ratios: Vec<f32>,
    clip: bool,
    variance: Vec<f32>,
    /// (w, h) when given, else read from the image bottom.
    img: Option<(usize, usize)>,
    /// (w, h) when given, else image size / feature-map size.
    step: Option<(f32, f32)>,
    offset: f32,
    /// FaceBoxes' boxes ([`Fork::FaceBoxes`](crate::Fork::FaceBoxes)).
    faceboxes: bool,
    /// The (h, w, image w, image h) of the last boxes written, and the
    /// top's write stamp just after.
    written: Option<([usize; 4], u64)>,
}

/// FaceBoxes' density of a min size: its square boxes tiled `n x n`
/// about each cell's centre, `step` apart.
fn faceboxes_density(min: i64) -> Option<(i64, f32)> {
    match min {
        32 => Some((4, 8.0)),
        64 => Some((2, 16.0)),
        _ => None,
    }
}

fn positive(what: &str, values: &[f64]) -> Result<()> {
    if let Some(v) = values.iter().find(|&&v| v <= 0.0) {
        return Err(bad_param(OP, format!("{what} must be positive, not {v}")));
    }
    Ok(())
}

/// `(w, h)` from `both` or from the pair `w`, `h` (not both ways), each
/// positive; `None` where none is given.
fn size_pair(p: &ParamMessage, both: &str, w: &str, h: &str) -> Result<Option<(f64, f64)>> {
    let pair = match (p.has(both), p.has(w) || p.has(h)) {
        (true, true) => {
            return Err(bad_param(
                OP,
                format!("either {both} or {h}/{w} should be specified; not both"),
            ));
        }
        (true, false) => (p.float(both), p.float(both)),
        (false, true) => (p.float(w), p.float(h)),
        (false, false) => return Ok(None),
    };
    if !(pair.0 > 0.0 && pair.1 > 0.0) {
        return Err(bad_param(
            OP,
            format!("{both} {} x {} must be positive", pair.0, pair.1),
        ));
    }
    Ok(Some(pair))
}

impl PriorBoxLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "prior_box_param");
        let min = p.floats("min_size");
        if min.is_empty() {
            return Err(bad_param(OP, "must provide min_size"));
        }
        positive("min_size", &min)?;
        let max = p.floats("max_size");
        if !max.is_empty() {
            if max.len() != min.len() {
                return Err(bad_param(
                    OP,
                    format!(
                        "{} max_size for {} min_size; give one each",
                        max.len(),
                        min.len()
                    ),
                ));
            }
            if let Some((lo, hi)) = min.iter().zip(&max).find(|(lo, hi)| hi <= lo) {
                return Err(bad_param(
                    OP,
                    format!("max_size must be greater than min_size: {hi} after {lo}"),
                ));
            }
        }
        let mut aspect_ratios = vec![1.0f32];
        for ar in p.floats("aspect_ratio") {
            let ar = ar as f32;
            if aspect_ratios.iter().any(|&a| (ar - a).abs() < 1e-6) {
                continue;
            }
            if ar <= 0.0 {
                return Err(bad_param(
                    OP,
                    format!("aspect_ratio must be positive, not {ar}"),
                ));
            }
            aspect_ratios.push(ar);
            if p.boolean("flip") {
                aspect_ratios.push(1.0 / ar);
            }
        }
        let variance = p.floats("variance");
        positive("variance", &variance)?;
        let variance: Vec<f32> = match variance.len() {
            0 => vec![0.1],
            1 | 4 => variance.iter().map(|&v| v as f32).collect(),
            n => {
                return Err(bad_param(
                    OP,
                    format!("variance takes 1 or 4 values, not {n}"),
                ));
            }
        };
        let img =
            size_pair(&p, "img_size", "img_w", "img_h")?.map(|(w, h)| (w as usize, h as usize));
        let step = size_pair(&p, "step", "step_w", "step_h")?.map(|(w, h)| (w as f32, h as f32));
        Ok(Self {
            min_sizes: min.iter().map(|&v| v as i64).collect(),
            max_sizes: max.iter().map(|&v| v as i64).collect(),
            aspect_ratios,
            clip: p.boolean("clip"),
            variance,
            img,
            step,
            offset: p.float("offset") as f32,
            faceboxes: false,
            written: None,
        })
    }

    /// The layer as sfzhang15/FaceBoxes computes it: a min size of 32
    /// tiled 4 x 4 about each cell's centre (8 px apart), of 64 tiled 2 x
    /// 2 (16 px apart), and each min size's square `size - 1` wide. The
    /// fork sizes its top for 21 boxes a cell where there are 3 min sizes
    /// (its 32, 64 and 128), for Caffe's count otherwise: a layer whose
    /// boxes would not fill that count is refused, where the fork writes
    /// past its top or leaves it short.
    pub(crate) fn with_faceboxes_density(self) -> Result<Self> {
        let written: usize = self
            .min_sizes
            .iter()
            .map(|&m| faceboxes_density(m).map_or(1, |(n, _)| (n * n) as usize))
            .sum::<usize>()
            + self.max_sizes.len()
            + (self.aspect_ratios.len() - 1) * self.min_sizes.len();
        let sized = if self.min_sizes.len() == 3 {
            21 + self.max_sizes.len()
        } else {
            self.aspect_ratios.len() * self.min_sizes.len() + self.max_sizes.len()
        };
        if written != sized {
            return Err(bad_param(
                OP,
                format!(
                    "FaceBoxes' PriorBox writes {written} boxes a cell for min sizes {:?}, but \
                     sizes its top for {sized}",
                    self.min_sizes
                ),
            ));
        }
        Ok(Self {
            faceboxes: true,
            ..self
        })
    }

    /// Boxes per feature-map cell.
    fn per_cell(&self) -> usize {
        if self.faceboxes && self.min_sizes.len() == 3 {
            return 21 + self.max_sizes.len();
        }
        self.aspect_ratios.len() * self.min_sizes.len() + self.max_sizes.len()
    }

    /// The boxes of an `h` x `w` map over an image of `img_w` x `img_h`,
    /// in the fork's order (cell by cell, min size by min size: the
    /// square, the max-size square, then each other ratio).
    fn boxes(&self, h: usize, w: usize, img_w: usize, img_h: usize) -> Vec<f32> {
        let (step_w, step_h) = self
            .step
            .unwrap_or((img_w as f32 / w as f32, img_h as f32 / h as f32));
        let mut out = Vec::with_capacity(h * w * self.per_cell() * 4);
        // The fork computes the corners in double from float centres and
        // half sides.
        let mut push_half = |cx: f32, cy: f32, half_w: f64, half_h: f64| {
            let (cx, cy) = (f64::from(cx), f64::from(cy));
            let (iw, ih) = (img_w as f64, img_h as f64);
            out.extend_from_slice(&[
                ((cx - half_w) / iw) as f32,
                ((cy - half_h) / ih) as f32,
                ((cx + half_w) / iw) as f32,
                ((cy + half_h) / ih) as f32,
            ]);
        };
        let half = |side: f32| f64::from(side) / 2.0;
        for y in 0..h {
            for x in 0..w {
                let cx = (x as f32 + self.offset) * step_w;
                let cy = (y as f32 + self.offset) * step_h;
                for (s, &min) in self.min_sizes.iter().enumerate() {
                    let side = min as f32;
                    if self.faceboxes {
                        // FaceBoxes: squares of size - 1, tiled about
                        // the centre at 32 and 64, rows outer.
                        let less_one = (f64::from(side) - 1.0) / 2.0;
                        let (n, apart) = faceboxes_density(min).unwrap_or((1, 0.0));
                        for i in -n / 2..n - n / 2 {
                            for j in -n / 2..n - n / 2 {
                                let (dx, dy) = (j as f32 * apart, i as f32 * apart);
                                push_half(cx + dx, cy + dy, less_one, less_one);
                            }
                        }
                    } else {
                        push_half(cx, cy, half(side), half(side));
                    }
                    if let Some(&max) = self.max_sizes.get(s) {
                        let side = ((min * max) as f64).sqrt() as f32;
                        push_half(cx, cy, half(side), half(side));
                    }
                    for &ar in &self.aspect_ratios {
                        if (ar - 1.0).abs() < 1e-6 {
                            continue;
                        }
                        let root = ar.sqrt();
                        push_half(cx, cy, half(min as f32 * root), half(min as f32 / root));
                    }
                }
            }
        }
        if self.clip {
            for v in &mut out {
                *v = v.clamp(0.0, 1.0);
            }
        }
        out
    }
}

impl<T: MathElement> DynLayer<T> for PriorBoxLayer {
    fn type_name(&self) -> &str {
        "PriorBox"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let (h, w) = spatial(bottoms[0]);
        Ok(vec![TopShape::new(vec![1, 2, h * w * self.per_cell() * 4])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (h, w) = spatial(bottoms[0]);
        let (img_w, img_h) = self.img.unwrap_or_else(|| {
            let (ih, iw) = spatial(bottoms[1]);
            (iw, ih)
        });
        if img_w == 0 || img_h == 0 {
            return Err(bad_param(
                "prior box",
                format!("the image {} has no pixels", bottoms[1].shape_string()),
            ));
        }
        let sizes = [h, w, img_w, img_h];
        let stamp = || tops[0].data().write_stamp();
        if self.written == Some((sizes, stamp())) {
            return Ok(());
        }
        let boxes = self.boxes(h, w, img_w, img_h);
        {
            let mut top = tops[0].mutable_cpu_data()?;
            let (coords, variances) = top.split_at_mut(boxes.len());
            for (t, &b) in coords.iter_mut().zip(&boxes) {
                *t = T::from_f64(f64::from(b));
            }
            for (i, v) in variances.iter_mut().enumerate() {
                *v = T::from_f64(f64::from(self.variance[i % self.variance.len()]));
            }
        }
        self.written = Some((sizes, stamp()));
        Ok(())
    }

    fn backward(
        &mut self,
        _tops: &[&Blob<T>],
        _down: &[bool],
        _bottoms: &[&Blob<T>],
    ) -> Result<()> {
        Ok(())
    }

    fn allow_force_backward(&self, _bottom: usize) -> bool {
        false
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}

/// (height, width): a 4-D blob's axes 2 and 3, as the fork's legacy
/// accessors read them (1 where absent).
fn spatial<T: MathElement>(b: &Blob<T>) -> (usize, usize) {
    let s = b.shape();
    let at = |i: usize| s.get(i).copied().unwrap_or(1);
    (at(2), at(3))
}
