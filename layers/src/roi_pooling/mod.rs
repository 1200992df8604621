//! `ROIPooling` of Fast and Faster R-CNN (rbgirshick/fast-rcnn,
//! py-faster-rcnn): MAX pooling of each region of interest into a fixed
//! `pooled_h` x `pooled_w` grid.

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

/// The forks' `ROIPoolingParameter`.
pub(crate) static ROI_POOLING_PARAMETER: MessageSchema = MessageSchema {
    name: "ROIPoolingParameter",
    fields: &[
        FieldSchema::optional("pooled_h", 1, FieldKind::UInt32),
        FieldSchema::optional("pooled_w", 2, FieldKind::UInt32),
        FieldSchema::optional("spatial_scale", 3, FieldKind::Float)
            .with_default(FieldDefault::Float(1.0)),
    ],
};

/// `roi_pooling_param`, field 8266711 as in fast-rcnn's `caffe.proto`.
pub(crate) const ROI_POOLING_FIELD: FieldSchema = FieldSchema::optional(
    "roi_pooling_param",
    8266711,
    FieldKind::Message(&ROI_POOLING_PARAMETER),
);

/// Bottoms: the features (N, C, H, W) and the regions (R, 5) as
/// `[item, x1, y1, x2, y2]` in input pixels; top (R, C, pooled_h,
/// pooled_w). A bin that falls outside the features gives 0.
pub(crate) struct RoiPoolingLayer {
    pooled: [usize; 2],
    spatial_scale: f32,
    /// Where each output's maximum came from in its item's features
    /// (`None`: an empty bin), for backward.
    argmax: Vec<Option<usize>>,
}

impl RoiPoolingLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(layer, &ROI_POOLING_FIELD, &ROI_POOLING_PARAMETER);
        let (h, w) = (p.uint("pooled_h"), p.uint("pooled_w"));
        if h == 0 || w == 0 {
            return Err(bad_param(
                "set up ROIPooling",
                format!("roi_pooling_param.pooled_h ({h}) and pooled_w ({w}) must be positive"),
            ));
        }
        Ok(Self {
            pooled: [h as usize, w as usize],
            spatial_scale: p.float("spatial_scale") as f32,
            argmax: Vec::new(),
        })
    }

    fn check<T: MathElement>(bottoms: &[&Blob<T>]) -> Result<()> {
        let (x, r) = (bottoms[0].shape(), bottoms[1].shape());
        if x.len() != 4 || r.len() < 2 || r[1..].iter().product::<usize>() != 5 {
            return Err(bad_param(
                "ROIPooling",
                format!(
                    "the bottoms are {} and {}; ROIPooling needs features (N, C, H, W) and \
                     regions (R, 5)",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string()
                ),
            ));
        }
        Ok(())
    }
}

/// C's `round`: halves away from zero.
fn round_half_away(v: f32) -> i64 {
    v.round() as i64
}

impl<T: MathElement> DynLayer<T> for RoiPoolingLayer {
    fn type_name(&self) -> &str {
        "ROIPooling"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        Self::check(bottoms)?;
        let (x, r) = (bottoms[0].shape(), bottoms[1].shape());
        Ok(vec![TopShape::new(vec![
            r[0],
            x[1],
            self.pooled[0],
            self.pooled[1],
        ])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        Self::check(bottoms)?;
        let s = bottoms[0].shape();
        let (items, channels, height, width) = (s[0], s[1], s[2] as i64, s[3] as i64);
        let plane = s[2] * s[3];
        let [ph_n, pw_n] = self.pooled;
        let x = bottoms[0].cpu_data()?;
        let rois = bottoms[1].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        self.argmax.clear();
        self.argmax.resize(y.len(), None);
        let scale = self.spatial_scale;
        for (n, roi) in rois.chunks(5).enumerate() {
            let item = roi[0].to_f64();
            if !(item >= 0.0 && (item as usize) < items) {
                return Err(bad_param(
                    "ROIPooling",
                    format!("region {n} names item {item}; the features hold {items}"),
                ));
            }
            let at = |i: usize| round_half_away(roi[i].to_f64() as f32 * scale);
            let (start_w, start_h, end_w, end_h) = (at(1), at(2), at(3), at(4));
            let roi_h = (end_h - start_h + 1).max(1) as f32;
            let roi_w = (end_w - start_w + 1).max(1) as f32;
            let (bin_h, bin_w) = (roi_h / ph_n as f32, roi_w / pw_n as f32);
            let base = item as usize * channels * plane;
            for c in 0..channels {
                let features = &x[base + c * plane..base + (c + 1) * plane];
                for ph in 0..ph_n {
                    let clamp = |v: i64, hi: i64| v.clamp(0, hi);
                    let h0 = clamp((ph as f32 * bin_h).floor() as i64 + start_h, height);
                    let h1 = clamp(((ph + 1) as f32 * bin_h).ceil() as i64 + start_h, height);
                    for pw in 0..pw_n {
                        let w0 = clamp((pw as f32 * bin_w).floor() as i64 + start_w, width);
                        let w1 = clamp(((pw + 1) as f32 * bin_w).ceil() as i64 + start_w, width);
                        let out = ((n * channels + c) * ph_n + ph) * pw_n + pw;
                        // Caffe's start, -FLT_MAX, and its strict `>`.
                        let mut best = T::from_f64(-f64::from(f32::MAX));
                        let mut from = None;
                        for h in h0..h1 {
                            for w in w0..w1 {
                                let i = (h * width + w) as usize;
                                if features[i] > best {
                                    best = features[i];
                                    from = Some(base + c * plane + i);
                                }
                            }
                        }
                        let empty = h1 <= h0 || w1 <= w0;
                        y[out] = if empty { T::ZERO } else { best };
                        self.argmax[out] = from;
                    }
                }
            }
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        dx.fill(T::ZERO);
        for (&from, &g) in self.argmax.iter().zip(dy.iter()) {
            if let Some(i) = from {
                dx[i] += g;
            }
        }
        Ok(())
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom == 0
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
