//! The YOLO fork's `LaneData` layer (eric612/MobileNet-YOLO,
//! `models/tusimple`): records of TuSimple lanes (`convert-annoset
//! --anno-type lane_detection`), each lane a list of points, their
//! images distorted, jittered, resized and mirrored as AnnotatedData's,
//! the lanes made into two tops after the image's:
//!
//! - the label top, `(batch, 5, 64, 3)`: for each lane (in record
//!   order) its points from the last to the first (TuSimple's lowest
//!   first), each `[x, y, lane]` in the crop's coordinates, the lane's
//!   number `-1` where the point is outside the crop;
//! - the drawn lanes, `(batch, 1, H, W)` (the image's size over
//!   `seg_scales`, or `seg_resize_height` x `seg_resize_width`): each
//!   pair of consecutive points inside the crop joined by OpenCV's
//!   one-pixel 8-connected `cv::line`, 1 on a line and 0 elsewhere,
//!   mirrored with the image (what the fork's `YoloSeg` loss reads).
//!
//! Departures from the fork: a record with no crop (no jitter, no
//! sampler) keeps its coordinates, where the fork divides by an empty
//! crop and draws nothing; the label top's `x` is mirrored with the
//! image (the fork's is not); the places no lane point fills hold
//! `[0, 0, -1]` (the fork leaves the previous batch's values there). The
//! fork moves neither labels nor lines with an expansion or a resize
//! that keeps the aspect, so those set-ups are refused.

use std::sync::Arc;

use blob_layers::Arity;
use blob_proto::{AnnotatedDatum, ParamMessage};
use blob_runtime::{BlobError, MathElement};
use prost::Message;

use crate::annoset::{MOST_LANE_POINTS, MOST_LANES};
use crate::annotated_data::{Geometry, Rect};
use crate::data_layer::StoreSource;
use crate::datum::{ColorMode, datum_example};
use crate::prefetch::{Decoded, Decoder, PrefetchingDataLayer, Raw, Setup};
use crate::segmentation_labels::PlaneSize;
use crate::transform::DataTransformer;

/// The YOLO fork's `LaneData` (`type: "LaneData"`): batches of TuSimple
/// lane records from an LMDB or LevelDB store, each image distorted
/// (`distort_param`), cropped by the fork's jitter
/// (`annotated_data_param { yolo_data_type: 1 yolo_data_jitter }`) or a
/// batch sampler, warped by `resize_param` and mirrored. The second top
/// `(batch, 5, 64, 3)` holds each lane's points (in record order, each
/// lane's from its last) as `[x, y, lane]` in the crop's coordinates,
/// `lane` -1 for a point outside the crop and `[0, 0, -1]` where no point
/// is; the third, `(batch, 1, H, W)` at the image's size over
/// `seg_scales` (or `seg_resize_height` x `seg_resize_width`), the
/// consecutive points inside the crop joined by OpenCV's one-pixel
/// 8-connected `cv::line`, 1 on a line, mirrored with the image (what
/// the fork's `YoloSeg` learns from). Departures from the fork: a record
/// with no crop keeps its coordinates (the fork divides by an empty
/// crop), the label top's `x` is mirrored with the image, and empty
/// places are not the previous batch's. Refused: `expand_param`, a
/// resize that keeps the aspect, `crop_size` (the fork would misplace
/// the lanes).
///
/// ```
/// use blob_data::{Backend, StoreWriter, data_registry};
/// use blob_layers::net::Net;
/// use blob_proto::{AnnotatedDatum, Annotation, AnnotationGroup, Datum, LaneInfo};
/// use prost::Message;
/// let dir = std::env::temp_dir().join(format!("blobflow-lane-doc-{}", std::process::id()));
/// let _ = std::fs::remove_dir_all(&dir);
/// let mut store = StoreWriter::create(&dir, Backend::Lmdb)?;
/// let datum = Datum { channels: Some(1), height: Some(8), width: Some(8),
///     data: Some(vec![0; 64]), ..Default::default() };
/// // One vertical lane down the middle, from the top to the bottom.
/// let point = |y: f32| Annotation { instance_id: Some(0), bbox: None,
///     lanes: Some(LaneInfo { x: Some(0.5), y: Some(y), id: None }) };
/// let record = AnnotatedDatum { datum: Some(datum), r#type: Some(2),
///     annotation_group: vec![AnnotationGroup { group_label: None,
///         annotation: vec![point(0.0), point(0.5), point(0.875)] }] };
/// store.put(b"0", &record.encode_to_vec())?;
/// store.finish()?;
/// let text = format!(r#"layer {{ name: "data" type: "LaneData" top: "data" top: "label" top: "lanes"
///     annotated_data_param {{ seg_scales: 1 }}
///     data_param {{ source: "{}" batch_size: 1 backend: LMDB }} }}"#, dir.display());
/// let mut net = Net::<f32>::builder().registry(&data_registry()).from_prototxt(&text)?;
/// net.forward()?;
/// let label = net.blob("label").unwrap();
/// assert_eq!(label.shape(), [1, 5, 64, 3]);
/// // The lane's last point first.
/// assert_eq!(&label.to_vec()?[..3], [0.5, 0.875, 0.0]);
/// let lanes = net.blob("lanes").unwrap().to_vec()?;
/// // Column 4, rows 0 to 7.
/// assert!((0..8).all(|row| lanes[row * 8 + 4] == 1.0));
/// assert_eq!(lanes.iter().sum::<f32>(), 8.0);
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn lane_data_layer<T: MathElement>(
    layer: &ParamMessage,
) -> Result<PrefetchingDataLayer<T>, BlobError> {
    let geometry = Geometry::from_param(layer, true)?;
    let transformer = DataTransformer::<T>::from_layer(layer)?;
    let color = transformer.color_mode();
    let decode: Decoder = Arc::new(move |raw: Raw| decode_lanes(&raw.bytes, color));
    let store = StoreSource::open(layer, decode, refused)?;
    PrefetchingDataLayer::start(
        Setup {
            type_name: "LaneData",
            transformer,
            batch_size: store.batch_size,
            prefetch: store.prefetch,
            tops: Arity::range(1, 3),
            geometry: Some(Arc::new(geometry)),
        },
        store.records,
    )
}

fn refused(detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "set up LaneData",
        detail: detail.into(),
    }
}

/// One lane: its points, `[x, y]` relative to the image (0 to 1 inside
/// it), in the record's order.
pub(crate) type Lane = Vec<[f32; 2]>;

/// Values of one record's label top: 5 lanes of 64 points of `[x, y,
/// lane]`.
pub(crate) const LANE_LABEL_VALUES: usize = MOST_LANES * MOST_LANE_POINTS * 3;

/// A LaneData layer's labels: the size of its drawn lanes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LaneLabels {
    size: PlaneSize,
}

impl LaneLabels {
    /// From `annotated_data_param` (`seg_scales`, `seg_resize_height` /
    /// `seg_resize_width`).
    pub(crate) fn from_param(p: &ParamMessage) -> Result<Self, String> {
        Ok(Self {
            size: PlaneSize::from_param(p)?,
        })
    }

    /// The drawn lanes' height and width for images of `height x width`.
    pub(crate) fn plane_size(&self, height: usize, width: usize) -> Result<(usize, usize), String> {
        self.size.of(1, height, width)
    }

    /// One record's label top values ([`LANE_LABEL_VALUES`]) and its
    /// drawn lanes (`height x width`), from its lanes in the crop's
    /// coordinates, mirrored where the image was.
    pub(crate) fn make(
        &self,
        lanes: &[Lane],
        mirrored: bool,
        (height, width): (usize, usize),
    ) -> (Vec<f32>, Vec<f32>) {
        let mut rows = vec![0.0f32; LANE_LABEL_VALUES];
        for point in rows.chunks_exact_mut(3) {
            point[2] = -1.0;
        }
        let mut plane = vec![0u8; height * width];
        for (i, lane) in lanes.iter().take(MOST_LANES).enumerate() {
            let mut previous: Option<[f32; 2]> = None;
            for (j, &[x, y]) in lane.iter().rev().take(MOST_LANE_POINTS).enumerate() {
                let inside = (0.0..=1.0).contains(&x) && (0.0..=1.0).contains(&y);
                let at = (i * MOST_LANE_POINTS + j) * 3;
                rows[at] = if mirrored { 1.0 - x } else { x };
                rows[at + 1] = y;
                rows[at + 2] = if inside { i as f32 } else { -1.0 };
                if !inside {
                    continue;
                }
                if let Some([px, py]) = previous {
                    // The fork's `int ix = x * cv_lab.cols`: a float
                    // product, truncated.
                    let pixel = |v: f32, side: usize| (v * side as f32) as i64;
                    draw_line(
                        &mut plane,
                        (height, width),
                        (pixel(x, width), pixel(y, height)),
                        (pixel(px, width), pixel(py, height)),
                    );
                }
                previous = Some([x, y]);
            }
        }
        if mirrored {
            for row in plane.chunks_mut(width.max(1)) {
                row.reverse();
            }
        }
        // The fork's `pixel * (1 / 255.0)` of its 255s.
        let plane = plane
            .into_iter()
            .map(|v| f32::from(v) * (1.0 / 255.0f32))
            .collect();
        (rows, plane)
    }
}

/// A record's lanes in the coordinates of its crop `patch` (the fork's
/// `(x - xmin) / crop_w`, in float).
pub(crate) fn project(lanes: Vec<Lane>, patch: &Rect) -> Vec<Lane> {
    let (w, h) = (patch.xmax - patch.xmin, patch.ymax - patch.ymin);
    lanes
        .into_iter()
        .map(|lane| {
            lane.into_iter()
                .map(|[x, y]| [(x - patch.xmin) / w, (y - patch.ymin) / h])
                .collect()
        })
        .collect()
}

/// Decodes a serialized `AnnotatedDatum` of lanes (type `LANE`) into
/// its image and its lanes, one an annotation group, a point an
/// annotation's `lanes`.
pub(crate) fn decode_lanes(bytes: &[u8], mode: ColorMode) -> Result<Decoded, String> {
    let record =
        AnnotatedDatum::decode(bytes).map_err(|e| format!("not an AnnotatedDatum record: {e}"))?;
    let datum = record
        .datum
        .ok_or("an AnnotatedDatum record without its datum")?;
    if record.annotation_group.len() > MOST_LANES {
        return Err(format!(
            "{} lanes, more than the {MOST_LANES} LaneData's label top holds",
            record.annotation_group.len()
        ));
    }
    let mut lanes = Vec::with_capacity(record.annotation_group.len());
    for (l, group) in record.annotation_group.iter().enumerate() {
        if group.annotation.len() > MOST_LANE_POINTS {
            return Err(format!(
                "lane {l} has {} points, more than the {MOST_LANE_POINTS} LaneData's label \
                 top holds",
                group.annotation.len()
            ));
        }
        let mut lane = Vec::with_capacity(group.annotation.len());
        for a in &group.annotation {
            let point = a.lanes.as_ref().ok_or_else(|| {
                format!(
                    "lane {l} has an annotation without a lane point: LaneData reads lanes \
                     (convert-annoset --anno-type lane_detection writes them), not boxes"
                )
            })?;
            let (x, y) = (point.x.unwrap_or(0.0), point.y.unwrap_or(0.0));
            if !(x.is_finite() && y.is_finite()) {
                return Err(format!(
                    "lane {l} has a point ({x}, {y}) that is not finite"
                ));
            }
            lane.push([x, y]);
        }
        lanes.push(lane);
    }
    Ok(Decoded {
        lanes: Some(lanes),
        ..Decoded::from(datum_example(datum, mode)?)
    })
}

/// OpenCV's `cv::line(img, p0, p1, 255, 1, LINE_8)` on a one-channel
/// `rows x cols` plane: the segment clipped to the plane as `clipLine`
/// clips it, then walked left to right by `LineIterator`'s 8-connected
/// steps, so the pixels are OpenCV's.
fn draw_line(plane: &mut [u8], (rows, cols): (usize, usize), p0: (i64, i64), p1: (i64, i64)) {
    let Some(((mut x0, mut y0), (mut x1, mut y1))) = clip_line((rows, cols), p0, p1) else {
        return;
    };
    if x1 < x0 {
        (x0, y0, x1, y1) = (x1, y1, x0, y0);
    }
    let (mut dx, mut dy) = (x1 - x0, y1 - y0);
    let (mut step_x, mut step_y) = (1i64, 1i64);
    if dy < 0 {
        dy = -dy;
        step_y = -1;
    }
    let vertical = dy > dx;
    if vertical {
        (dx, dy) = (dy, dx);
        (step_x, step_y) = (step_y, step_x);
    }
    // Each step moves along the major axis; where the error goes
    // negative, along the minor one too.
    let (major, minor) = if vertical {
        ((0, step_x), (step_y, 0))
    } else {
        ((step_x, 0), (0, step_y))
    };
    let mut err = dx - 2 * dy;
    let (mut x, mut y) = (x0, y0);
    for _ in 0..=dx {
        plane[y as usize * cols + x as usize] = 255;
        let diagonal = err < 0;
        err += -2 * dy + if diagonal { 2 * dx } else { 0 };
        x += major.0 + if diagonal { minor.0 } else { 0 };
        y += major.1 + if diagonal { minor.1 } else { 0 };
    }
}

/// OpenCV's `clipLine` (Cohen-Sutherland in 64-bit integers, each cut
/// computed in double and truncated): the part of the segment inside a
/// `rows x cols` plane, `None` where none is.
fn clip_line(
    (rows, cols): (usize, usize),
    (mut x1, mut y1): (i64, i64),
    (mut x2, mut y2): (i64, i64),
) -> Option<((i64, i64), (i64, i64))> {
    if rows == 0 || cols == 0 {
        return None;
    }
    let (right, bottom) = (cols as i64 - 1, rows as i64 - 1);
    let code = |x: i64, y: i64| {
        i32::from(x < 0)
            + i32::from(x > right) * 2
            + i32::from(y < 0) * 4
            + i32::from(y > bottom) * 8
    };
    let (mut c1, mut c2) = (code(x1, y1), code(x2, y2));
    let along = |a: i64, from: i64, d_num: i64, d_den: i64| {
        ((a - from) as f64 * d_num as f64 / d_den as f64) as i64
    };
    if c1 & c2 == 0 && c1 | c2 != 0 {
        if c1 & 12 != 0 {
            let a = if c1 < 8 { 0 } else { bottom };
            x1 += along(a, y1, x2 - x1, y2 - y1);
            y1 = a;
            c1 = i32::from(x1 < 0) + i32::from(x1 > right) * 2;
        }
        if c2 & 12 != 0 {
            let a = if c2 < 8 { 0 } else { bottom };
            x2 += along(a, y2, x2 - x1, y2 - y1);
            y2 = a;
            c2 = i32::from(x2 < 0) + i32::from(x2 > right) * 2;
        }
        if c1 & c2 == 0 && c1 | c2 != 0 {
            if c1 != 0 {
                let a = if c1 == 1 { 0 } else { right };
                y1 += along(a, x1, y2 - y1, x2 - x1);
                x1 = a;
                c1 = 0;
            }
            if c2 != 0 {
                let a = if c2 == 1 { 0 } else { right };
                y2 += along(a, x2, y2 - y1, x2 - x1);
                x2 = a;
                c2 = 0;
            }
        }
    }
    (c1 | c2 == 0).then_some(((x1, y1), (x2, y2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pixels `draw_line` sets, as `(x, y)`.
    fn drawn(rows: usize, cols: usize, p0: (i64, i64), p1: (i64, i64)) -> Vec<(usize, usize)> {
        let mut plane = vec![0u8; rows * cols];
        draw_line(&mut plane, (rows, cols), p0, p1);
        (0..rows * cols)
            .filter(|&i| plane[i] == 255)
            .map(|i| (i % cols, i / cols))
            .collect()
    }

    #[test]
    fn lines_are_8_connected_and_clipped() {
        // A shallow line: one pixel a column.
        assert_eq!(
            drawn(4, 8, (0, 0), (6, 2)),
            [(0, 0), (1, 0), (2, 1), (3, 1), (4, 1), (5, 2), (6, 2)]
        );
        // Drawn the other way, the same pixels.
        assert_eq!(drawn(4, 8, (6, 2), (0, 0)), drawn(4, 8, (0, 0), (6, 2)));
        // A steep one: one pixel a row.
        assert_eq!(drawn(4, 4, (1, 0), (2, 3)).len(), 4);
        // An end one past the edge (the fork's x of 1.0) is clipped.
        assert_eq!(
            drawn(4, 4, (4, 0), (0, 0)),
            [(0, 0), (1, 0), (2, 0), (3, 0)]
        );
        assert!(drawn(4, 4, (5, 5), (9, 9)).is_empty());
    }

    /// 400 segments drawn by OpenCV 4.14's `cv::line` (LINE_8, one pixel)
    /// on planes of 1 to 39 a side, their ends up to 6 pixels outside
    /// (`tests/fixtures/make_opencv_fixtures.py`).
    #[test]
    fn lines_are_opencv_s() {
        let cases = include_str!("../tests/fixtures/lines.txt");
        let mut count = 0;
        for case in cases.lines() {
            let (ends, lit) = case
                .split_once(" : ")
                .unwrap_or((case.trim_end_matches(" :"), ""));
            let v: Vec<i64> = ends.split(' ').map(|t| t.parse().unwrap()).collect();
            let (rows, cols) = (v[0] as usize, v[1] as usize);
            let want: Vec<usize> = lit.split_whitespace().map(|t| t.parse().unwrap()).collect();
            let got: Vec<usize> = drawn(rows, cols, (v[2], v[3]), (v[4], v[5]))
                .into_iter()
                .map(|(x, y)| y * cols + x)
                .collect();
            assert_eq!(got, want, "{case}");
            count += 1;
        }
        assert_eq!(count, 400);
    }

    #[test]
    fn labels_list_points_from_the_last_and_mark_those_outside() {
        let labels = LaneLabels {
            size: PlaneSize::Divided(1),
        };
        let lane = vec![[0.5, 0.0], [-0.25, 0.5], [0.5, 0.75]];
        let (rows, plane) = labels.make(std::slice::from_ref(&lane), false, (4, 4));
        assert_eq!(
            &rows[..9],
            [0.5, 0.75, 0.0, -0.25, 0.5, -1.0, 0.5, 0.0, 0.0]
        );
        assert_eq!(&rows[9..12], [0.0, 0.0, -1.0]);
        // The two points inside are joined across the one outside:
        // column 2, rows 0 to 3.
        let lit: Vec<usize> = (0..16).filter(|&i| plane[i] == 1.0).collect();
        assert_eq!(lit, [2, 6, 10, 14]);
        let (mirrored, flipped) = labels.make(&[lane], true, (4, 4));
        assert_eq!(mirrored[0], 0.5);
        assert_eq!(mirrored[3], 1.25);
        let lit: Vec<usize> = (0..16).filter(|&i| flipped[i] == 1.0).collect();
        assert_eq!(lit, [1, 5, 9, 13]);
    }
}
