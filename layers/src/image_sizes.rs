//! A test set's image names and sizes (the SSD fork's `name_size_file`,
//! written by its `get_image_size` tool: `name height width` a line) and
//! the fork's `OutputBBox`: a detection's image-relative box carried back
//! into its image's pixels, undoing the test net's resize. DetectionOutput
//! saves boxes so; DetectionEvaluate, given the file, matches them so.

use blob_proto::ParamMessage;

use crate::dyn_layer::bad_param;
use crate::layer::Result;
use crate::normalized_box::Corners;

/// One line of a `name_size_file`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ImageSize {
    pub name: String,
    pub height: u32,
    pub width: u32,
}

/// Reads a `name_size_file`; a line that is not a name and two positive
/// sizes is an error naming the file and the line (the fork stops reading
/// there and goes on with the lines before).
pub(crate) fn read_name_sizes(path: &str, op: &'static str) -> Result<Vec<ImageSize>> {
    let text = blob_runtime::read_text_file(path)
        .map_err(|e| bad_param(op, format!("name_size_file {path}: {e}")))?;
    let mut sizes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let size = |w: &str| w.parse::<u32>().ok().filter(|&v| v > 0);
        match words[..] {
            [name, h, w] if size(h).is_some() && size(w).is_some() => sizes.push(ImageSize {
                name: name.to_string(),
                height: size(h).unwrap_or(1),
                width: size(w).unwrap_or(1),
            }),
            _ => {
                return Err(bad_param(
                    op,
                    format!(
                        "name_size_file {path} line {}: {:?} is not `name height width` with positive sizes",
                        i + 1,
                        blob_proto::excerpt(line)
                    ),
                ));
            }
        }
    }
    if sizes.is_empty() {
        return Err(bad_param(
            op,
            format!("name_size_file {path} names no image"),
        ));
    }
    Ok(sizes)
}

/// How the test net resized its images (a `resize_param` beside the
/// `name_size_file`), so a box can be placed back in the original.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum OutputResize {
    /// Stretched to the net's size: the box only scales.
    Warp,
    /// Scaled by its smaller side; with both scales given, the box is
    /// placed at those sizes and clipped to the image.
    FitSmallSize { height_scale: u32, width_scale: u32 },
    /// Scaled by its larger side into the net's `height` x `width` and
    /// padded: the padding is taken off first.
    FitLargeSizeAndPad { height: f32, width: f32 },
}

impl OutputResize {
    /// The `resize_param` of `p`, if it has one (the fork requires a
    /// positive `height` and `width` in every mode).
    pub(crate) fn from_param(p: &ParamMessage, op: &'static str) -> Result<Option<Self>> {
        let Some(r) = p.message("resize_param") else {
            return Ok(None);
        };
        let (height, width) = (r.uint("height"), r.uint("width"));
        if height == 0 || width == 0 {
            return Err(bad_param(
                op,
                format!("resize_param needs a positive height and width, not {height} x {width}"),
            ));
        }
        Ok(Some(match r.enum_name("resize_mode") {
            "FIT_SMALL_SIZE" => OutputResize::FitSmallSize {
                height_scale: r.uint("height_scale") as u32,
                width_scale: r.uint("width_scale") as u32,
            },
            "FIT_LARGE_SIZE_AND_PAD" => OutputResize::FitLargeSizeAndPad {
                height: height as f32,
                width: width as f32,
            },
            _ => OutputResize::Warp,
        }))
    }
}

/// A box with the size the fork keeps beside it: its pixel boxes'
/// sizes count the end pixels (`(w + 1) * (h + 1)`), and overlaps of
/// pixel boxes count them too.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SizedBox {
    pub corners: Corners,
    pub size: f32,
    pub pixels: bool,
}

impl SizedBox {
    /// An image-relative box as it is.
    pub(crate) fn normalized(corners: Corners) -> Self {
        Self {
            corners,
            size: corners.area(),
            pixels: false,
        }
    }

    /// Intersection over union (the fork's `JaccardOverlap`). Between
    /// pixel boxes the intersection counts its end pixels, even for
    /// disjoint boxes (the fork's empty intersection is one pixel).
    pub(crate) fn iou(&self, other: &SizedBox) -> f32 {
        if !self.pixels {
            return self.corners.iou(&other.corners);
        }
        let (a, b) = (self.corners, other.corners);
        let disjoint = b.xmin > a.xmax || b.xmax < a.xmin || b.ymin > a.ymax || b.ymax < a.ymin;
        let (w, h) = if disjoint {
            (1.0, 1.0)
        } else {
            (
                a.xmax.min(b.xmax) - a.xmin.max(b.xmin) + 1.0,
                a.ymax.min(b.ymax) - a.ymin.max(b.ymin) + 1.0,
            )
        };
        if !(w > 0.0 && h > 0.0) {
            return 0.0;
        }
        let inter = w * h;
        inter / (self.size + other.size - inter)
    }
}

/// The fork's `BBoxSize`: 0 for an inverted box, the end pixels counted
/// unless `normalized`.
fn box_size(b: &Corners, normalized: bool) -> f32 {
    if b.xmax < b.xmin || b.ymax < b.ymin {
        return 0.0;
    }
    let (w, h) = (b.xmax - b.xmin, b.ymax - b.ymin);
    if normalized {
        w * h
    } else {
        (w + 1.0) * (h + 1.0)
    }
}

/// `b` clamped into `[0, width] x [0, height]`.
fn clip(b: Corners, height: f32, width: f32) -> Corners {
    Corners {
        xmin: b.xmin.clamp(0.0, width),
        ymin: b.ymin.clamp(0.0, height),
        xmax: b.xmax.clamp(0.0, width),
        ymax: b.ymax.clamp(0.0, height),
    }
}

/// The fork's `ScaleBBox`: `b` times the sizes, its size counting end
/// pixels where either side is above 1.
fn scale(b: Corners, height: u32, width: u32) -> SizedBox {
    let (h, w) = (height as f32, width as f32);
    let corners = Corners {
        xmin: b.xmin * w,
        ymin: b.ymin * h,
        xmax: b.xmax * w,
        ymax: b.ymax * h,
    };
    let normalized = !(width > 1 || height > 1);
    SizedBox {
        corners,
        size: box_size(&corners, normalized),
        pixels: true,
    }
}

/// The fork's `ProjectBBox`: `b` in the frame of `source`, clipped; none
/// where they do not overlap.
fn project(source: &Corners, b: &Corners) -> Option<Corners> {
    if b.xmin >= source.xmax
        || b.xmax <= source.xmin
        || b.ymin >= source.ymax
        || b.ymax <= source.ymin
    {
        return None;
    }
    let (w, h) = (source.xmax - source.xmin, source.ymax - source.ymin);
    Some(clip(
        Corners {
            xmin: (b.xmin - source.xmin) / w,
            ymin: (b.ymin - source.ymin) / h,
            xmax: (b.xmax - source.xmin) / w,
            ymax: (b.ymax - source.ymin) / h,
        },
        1.0,
        1.0,
    ))
}

/// The fork's `OutputBBox`: `b` (image-relative, as the net sees the
/// resized image) in the pixels of `image`.
pub(crate) fn output_box(b: Corners, image: &ImageSize, resize: Option<&OutputResize>) -> SizedBox {
    let (height, width) = (image.height, image.width);
    match resize {
        Some(OutputResize::FitLargeSizeAndPad {
            height: rh,
            width: rw,
        }) => {
            let aspect = width as f32 / height as f32;
            let source = if aspect > rw / rh {
                let padding = (rh - rw / aspect) / 2.0;
                Corners {
                    xmin: 0.0,
                    ymin: padding / rh,
                    xmax: 1.0,
                    ymax: (1.0 - f64::from(padding / rh)) as f32,
                }
            } else {
                let padding = (rw - rh * aspect) / 2.0;
                Corners {
                    xmin: padding / rw,
                    ymin: 0.0,
                    xmax: (1.0 - f64::from(padding / rw)) as f32,
                    ymax: 1.0,
                }
            };
            let placed = project(&source, &b).unwrap_or(b);
            scale(clip(placed, 1.0, 1.0), height, width)
        }
        Some(&OutputResize::FitSmallSize {
            height_scale,
            width_scale,
        }) if height_scale != 0 && width_scale != 0 => {
            let scaled = scale(b, height_scale, width_scale);
            let corners = clip(scaled.corners, height as f32, width as f32);
            // The fork's clip to the image keeps a size without end pixels.
            SizedBox {
                corners,
                size: box_size(&corners, true),
                pixels: true,
            }
        }
        _ => scale(clip(b, 1.0, 1.0), height, width),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(height: u32, width: u32) -> ImageSize {
        ImageSize {
            name: "000001".into(),
            height,
            width,
        }
    }

    fn corners(v: [f32; 4]) -> Corners {
        Corners::from(v)
    }

    #[test]
    fn a_warped_box_is_clipped_then_scaled_with_its_end_pixels_counted() {
        let b = output_box(corners([-0.1, 0.25, 0.5, 1.5]), &image(200, 100), None);
        assert_eq!(b.corners, corners([0.0, 50.0, 50.0, 200.0]));
        assert_eq!(b.size, 51.0 * 151.0);
        let warp = output_box(
            corners([-0.1, 0.25, 0.5, 1.5]),
            &image(200, 100),
            Some(&OutputResize::Warp),
        );
        assert_eq!(warp, b);
    }

    #[test]
    fn padding_is_taken_off_a_fitted_box() {
        // A 100 x 200 image fitted into 300 x 300: 75 rows of padding
        // above and below.
        let fit = OutputResize::FitLargeSizeAndPad {
            height: 300.0,
            width: 300.0,
        };
        let b = output_box(
            corners([0.0, 0.25, 1.0, 0.75]),
            &image(100, 200),
            Some(&fit),
        );
        assert_eq!(b.corners.xmin, 0.0);
        assert!((b.corners.ymin - 0.0).abs() < 1e-4, "{:?}", b.corners);
        assert!((b.corners.ymax - 100.0).abs() < 1e-4, "{:?}", b.corners);
        // A box wholly in the padding is kept as it was, then clipped.
        let lost = output_box(corners([0.1, 0.0, 0.2, 0.1]), &image(100, 200), Some(&fit));
        assert!(
            (lost.corners.ymax - 10.0).abs() < 1e-4,
            "{:?}",
            lost.corners
        );
    }

    #[test]
    fn a_small_side_fit_with_scales_clips_to_the_image_without_end_pixels() {
        let fit = OutputResize::FitSmallSize {
            height_scale: 300,
            width_scale: 400,
        };
        let b = output_box(corners([0.5, 0.5, 1.0, 1.0]), &image(200, 300), Some(&fit));
        assert_eq!(b.corners, corners([200.0, 150.0, 300.0, 200.0]));
        assert_eq!(b.size, 100.0 * 50.0);
    }

    #[test]
    fn pixel_overlaps_count_end_pixels_even_for_disjoint_boxes() {
        let a = output_box(corners([0.0, 0.0, 0.1, 0.1]), &image(100, 100), None);
        let b = output_box(corners([0.05, 0.05, 0.15, 0.15]), &image(100, 100), None);
        // 11 x 11 boxes sharing 6 x 6 pixels.
        assert!((a.iou(&b) - 36.0 / (121.0 + 121.0 - 36.0)).abs() < 1e-6);
        let far = output_box(corners([0.5, 0.5, 0.6, 0.6]), &image(100, 100), None);
        assert!((a.iou(&far) - 1.0 / (121.0 + 121.0 - 1.0)).abs() < 1e-6);
        let n = SizedBox::normalized(corners([0.5, 0.5, 0.6, 0.6]));
        assert_eq!(
            SizedBox::normalized(corners([0.0, 0.0, 0.1, 0.1])).iou(&n),
            0.0
        );
    }

    #[test]
    fn a_name_size_file_is_read_or_refused_by_its_line() {
        let dir = std::env::temp_dir().join(format!("blobflow-name-size-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.txt");
        std::fs::write(&good, "000001 500 353\n\n000002 375 500\n").unwrap();
        let sizes = read_name_sizes(good.to_str().unwrap(), "test").unwrap();
        assert_eq!(
            sizes[1],
            ImageSize {
                name: "000002".into(),
                height: 375,
                width: 500
            }
        );
        let bad = dir.join("bad.txt");
        std::fs::write(&bad, "000001 500 353\n000002 375\n").unwrap();
        let err = read_name_sizes(bad.to_str().unwrap(), "test")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2") && err.contains("000002 375"),
            "{err}"
        );
        std::fs::write(&bad, "000001 0 353\n").unwrap();
        assert!(read_name_sizes(bad.to_str().unwrap(), "test").is_err());
        std::fs::write(&bad, "\n").unwrap();
        let err = read_name_sizes(bad.to_str().unwrap(), "test")
            .unwrap_err()
            .to_string();
        assert!(err.contains("names no image"), "{err}");
        let err = read_name_sizes(dir.join("absent.txt").to_str().unwrap(), "test")
            .unwrap_err()
            .to_string();
        assert!(err.contains("absent.txt"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
