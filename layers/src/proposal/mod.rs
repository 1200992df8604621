//! Faster R-CNN's region proposals (py-faster-rcnn's
//! `rpn/proposal_layer.py`, which C++ forks and OpenCV name `Proposal`):
//! anchors over the feature map moved by the predicted offsets, clipped
//! to the image, small boxes dropped, the best `pre_nms_topn` by score
//! through non-maximum suppression, the first `post_nms_topn` kept. In
//! `f64` as NumPy computes it; on the host; no backward (as in the fork).
//!
//! The number of proposals depends on the scores, so they are found in
//! the reshape step (as DetectionOutput's detections are).

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

/// The C++ forks' and OpenCV's `ProposalParameter`.
pub(crate) static PROPOSAL_PARAMETER: MessageSchema = MessageSchema {
    name: "ProposalParameter",
    fields: &[
        FieldSchema::optional("feat_stride", 1, FieldKind::UInt32)
            .with_default(FieldDefault::Int(16)),
        FieldSchema::optional("base_size", 2, FieldKind::UInt32)
            .with_default(FieldDefault::Int(16)),
        FieldSchema::optional("min_size", 3, FieldKind::UInt32).with_default(FieldDefault::Int(16)),
        FieldSchema::repeated("ratio", 4, FieldKind::Float),
        FieldSchema::repeated("scale", 5, FieldKind::Float),
        FieldSchema::optional("pre_nms_topn", 6, FieldKind::UInt32)
            .with_default(FieldDefault::Int(6000)),
        FieldSchema::optional("post_nms_topn", 7, FieldKind::UInt32)
            .with_default(FieldDefault::Int(300)),
        FieldSchema::optional("nms_thresh", 8, FieldKind::Float)
            .with_default(FieldDefault::Float(0.7)),
    ],
};

/// `proposal_param`, field 8266713 as in the merged Faster R-CNN forks.
pub(crate) const PROPOSAL_FIELD: FieldSchema = FieldSchema::optional(
    "proposal_param",
    8266713,
    FieldKind::Message(&PROPOSAL_PARAMETER),
);

/// Bottoms: foreground/background scores (1, 2A, H, W), box offsets
/// (1, 4A, H, W) and `im_info` (height, width, scale); tops: the
/// proposals (R, 5) as `[0, x1, y1, x2, y2]` and optionally their scores
/// (R, 1).
pub(crate) struct ProposalLayer {
    feat_stride: f64,
    min_size: f64,
    pre_nms: usize,
    post_nms: usize,
    nms_thresh: f64,
    /// `[x1, y1, x2, y2]` around the origin, one per (ratio, scale).
    anchors: Vec<[f64; 4]>,
    /// The proposals of the last reshape and their scores, or why none.
    found: Result<Vec<([f64; 4], f64)>>,
}

impl ProposalLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(layer, &PROPOSAL_FIELD, &PROPOSAL_PARAMETER);
        let or = |given: Vec<f64>, default: &[f64]| {
            if given.is_empty() {
                default.to_vec()
            } else {
                given
            }
        };
        let ratios = or(p.floats("ratio"), &[0.5, 1.0, 2.0]);
        let scales = or(p.floats("scale"), &[8.0, 16.0, 32.0]);
        let settings = Settings {
            feat_stride: p.uint("feat_stride") as f64,
            base_size: p.uint("base_size") as f64,
            min_size: p.uint("min_size") as f64,
            pre_nms: p.uint("pre_nms_topn") as usize,
            post_nms: p.uint("post_nms_topn") as usize,
            nms_thresh: p.float("nms_thresh"),
        };
        Self::new(settings, &ratios, &scales)
    }

    fn new(s: Settings, ratios: &[f64], scales: &[f64]) -> Result<Self> {
        if s.feat_stride <= 0.0 || s.base_size <= 0.0 {
            return Err(bad_param(
                "set up Proposal",
                format!(
                    "feat_stride ({}) and base_size ({}) must be positive",
                    s.feat_stride, s.base_size
                ),
            ));
        }
        if let Some(bad) = ratios
            .iter()
            .chain(scales)
            .find(|v| !(**v > 0.0 && v.is_finite()))
        {
            return Err(bad_param(
                "set up Proposal",
                format!("ratios and scales must be positive, not {bad}"),
            ));
        }
        Ok(Self {
            feat_stride: s.feat_stride,
            min_size: s.min_size,
            pre_nms: s.pre_nms,
            post_nms: s.post_nms,
            nms_thresh: s.nms_thresh,
            anchors: anchors(s.base_size, ratios, scales),
            found: Ok(Vec::new()),
        })
    }

    /// py-faster-rcnn's `ProposalLayer` as a `type: "Python"` layer:
    /// `param_str` is its YAML (`'feat_stride': 16`, `'scales': [8, 16, 32]`).
    pub(crate) fn from_python(layer: &ParamMessage) -> Result<Self> {
        let python = layer.message("python_param");
        let param_str = python.map_or("", |p| p.string("param_str"));
        let mut settings = Settings::python_defaults();
        let mut scales = vec![8.0, 16.0, 32.0];
        let mut ratios = vec![0.5, 1.0, 2.0];
        for (key, value) in yaml_pairs(param_str)? {
            let number = || -> Result<f64> {
                value.trim().parse::<f64>().map_err(|_| {
                    bad_param(
                        "set up Proposal",
                        format!("python_param.param_str: '{key}' is {value:?}, not a number"),
                    )
                })
            };
            match key.as_str() {
                "feat_stride" => settings.feat_stride = number()?,
                "scales" => scales = yaml_list(&key, &value)?,
                "ratios" => ratios = yaml_list(&key, &value)?,
                other => {
                    return Err(bad_param(
                        "set up Proposal",
                        format!(
                            "python_param.param_str names '{other}', which rpn.proposal_layer \
                             does not read (it reads feat_stride, scales and ratios)"
                        ),
                    ));
                }
            }
        }
        Self::new(settings, &ratios, &scales)
    }

    fn propose<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<Vec<([f64; 4], f64)>> {
        let (scores, deltas, info) = (bottoms[0].shape(), bottoms[1].shape(), bottoms[2]);
        let a = self.anchors.len();
        let fits = scores.len() == 4
            && scores[0] == 1
            && scores[1] == 2 * a
            && deltas.len() == 4
            && deltas[..2] == [1, 4 * a]
            && deltas[2..] == scores[2..]
            && info.count() >= 3;
        if !fits {
            return Err(bad_param(
                "Proposal",
                format!(
                    "the bottoms are {}, {} and {}; with {a} anchors Proposal needs scores \
                     (1, {}, H, W), offsets (1, {}, H, W) and im_info of 3 values (one image, \
                     as py-faster-rcnn)",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string(),
                    info.shape_string(),
                    2 * a,
                    4 * a
                ),
            ));
        }
        let (h, w) = (scores[2], scores[3]);
        let plane = h * w;
        let score = bottoms[0].cpu_data()?;
        let delta = bottoms[1].cpu_data()?;
        let info = info.cpu_data()?;
        let (im_h, im_w, im_scale) = (info[0].to_f64(), info[1].to_f64(), info[2].to_f64());
        let min_size = self.min_size * im_scale;
        let clip = |v: f64, hi: f64| v.min(hi - 1.0).max(0.0);
        // Python's order: position (y, x), then anchor.
        let mut boxes = Vec::with_capacity(plane * a);
        for y in 0..h {
            for x in 0..w {
                let (sx, sy) = (x as f64 * self.feat_stride, y as f64 * self.feat_stride);
                for (k, anchor) in self.anchors.iter().enumerate() {
                    let at = |channel: usize| channel * plane + y * w + x;
                    let d = |i: usize| delta[at(4 * k + i)].to_f64();
                    let (x1, y1) = (anchor[0] + sx, anchor[1] + sy);
                    let width = anchor[2] + sx - x1 + 1.0;
                    let height = anchor[3] + sy - y1 + 1.0;
                    let cx = d(0) * width + x1 + 0.5 * width;
                    let cy = d(1) * height + y1 + 0.5 * height;
                    let (pw, ph) = (d(2).exp() * width, d(3).exp() * height);
                    let b = [
                        clip(cx - 0.5 * pw, im_w),
                        clip(cy - 0.5 * ph, im_h),
                        clip(cx + 0.5 * pw, im_w),
                        clip(cy + 0.5 * ph, im_h),
                    ];
                    if b[2] - b[0] + 1.0 >= min_size && b[3] - b[1] + 1.0 >= min_size {
                        boxes.push((b, score[at(a + k)].to_f64()));
                    }
                }
            }
        }
        // `argsort()[::-1]`: highest first, later entries first among ties.
        let mut order: Vec<usize> = (0..boxes.len()).collect();
        order.sort_by(|&i, &j| boxes[j].1.total_cmp(&boxes[i].1).then(j.cmp(&i)));
        if self.pre_nms > 0 {
            order.truncate(self.pre_nms);
        }
        let ranked: Vec<([f64; 4], f64)> = order.iter().map(|&i| boxes[i]).collect();
        let mut kept = nms(&ranked, self.nms_thresh);
        if self.post_nms > 0 {
            kept.truncate(self.post_nms);
        }
        Ok(kept.into_iter().map(|i| ranked[i]).collect())
    }
}

/// The settings py-faster-rcnn's `cfg.TEST` gives its Python layer.
struct Settings {
    feat_stride: f64,
    base_size: f64,
    min_size: f64,
    pre_nms: usize,
    post_nms: usize,
    nms_thresh: f64,
}

impl Settings {
    fn python_defaults() -> Self {
        Self {
            feat_stride: 16.0,
            base_size: 16.0,
            min_size: 16.0,
            pre_nms: 6000,
            post_nms: 300,
            nms_thresh: 0.7,
        }
    }
}

/// py-faster-rcnn's `generate_anchors`: for each ratio (widths and
/// heights rounded half to even, as NumPy rounds), each scale.
fn anchors(base: f64, ratios: &[f64], scales: &[f64]) -> Vec<[f64; 4]> {
    let centre = 0.5 * (base - 1.0);
    let around = |ws: f64, hs: f64| {
        [
            centre - 0.5 * (ws - 1.0),
            centre - 0.5 * (hs - 1.0),
            centre + 0.5 * (ws - 1.0),
            centre + 0.5 * (hs - 1.0),
        ]
    };
    let mut out = Vec::new();
    for &r in ratios {
        let ws = (base * base / r).sqrt().round_ties_even();
        let hs = (ws * r).round_ties_even();
        for &s in scales {
            out.push(around(ws * s, hs * s));
        }
    }
    out
}

/// py-faster-rcnn's `cpu_nms` over boxes already ranked: areas with the
/// `+ 1` pixel convention, a box dropped at an overlap of `thresh` or more.
fn nms(ranked: &[([f64; 4], f64)], thresh: f64) -> Vec<usize> {
    let area = |b: &[f64; 4]| (b[2] - b[0] + 1.0) * (b[3] - b[1] + 1.0);
    let mut suppressed = vec![false; ranked.len()];
    let mut keep = Vec::new();
    for i in 0..ranked.len() {
        if suppressed[i] {
            continue;
        }
        keep.push(i);
        let (bi, ai) = (&ranked[i].0, area(&ranked[i].0));
        for j in i + 1..ranked.len() {
            if suppressed[j] {
                continue;
            }
            let bj = &ranked[j].0;
            let iw = (bi[2].min(bj[2]) - bi[0].max(bj[0]) + 1.0).max(0.0);
            let ih = (bi[3].min(bj[3]) - bi[1].max(bj[1]) + 1.0).max(0.0);
            let inter = iw * ih;
            if inter / (ai + area(bj) - inter) >= thresh {
                suppressed[j] = true;
            }
        }
    }
    keep
}

/// `key: value` pairs of a one-level YAML mapping, keys unquoted.
fn yaml_pairs(text: &str) -> Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let line = line.trim_start_matches('{').trim_end_matches('}');
        let Some((key, value)) = line.split_once(':') else {
            return Err(bad_param(
                "set up Proposal",
                format!("python_param.param_str line {line:?} is not 'key': value"),
            ));
        };
        let key = key
            .trim()
            .trim_matches(|c| c == '\'' || c == '"')
            .to_string();
        pairs.push((key, value.trim().to_string()));
    }
    Ok(pairs)
}

/// A YAML list of numbers (`[8, 16]`, `!!python/tuple [8, 16]`, `(8, 16)`).
fn yaml_list(key: &str, value: &str) -> Result<Vec<f64>> {
    let inner = value
        .trim_start_matches("!!python/tuple")
        .trim()
        .trim_matches(|c| matches!(c, '[' | ']' | '(' | ')'));
    inner
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse::<f64>().map_err(|_| {
                bad_param(
                    "set up Proposal",
                    format!("python_param.param_str: '{key}' holds {v:?}, not a number"),
                )
            })
        })
        .collect()
}

impl<T: MathElement> DynLayer<T> for ProposalLayer {
    fn type_name(&self) -> &str {
        "Proposal"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(3)
    }

    fn tops(&self) -> Arity {
        Arity::range(1, 2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        self.found = self.propose(bottoms);
        let rows = self.found.as_ref().map_or(1, Vec::len);
        let mut shapes = vec![TopShape::new(vec![rows, 5])];
        if tops.len() > 1 {
            shapes.push(TopShape::new(vec![rows, 1]));
        }
        Ok(shapes)
    }

    fn forward(&mut self, _bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let found = std::mem::replace(&mut self.found, Ok(Vec::new()))?;
        let mut rois = tops[0].mutable_cpu_data()?;
        for (row, (b, _)) in rois.chunks_mut(5).zip(&found) {
            row[0] = T::ZERO;
            for (out, &v) in row[1..].iter_mut().zip(b) {
                // NumPy's `astype(np.float32)`.
                *out = T::from_f64(f64::from(v as f32));
            }
        }
        if let Some(scores) = tops.get(1) {
            for (out, (_, s)) in scores.mutable_cpu_data()?.iter_mut().zip(&found) {
                *out = T::from_f64(*s);
            }
        }
        Ok(())
    }

    fn backward(&mut self, _tops: &[&Blob<T>], down: &[bool], _bottoms: &[&Blob<T>]) -> Result<()> {
        if down.iter().any(|&d| d) {
            return Err(bad_param(
                "Proposal",
                "Proposal has no backward pass (as in py-faster-rcnn)",
            ));
        }
        Ok(())
    }

    fn allow_force_backward(&self, _bottom: usize) -> bool {
        false
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_py_faster_rcnns() {
        // generate_anchors()'s documented output for base 16.
        let a = anchors(16.0, &[0.5, 1.0, 2.0], &[8.0, 16.0, 32.0]);
        assert_eq!(a[0], [-84.0, -40.0, 99.0, 55.0]);
        assert_eq!(a[2], [-360.0, -184.0, 375.0, 199.0]);
        assert_eq!(a[4], [-120.0, -120.0, 135.0, 135.0]);
        assert_eq!(a[8], [-168.0, -344.0, 183.0, 359.0]);
    }

    #[test]
    fn param_str_is_read_as_the_python_layer_reads_it() {
        let pairs = yaml_pairs("'feat_stride': 16\n'scales': !!python/tuple [4, 8]").unwrap();
        assert_eq!(pairs[0], ("feat_stride".into(), "16".into()));
        assert_eq!(yaml_list("scales", &pairs[1].1).unwrap(), [4.0, 8.0]);
        assert!(yaml_pairs("feat_stride 16").is_err());
        assert!(yaml_list("scales", "[4, x]").is_err());
    }

    #[test]
    fn overlapping_boxes_keep_the_better_one() {
        let ranked = [
            ([0.0, 0.0, 9.0, 9.0], 0.9),
            ([1.0, 1.0, 10.0, 10.0], 0.8),
            ([20.0, 20.0, 29.0, 29.0], 0.7),
        ];
        // 81 of 119 pixels shared: 0.68.
        assert_eq!(nms(&ranked, 0.68), [0, 2]);
        assert_eq!(nms(&ranked, 0.69), [0, 1, 2]);
    }
}
