//! The YOLO fork's segmentation labels (eric612/MobileNet-YOLO): an
//! `AnnotatedData` layer with a third top turns each record's label
//! image (`Datum.seg_label`, a PNG of class values) into one plane a
//! class, what its `YoloSeg` loss and `SegmentationEvaluate` read.
//!
//! The label image is cropped by the record's crop (sampler or jitter),
//! each class's pixels made a mask of 255s, the mask resized to the
//! labels' size, mirrored with the image, and scaled by 1/255, so each
//! value is the share of the class under that label pixel. With
//! `single_class` (the fork's default) the label image itself is
//! resized and thresholded above 100 into one plane of 0s and 1s.
//!
//! The labels' size is the batch's image size over `seg_scales`
//! (default 8), or `seg_resize_height` x `seg_resize_width` where both
//! are set. The classes come from the `label_map_file`, in the fork's
//! own label map format (`item { name: "road" label: 7 label_id: 1 }`):
//! pixel value `v` belongs to the class `label_id` of the map's `v`-th
//! item (counting from 0, as the fork counts; `label_id` 0 is
//! background), and the planes are the classes 1 to the largest
//! `label_id`.
//!
//! The fork passes `cv::INTER_AREA` where `cv::resize` takes its `fx`,
//! so its masks are resized bilinearly, as here (OpenCV's bytes).
//! Departures: a record whose samplers found no patch keeps its whole
//! label image (the fork crops it by the previous record's patch), and
//! with `single_class` a label plane that is not square is resized to
//! its own height and width (the fork swaps them). The fork's crops of
//! an expanded image and its labels' size under a resize that keeps the
//! aspect do not match the image; those set-ups are refused.

use blob_proto::schema::{FieldKind, FieldSchema, MessageSchema};
use blob_proto::{ParamMessage, TextMessage};

use crate::annotated_data::{Rect, crop_image};
use crate::datum::{Example, Pixels};
use crate::resize::resize_linear;

/// `YoloSegItem`: one class of the fork's segmentation label map.
static YOLO_SEG_ITEM: MessageSchema = MessageSchema {
    name: "YoloSegItem",
    fields: &[
        FieldSchema::optional("name", 1, FieldKind::String),
        FieldSchema::optional("label_id", 2, FieldKind::Int32),
        FieldSchema::optional("label", 3, FieldKind::Int32),
        FieldSchema::optional("r", 4, FieldKind::Int32),
        FieldSchema::optional("g", 5, FieldKind::Int32),
        FieldSchema::optional("b", 6, FieldKind::Int32),
    ],
};

/// `YoloSegLabel`: the fork's segmentation label map
/// (`data/cityscapes/labelmap_seg.prototxt`).
static YOLO_SEG_LABEL: MessageSchema = MessageSchema {
    name: "YoloSegLabel",
    fields: &[FieldSchema::repeated(
        "item",
        1,
        FieldKind::Message(&YOLO_SEG_ITEM),
    )],
};

/// The most classes a label map may give planes to.
const MOST_CLASSES: usize = 1024;

/// The tallest and widest label planes `seg_resize_height` and
/// `seg_resize_width` may ask for (`resize_param`'s bound).
const MOST_SIDE: i64 = 16384;

/// Which label pixels make which plane.
#[derive(Clone, Debug, PartialEq)]
enum Classes {
    /// The label image is one class: resized, thresholded above 100.
    Single,
    /// `planes` classes; pixel value `v` is class `class_of[v]` (0 for
    /// background, 1 the first plane).
    Mapped { planes: usize, class_of: Vec<usize> },
}

/// How big the label planes are (the YOLO fork's `seg_scales`, or
/// `seg_resize_height` x `seg_resize_width`): its segmentation labels'
/// and its LaneData's drawn lanes'.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum PlaneSize {
    /// The image's height and width over this.
    Divided(usize),
    Fixed {
        height: usize,
        width: usize,
    },
}

impl PlaneSize {
    /// From `annotated_data_param`'s `seg_resize_height` /
    /// `seg_resize_width` where both are set, else `seg_scales`.
    pub(crate) fn from_param(p: &ParamMessage) -> Result<Self, String> {
        let (height, width) = (p.int("seg_resize_height"), p.int("seg_resize_width"));
        if height > MOST_SIDE || width > MOST_SIDE {
            return Err(format!(
                "annotated_data_param.seg_resize_height / seg_resize_width {height} x {width}: \
                 each at most {MOST_SIDE}"
            ));
        }
        if height > 0 && width > 0 {
            return Ok(PlaneSize::Fixed {
                height: height as usize,
                width: width as usize,
            });
        }
        let scales = p.int("seg_scales");
        if scales <= 0 {
            return Err(format!(
                "annotated_data_param.seg_scales {scales}: the image's size is divided by it, \
                 so it must be at least 1"
            ));
        }
        Ok(PlaneSize::Divided(scales as usize))
    }

    /// The height and width of `planes` label planes for images of
    /// `height x width`.
    pub(crate) fn of(
        self,
        planes: usize,
        height: usize,
        width: usize,
    ) -> Result<(usize, usize), String> {
        let (h, w) = match self {
            PlaneSize::Fixed { height, width } => (height, width),
            PlaneSize::Divided(s) => (height / s, width / s),
        };
        if h == 0 || w == 0 {
            return Err(format!(
                "label planes of {h} x {w} for a {height} x {width} image: seg_scales is \
                 larger than the image"
            ));
        }
        if planes.saturating_mul(h).saturating_mul(w) > crate::datum::MOST_VALUES {
            return Err(format!(
                "{planes} label planes of {h} x {w} are more than a record may hold"
            ));
        }
        Ok((h, w))
    }
}

/// An `AnnotatedData` layer's segmentation labels: see the
/// [module](self) documentation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SegmentationLabels {
    classes: Classes,
    size: PlaneSize,
}

impl SegmentationLabels {
    /// From `annotated_data_param` (`single_class`, `label_map_file`,
    /// `seg_scales`, `seg_resize_height`/`width`).
    pub(crate) fn from_param(p: &ParamMessage) -> Result<Self, String> {
        let classes = if p.boolean("single_class") {
            Classes::Single
        } else {
            let path = p.string("label_map_file");
            if path.is_empty() {
                return Err(
                    "annotated_data_param.single_class is false: the classes of the \
                            segmentation labels come from a label_map_file, and none is given"
                        .into(),
                );
            }
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("annotated_data_param.label_map_file {path}: {e}"))?;
            mapped_classes(&text).map_err(|e| format!("label_map_file {path}: {e}"))?
        };
        let size = PlaneSize::from_param(p)?;
        Ok(Self { classes, size })
    }

    /// How many planes (classes) an image's labels have.
    pub(crate) fn planes(&self) -> usize {
        match &self.classes {
            Classes::Single => 1,
            Classes::Mapped { planes, .. } => *planes,
        }
    }

    /// The planes' height and width for images of `height x width`.
    pub(crate) fn plane_size(&self, height: usize, width: usize) -> Result<(usize, usize), String> {
        self.size.of(self.planes(), height, width)
    }

    /// A record's label image cut as its image was cut (the fork's
    /// `cv_lab(bbox_roi)`, the patch clipped to the image first).
    pub(crate) fn crop(label: &Example, patch: &Rect) -> Result<Example, String> {
        let crop = crop_image(label, &patch.clip());
        if crop.height == 0 || crop.width == 0 {
            return Err(format!(
                "the crop {patch:?} leaves none of its {} x {} label image",
                label.height, label.width
            ));
        }
        Ok(crop)
    }

    /// The label planes of one record from its cropped label image
    /// (`crop`, one channel): each class resized to `height x width`,
    /// mirrored where the image was; `planes() * height * width` values
    /// from 0 to 1.
    pub(crate) fn make(
        &self,
        crop: &Example,
        mirrored: bool,
        (height, width): (usize, usize),
    ) -> Vec<f32> {
        let Pixels::Bytes(pixels) = &crop.pixels else {
            unreachable!("label images decode to bytes")
        };
        let resize = |mask: &[u8]| resize_linear(mask, 1, crop.height, crop.width, height, width);
        let mut out = Vec::with_capacity(self.planes() * height * width);
        match &self.classes {
            Classes::Single => out.extend(
                resize(pixels)
                    .into_iter()
                    .map(|v| if v > 100 { 1.0 } else { 0.0 }),
            ),
            Classes::Mapped { planes, class_of } => {
                for plane in 1..=*planes {
                    let mask: Vec<u8> = pixels
                        .iter()
                        .map(|&v| {
                            if class_of[usize::from(v)] == plane {
                                255
                            } else {
                                0
                            }
                        })
                        .collect();
                    // The fork's `pixel * (1 / 255.0)` in float.
                    out.extend(
                        resize(&mask)
                            .into_iter()
                            .map(|v| f32::from(v) * (1.0 / 255.0f32)),
                    );
                }
            }
        }
        if mirrored {
            for row in out.chunks_mut(width) {
                row.reverse();
            }
        }
        out
    }
}

/// The classes of a label map in the fork's `YoloSegLabel` format.
fn mapped_classes(text: &str) -> Result<Classes, String> {
    let tree = TextMessage::parse(text).map_err(|e| e.to_string())?;
    let map = ParamMessage::from_text(&YOLO_SEG_LABEL, &tree).map_err(|e| e.to_string())?;
    let mut class_of = vec![0usize; 256];
    let mut planes = 0;
    for (value, item) in map.messages("item").enumerate() {
        let id = item.int("label_id");
        if id < 0 || id as usize > MOST_CLASSES {
            return Err(format!(
                "item {value} ({:?}) has label_id {id}: from 0 (background) to {MOST_CLASSES}",
                item.string("name")
            ));
        }
        let id = id as usize;
        planes = planes.max(id);
        if value < class_of.len() {
            class_of[value] = id;
        }
    }
    if planes == 0 {
        return Err("no item has a label_id above 0, so there is no class to segment".into());
    }
    Ok(Classes::Mapped { planes, class_of })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gray(height: usize, width: usize, pixels: Vec<u8>) -> Example {
        Example {
            channels: 1,
            height,
            width,
            pixels: Pixels::Bytes(pixels),
            label: 0,
        }
    }

    const WHOLE: Rect = Rect {
        xmin: 0.0,
        ymin: 0.0,
        xmax: 1.0,
        ymax: 1.0,
    };

    #[test]
    fn each_class_is_a_plane_of_its_share() {
        // Values 0..3: items 1 and 3 are class 1, item 2 class 2.
        let classes = mapped_classes(
            "item { name: 'void' label_id: 0 } item { name: 'road' label_id: 1 } \
             item { name: 'car' label_id: 2 } item { name: 'lane' label_id: 1 }",
        )
        .unwrap();
        let labels = SegmentationLabels {
            classes,
            size: PlaneSize::Divided(2),
        };
        assert_eq!(labels.planes(), 2);
        assert_eq!(labels.plane_size(4, 4).unwrap(), (2, 2));
        // 4 x 4: each 2 x 2 block becomes one value (OpenCV's exact
        // halving averages the block).
        #[rustfmt::skip]
        let image = gray(4, 4, vec![
            1, 1, 2, 2,
            1, 3, 2, 0,
            0, 0, 2, 2,
            0, 0, 2, 2,
        ]);
        let planes = labels.make(&image, false, (2, 2));
        let share = |n: u32| ((255 * n + 2) / 4) as f32 * (1.0 / 255.0);
        assert_eq!(planes[..4], [share(4), share(0), share(0), share(0)]);
        assert_eq!(planes[4..], [share(0), share(3), share(0), share(4)]);
        let mirrored = labels.make(&image, true, (2, 2));
        assert_eq!(mirrored[4..], [share(3), share(0), share(4), share(0)]);
    }

    #[test]
    fn a_crop_takes_its_part_of_the_label_image() {
        let labels = SegmentationLabels {
            classes: Classes::Single,
            size: PlaneSize::Fixed {
                height: 1,
                width: 2,
            },
        };
        let image = gray(2, 4, vec![0, 255, 0, 0, 0, 255, 99, 101]);
        let right = Rect { xmin: 0.5, ..WHOLE };
        // The right half, 2 x 2 to 1 x 2: columns (0, 0) and (0, 101)
        // average to 0 and 51, under the threshold.
        let crop = SegmentationLabels::crop(&image, &right).unwrap();
        assert_eq!((crop.height, crop.width), (2, 2));
        assert_eq!(labels.make(&crop, false, (1, 2)), [0.0, 0.0]);
        let left = Rect { xmax: 0.5, ..WHOLE };
        let crop = SegmentationLabels::crop(&image, &left).unwrap();
        assert_eq!(labels.make(&crop, false, (1, 2)), [0.0, 1.0]);
        let outside = Rect { xmin: 1.0, ..WHOLE };
        let e = SegmentationLabels::crop(&image, &outside).unwrap_err();
        assert!(e.contains("leaves none of its 2 x 4 label image"), "{e}");
    }

    #[test]
    fn bad_label_maps_and_sizes_are_named() {
        let e = mapped_classes("item { name: 'void' label_id: 0 }").unwrap_err();
        assert!(e.contains("no item has a label_id above 0"), "{e}");
        let e = mapped_classes("item { name: 'x' label_id: -2 }").unwrap_err();
        assert!(e.contains("item 0 (\"x\") has label_id -2"), "{e}");
        let labels = SegmentationLabels {
            classes: Classes::Single,
            size: PlaneSize::Divided(8),
        };
        let e = labels.plane_size(4, 64).unwrap_err();
        assert!(e.contains("0 x 8 for a 4 x 64 image"), "{e}");
    }
}
