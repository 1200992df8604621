//! The true boxes the YOLO fork's losses read: AnnotatedData's
//! `yolo_data_type: 1` labels, `(N, 1, 300, 5)`, each image's rows of
//! class (from 0), centre x, y, width and height relative to the image.

use blob_runtime::{Blob, MathElement};

use super::overlap::CenterBox;
use crate::dyn_layer::bad_param;
use crate::layer::Result;

/// The boxes a YOLO label blob holds per image (the fork's 300):
/// `AnnotatedData` with `yolo_data_type: 1` writes `(N, 1,
/// YOLO_LABEL_ROWS, 5)`, which the `Yolov3` and `RegionLoss` losses read.
///
/// ```
/// assert_eq!(blob_layers::YOLO_LABEL_ROWS, 300);
/// ```
pub const YOLO_LABEL_ROWS: usize = 300;

/// Refuses a label bottom that is not `images x 1 x 300 x 5`, in the
/// words of layer `op`.
pub(crate) fn check_labels<T: MathElement>(
    op: &'static str,
    labels: &Blob<T>,
    images: usize,
) -> Result<()> {
    let shape = labels.shape();
    if shape.first() != Some(&images) || labels.count_from(1)? != YOLO_LABEL_ROWS * 5 {
        return Err(bad_param(
            op,
            format!(
                "bottom 1 must be the labels of AnnotatedData with yolo_data_type: 1, \
                 {images} x 1 x {YOLO_LABEL_ROWS} x 5, not {shape:?}"
            ),
        ));
    }
    Ok(())
}

/// Image `image`'s label rows.
pub(crate) fn rows(labels: &[f32], image: usize) -> impl Iterator<Item = &[f32]> {
    labels[image * YOLO_LABEL_ROWS * 5..][..YOLO_LABEL_ROWS * 5].chunks_exact(5)
}

/// A row's box.
pub(crate) fn truth_of(row: &[f32]) -> CenterBox {
    CenterBox {
        x: row[1],
        y: row[2],
        w: row[3],
        h: row[4],
    }
}

/// Row `row` of image `image`'s class, a whole number below `classes`
/// (the forks truncate it and write outside their buffers beyond).
pub(crate) fn class_of(
    op: &'static str,
    r: &[f32],
    (image, row): (usize, usize),
    classes: usize,
) -> Result<usize> {
    let c = r[0];
    if c.is_nan() || c < 0.0 || c.fract() != 0.0 || c >= classes as f32 {
        return Err(bad_param(
            op,
            format!(
                "image {image}'s label row {row} has class {c}, but classes count from 0 \
                 below num_class {classes} (AnnotatedData's label less 1: label 0, the \
                 background, cannot be a box)"
            ),
        ));
    }
    Ok(c as usize)
}

/// The cell of a map `width x height` a box's centre falls in, clipped
/// into the map (the forks read outside it for a centre on the right or
/// bottom edge).
pub(crate) fn cell_of(truth: &CenterBox, (width, height): (usize, usize)) -> (usize, usize) {
    let i = ((truth.x * width as f32) as i64).clamp(0, width as i64 - 1) as usize;
    let j = ((truth.y * height as f32) as i64).clamp(0, height as i64 - 1) as usize;
    (i, j)
}
