//! Caffe's `DataTransformer`: `transform_param`'s crop, mirror, mean and
//! scale applied to a record on its way into a batch.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, BlobError, MathElement};

use crate::datum::{ColorMode, Example, Pixels};

/// What is subtracted before scaling.
#[derive(Clone, Debug, PartialEq)]
enum Mean<T> {
    None,
    /// `mean_file`: one value per element of the uncropped image,
    /// `[channels, height, width]`.
    Image {
        dims: [usize; 3],
        values: Vec<T>,
    },
    /// `mean_value`: one for every channel, or one per channel.
    Values(Vec<T>),
}

/// Caffe's `DataTransformer` for one layer (`transform_param`): a
/// `crop_size` square at random in TRAIN and at the centre in TEST; a
/// mirror at probability 1/2 where `mirror` is set, in either phase, as
/// Caffe draws it; then `(x - mean) * scale`, with the mean from
/// `mean_file` (a `.binaryproto`) or `mean_value`.
///
/// ```
/// use blob_data::{DataTransformer, Example, Pixels};
/// let t = DataTransformer::<f32>::from_text("scale: 0.5 mean_value: 10", false)?;
/// let e = Example { channels: 1, height: 1, width: 2, pixels: Pixels::Bytes(vec![20, 30]), label: 0 };
/// let mut out = [0.0f32; 2];
/// t.transform(&e, &mut out, &mut |_| 0)?;
/// assert_eq!(out, [5.0, 10.0]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Clone, Debug)]
pub struct DataTransformer<T: MathElement> {
    scale: T,
    mirror: bool,
    crop_size: usize,
    mean: Mean<T>,
    color: ColorMode,
    train: bool,
}

/// The SSD fork's fields of `transform_param`, which only its
/// AnnotatedData (and the YOLO fork's LaneData) applies here.
const SSD_GEOMETRY: [&str; 7] = [
    "resize_param",
    "noise_param",
    "distort_param",
    "expand_param",
    "emit_constraint",
    "crop_h",
    "crop_w",
];

/// Refuses the SSD fork's fields in a transformer that would not apply
/// them.
fn refuse_ssd_geometry(p: &ParamMessage, kind: &str) -> Result<(), BlobError> {
    match SSD_GEOMETRY.iter().find(|f| p.has(f)) {
        Some(field) => Err(refused(format!(
            "transform_param.{field} is the SSD fork's, applied by its AnnotatedData \
             layer; {kind} would ignore it"
        ))),
        None => Ok(()),
    }
}

/// Where [`DataTransformer::transform_placed`] took its output from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// Whether the output is mirrored left to right.
    pub mirrored: bool,
    /// The crop's first row and column in the input.
    pub h_off: usize,
    pub w_off: usize,
    /// The output's height and width.
    pub height: usize,
    pub width: usize,
}

fn refused(detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "set up transform_param",
        detail: detail.into(),
    }
}

impl<T: MathElement> DataTransformer<T> {
    /// The transformer of a data layer: its `transform_param`; TRAIN when
    /// the layer's phase is TRAIN. A `mean_file` is read here. The old
    /// places of these settings (`data_param.scale`, ...) are moved by the
    /// net's upgrade of a V1 file, as Caffe moves them; in a layer of
    /// today's format, where Caffe ignores them, they are refused.
    pub fn from_layer(layer: &ParamMessage) -> Result<Self, BlobError> {
        let p = layer
            .message("transform_param")
            .cloned()
            .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::TRANSFORMATION));
        for param in ["data_param", "image_data_param", "window_data_param"] {
            let Some(old) = layer.message(param) else {
                continue;
            };
            if let Some(name) = ["scale", "mean_file", "crop_size", "mirror"]
                .into_iter()
                .find(|f| old.has(f))
            {
                return Err(refused(format!(
                    "{param}.{name} is where Caffe's V1 files kept transform_param.{name}; \
                     Caffe's layers of today ignore it there: move it into transform_param"
                )));
            }
        }
        let kind = layer.string("type");
        if kind != "AnnotatedData" && kind != "LaneData" {
            refuse_ssd_geometry(&p, kind)?;
        }
        Self::from_param(&p, layer.enum_name("phase") == "TRAIN")
    }

    /// A transformer from a `transform_param` in Caffe's text format (what
    /// sits between its braces), for the TRAIN phase or not.
    pub fn from_text(text: &str, train: bool) -> Result<Self, BlobError> {
        let tree = blob_proto::TextMessage::parse(text).map_err(|source| BlobError::Proto {
            path: "<transform_param>".into(),
            source,
        })?;
        let p = ParamMessage::from_text(&blob_proto::schema::TRANSFORMATION, &tree).map_err(
            |source| BlobError::Proto {
                path: "<transform_param>".into(),
                source,
            },
        )?;
        refuse_ssd_geometry(&p, "this transformer")?;
        Self::from_param(&p, train)
    }

    fn from_param(p: &ParamMessage, train: bool) -> Result<Self, BlobError> {
        let scale = p.float("scale");
        if !scale.is_finite() {
            return Err(refused(format!("scale {scale} is not a finite number")));
        }
        let means = p.floats("mean_value");
        let mean = match (p.has("mean_file"), means.is_empty()) {
            (true, false) => {
                return Err(refused(
                    "Cannot specify mean_file and mean_value at the same time",
                ));
            }
            (true, true) => {
                let path = p.string("mean_file");
                let blob = blob_runtime::read_blob_file::<T>(path)?;
                Self::mean_image(path, &blob)?
            }
            (false, false) => Mean::Values(means.into_iter().map(T::from_f64).collect()),
            (false, true) => Mean::None,
        };
        let color = match (p.boolean("force_color"), p.boolean("force_gray")) {
            (true, true) => return Err(refused("cannot set both force_color and force_gray")),
            (true, false) => ColorMode::Color,
            (false, true) => ColorMode::Gray,
            (false, false) => ColorMode::AsStored,
        };
        Ok(Self {
            scale: T::from_f64(scale),
            mirror: p.boolean("mirror"),
            crop_size: p.uint("crop_size") as usize,
            mean,
            color,
            train,
        })
    }

    /// A mean file's blob as `[channels, height, width]` (Caffe reads its
    /// num x channels x height x width and uses the first image).
    fn mean_image(path: &str, blob: &Blob<T>) -> Result<Mean<T>, BlobError> {
        let shape = blob.shape();
        let dims = match shape {
            [1, c, h, w] | [c, h, w] => [*c, *h, *w],
            _ => {
                return Err(refused(format!(
                    "mean_file {path} holds a blob of shape {shape:?}, not 1 x channels x height x width"
                )));
            }
        };
        Ok(Mean::Image {
            dims,
            values: blob.to_vec()?,
        })
    }

    /// Whether a transform draws at random: a mirror or a crop
    /// (`mirror`, `crop_size`).
    pub(crate) fn draws(&self) -> bool {
        self.mirror || self.crop_size > 0
    }

    /// How encoded records are decoded (`force_color`, `force_gray`).
    pub fn color_mode(&self) -> ColorMode {
        self.color
    }

    /// The `[channels, height, width]` a record of `example`'s shape
    /// becomes (Caffe's `InferBlobShape`), or why it cannot be
    /// transformed: a crop larger than the image, a mean of another shape.
    pub fn output_shape(&self, example: &Example) -> Result<[usize; 3], String> {
        let (c, h, w) = (example.channels, example.height, example.width);
        if self.crop_size > h || self.crop_size > w {
            return Err(format!(
                "crop_size {} is larger than the {h} x {w} image",
                self.crop_size
            ));
        }
        match &self.mean {
            Mean::Image { dims, .. } if *dims != [c, h, w] => {
                return Err(format!(
                    "the mean_file's image is {} x {} x {} but the record is {c} x {h} x {w}",
                    dims[0], dims[1], dims[2]
                ));
            }
            Mean::Values(v) if v.len() != 1 && v.len() != c => {
                return Err(format!(
                    "Specify either 1 mean_value or as many as channels: {} mean values for {c} channels",
                    v.len()
                ));
            }
            _ => {}
        }
        Ok(match self.crop_size {
            0 => [c, h, w],
            s => [c, s, s],
        })
    }

    /// Writes `example` transformed into `out` (which holds
    /// [`output_shape`](Self::output_shape)'s count), drawing Caffe's
    /// `Rand(n)` from `rand` in Caffe's order: the mirror first (where
    /// `mirror` is set), then the crop's row and column offsets (in TRAIN).
    pub fn transform(
        &self,
        example: &Example,
        out: &mut [T],
        rand: &mut dyn FnMut(u32) -> u32,
    ) -> Result<(), BlobError> {
        self.transform_placed(example, out, rand).map(|_| ())
    }

    /// [`transform`](Self::transform), saying where the output came from
    /// (for the boxes of an annotated record).
    pub(crate) fn transform_placed(
        &self,
        example: &Example,
        out: &mut [T],
        rand: &mut dyn FnMut(u32) -> u32,
    ) -> Result<Placement, BlobError> {
        let [c, out_h, out_w] = self.output_shape(example).map_err(refused)?;
        let (h, w) = (example.height, example.width);
        if out.len() != c * out_h * out_w {
            return Err(refused(format!(
                "a batch slot of {} values for a {c} x {out_h} x {out_w} image",
                out.len()
            )));
        }
        let mirror = self.mirror && rand(2) != 0;
        let (h_off, w_off) = match (self.crop_size, self.train) {
            (0, _) => (0, 0),
            (s, true) => (
                rand((h - s + 1) as u32) as usize,
                rand((w - s + 1) as u32) as usize,
            ),
            (s, false) => ((h - s) / 2, (w - s) / 2),
        };
        let value = |i: usize| match &example.pixels {
            Pixels::Bytes(b) => T::from_f64(f64::from(b[i])),
            Pixels::Floats(f) => T::from_f64(f64::from(f[i])),
        };
        for ch in 0..c {
            for y in 0..out_h {
                let row_out = (ch * out_h + y) * out_w;
                let row_in = (ch * h + h_off + y) * w + w_off;
                for x in 0..out_w {
                    let i = row_in + x;
                    let centred = match &self.mean {
                        Mean::None => value(i),
                        Mean::Image { values, .. } => value(i) - values[i],
                        Mean::Values(v) => value(i) - v[if v.len() == 1 { 0 } else { ch }],
                    };
                    let at = if mirror { out_w - 1 - x } else { x };
                    out[row_out + at] = centred * self.scale;
                }
            }
        }
        Ok(Placement {
            mirrored: mirror,
            h_off,
            w_off,
            height: out_h,
            width: out_w,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(c: usize, h: usize, w: usize) -> Example {
        Example {
            channels: c,
            height: h,
            width: w,
            pixels: Pixels::Bytes((0..c * h * w).map(|v| v as u8).collect()),
            label: 0,
        }
    }

    #[test]
    fn train_crops_and_mirrors_where_rand_says_test_takes_the_centre() {
        let e = image(1, 4, 4);
        let train = DataTransformer::<f32>::from_text("crop_size: 2 mirror: true", true).unwrap();
        let mut draws = vec![1u32, 2, 1].into_iter();
        let mut asked = Vec::new();
        let mut out = [0.0; 4];
        train
            .transform(&e, &mut out, &mut |n| {
                asked.push(n);
                draws.next().unwrap()
            })
            .unwrap();
        // Mirror drawn first (2), then the row (3) and column (3) offsets.
        assert_eq!(asked, [2, 3, 3]);
        // Rows 2..4, columns 1..3, each row reversed.
        assert_eq!(out, [10.0, 9.0, 14.0, 13.0]);
        let test = DataTransformer::<f32>::from_text("crop_size: 2 mirror: true", false).unwrap();
        test.transform(&e, &mut out, &mut |_| 0).unwrap();
        assert_eq!(out, [5.0, 6.0, 9.0, 10.0]);
    }

    #[test]
    fn mean_values_go_per_channel_and_bad_settings_are_refused() {
        let t = DataTransformer::<f64>::from_text("mean_value: 1 mean_value: 2 scale: 2", false)
            .unwrap();
        let mut out = [0.0; 4];
        t.transform(&image(2, 1, 2), &mut out, &mut |_| 0).unwrap();
        assert_eq!(out, [-2.0, 0.0, 0.0, 2.0]);
        assert_eq!(
            t.output_shape(&image(3, 1, 1)).unwrap_err(),
            "Specify either 1 mean_value or as many as channels: 2 mean values for 3 channels"
        );
        let crop = DataTransformer::<f32>::from_text("crop_size: 5", true).unwrap();
        assert_eq!(
            crop.output_shape(&image(1, 4, 6)).unwrap_err(),
            "crop_size 5 is larger than the 4 x 6 image"
        );
        let both = DataTransformer::<f32>::from_text("force_color: true force_gray: true", true);
        assert!(
            both.unwrap_err()
                .to_string()
                .contains("both force_color and force_gray")
        );
        let missing =
            DataTransformer::<f32>::from_text("mean_file: \"/no/such.binaryproto\"", true);
        assert!(
            missing
                .unwrap_err()
                .to_string()
                .contains("/no/such.binaryproto")
        );
    }
}
