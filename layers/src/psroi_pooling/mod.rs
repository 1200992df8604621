//! `PSROIPooling` of R-FCN (daijifeng001/caffe-rfcn, py-R-FCN):
//! position-sensitive region pooling. Each region is cut into `group_size`
//! x `group_size` bins, and bin `(i, j)` of output channel `k` averages
//! input channel `(k * group_size + i) * group_size + j` over the bin.
//! The fork computes on the GPU only; this follows its kernel.

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

/// The fork's `PSROIPoolingParameter` (its three fields required).
pub(crate) static PSROI_POOLING_PARAMETER: MessageSchema = MessageSchema {
    name: "PSROIPoolingParameter",
    fields: &[
        FieldSchema::optional("spatial_scale", 1, FieldKind::Float),
        FieldSchema::optional("output_dim", 2, FieldKind::Int32),
        FieldSchema::optional("group_size", 3, FieldKind::Int32),
    ],
};

/// `psroi_pooling_param`, field 10002 as in R-FCN's `caffe.proto`.
pub(crate) const PSROI_POOLING_FIELD: FieldSchema = FieldSchema::optional(
    "psroi_pooling_param",
    10002,
    FieldKind::Message(&PSROI_POOLING_PARAMETER),
);

/// Bottoms: the score maps (N, output_dim * group_size^2, H, W) and the
/// regions (R, 5) `[item, x1, y1, x2, y2]`; top (R, output_dim,
/// group_size, group_size).
pub(crate) struct PsRoiPoolingLayer {
    spatial_scale: f32,
    output_dim: usize,
    group: usize,
}

/// One output bin: the input channel and the window it averages.
struct Bin {
    item: usize,
    channel: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
}

impl PsRoiPoolingLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p =
            crate::fork_layers::fork_param(layer, &PSROI_POOLING_FIELD, &PSROI_POOLING_PARAMETER);
        let missing: Vec<&str> = ["spatial_scale", "output_dim", "group_size"]
            .into_iter()
            .filter(|f| !p.has(f))
            .collect();
        if !missing.is_empty() {
            return Err(bad_param(
                "set up PSROIPooling",
                format!(
                    "psroi_pooling_param needs {} (the fork requires all three)",
                    missing.join(", ")
                ),
            ));
        }
        let (dim, group) = (p.int("output_dim"), p.int("group_size"));
        if dim < 1 || group < 1 {
            return Err(bad_param(
                "set up PSROIPooling",
                format!("output_dim ({dim}) and group_size ({group}) must be positive"),
            ));
        }
        Ok(Self {
            spatial_scale: p.float("spatial_scale") as f32,
            output_dim: dim as usize,
            group: group as usize,
        })
    }

    fn check<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<[usize; 4]> {
        let (x, r) = (bottoms[0].shape(), bottoms[1].shape());
        let channels = self.output_dim * self.group * self.group;
        match *x {
            [n, c, h, w]
                if c == channels && r.len() >= 2 && r[1..].iter().product::<usize>() == 5 =>
            {
                Ok([n, c, h, w])
            }
            _ => Err(bad_param(
                "PSROIPooling",
                format!(
                    "the bottoms are {} and {}; PSROIPooling needs score maps (N, {channels}, H, \
                     W) (output_dim {} x group_size {}^2) and regions (R, 5)",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string(),
                    self.output_dim,
                    self.group
                ),
            )),
        }
    }

    /// Every output's bin, in the top's order (region, channel, row, column).
    fn bins<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<Vec<Bin>> {
        let [items, _, height, width] = self.check(bottoms)?;
        let rois = bottoms[1].cpu_data()?;
        let g = self.group;
        let scale = self.spatial_scale;
        let mut bins = Vec::with_capacity(rois.len() / 5 * self.output_dim * g * g);
        for (n, roi) in rois.chunks(5).enumerate() {
            let item = roi[0].to_f64();
            if !(item >= 0.0 && (item as usize) < items) {
                return Err(bad_param(
                    "PSROIPooling",
                    format!("region {n} names item {item}; the score maps hold {items}"),
                ));
            }
            // The fork's float arithmetic: round, then scale.
            let at = |i: usize, plus: f32| (roi[i].to_f64() as f32).round() + plus;
            let (x1, y1) = (at(1, 0.0) * scale, at(2, 0.0) * scale);
            let (x2, y2) = (at(3, 1.0) * scale, at(4, 1.0) * scale);
            let (rw, rh) = ((x2 - x1).max(0.1), (y2 - y1).max(0.1));
            let (bin_h, bin_w) = (rh / g as f32, rw / g as f32);
            let clamp = |v: f32, hi: usize| (v as i64).clamp(0, hi as i64) as usize;
            for k in 0..self.output_dim {
                for i in 0..g {
                    let h0 = clamp((i as f32 * bin_h + y1).floor(), height);
                    let h1 = clamp(((i + 1) as f32 * bin_h + y1).ceil(), height);
                    for j in 0..g {
                        let w0 = clamp((j as f32 * bin_w + x1).floor(), width);
                        let w1 = clamp(((j + 1) as f32 * bin_w + x1).ceil(), width);
                        bins.push(Bin {
                            item: item as usize,
                            channel: (k * g + i) * g + j,
                            rows: h0..h1.max(h0),
                            cols: w0..w1.max(w0),
                        });
                    }
                }
            }
        }
        Ok(bins)
    }
}

impl<T: MathElement> DynLayer<T> for PsRoiPoolingLayer {
    fn type_name(&self) -> &str {
        "PSROIPooling"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        self.check(bottoms)?;
        let rois = bottoms[1].shape()[0];
        Ok(vec![TopShape::new(vec![
            rois,
            self.output_dim,
            self.group,
            self.group,
        ])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let [_, c, h, w] = self.check(bottoms)?;
        let bins = self.bins(bottoms)?;
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        for (out, bin) in y.iter_mut().zip(&bins) {
            let plane = &x[(bin.item * c + bin.channel) * h * w..][..h * w];
            let area = bin.rows.len() * bin.cols.len();
            let mut sum = T::ZERO;
            for r in bin.rows.clone() {
                for &v in &plane[r * w + bin.cols.start..r * w + bin.cols.end] {
                    sum += v;
                }
            }
            *out = if area == 0 {
                T::ZERO
            } else {
                sum / T::from_f64(area as f64)
            };
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
        let [_, c, h, w] = self.check(bottoms)?;
        let bins = self.bins(bottoms)?;
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        dx.fill(T::ZERO);
        for (&g, bin) in dy.iter().zip(&bins) {
            let area = bin.rows.len() * bin.cols.len();
            if area == 0 {
                continue;
            }
            let share = g / T::from_f64(area as f64);
            let base = (bin.item * c + bin.channel) * h * w;
            for r in bin.rows.clone() {
                for d in &mut dx[base + r * w + bin.cols.start..base + r * w + bin.cols.end] {
                    *d += share;
                }
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
