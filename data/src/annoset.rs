//! The SSD fork's `convert_annoset` (what its `create_annoset.py`
//! runs): a list of `IMAGE ANNOTATION` pairs (VOC's XML files) to a
//! store of `AnnotatedDatum` records, AnnotatedData's input. Each
//! object's box is divided by the annotation's image size, its name
//! turned into a label by the label map, and the objects grouped by
//! label in the order they first appear, each numbered within its group.
//! The YOLO fork's `detection_with_segmentation` adds each image's
//! segmentation label image (a PNG of class values) to its record; its
//! `lane_detection` stores TuSimple's lanes (JSON) instead of boxes.

use std::collections::HashMap;
use std::path::Path;

use blob_proto::{AnnotatedDatum, Annotation, AnnotationGroup, LaneInfo, NormalizedBBox};
use prost::Message;

use crate::imageset::{ImageSetEvent, ImageSetOptions, ImageStore, ToolError};
use crate::list::read_name_lines;
use crate::store::Backend;

/// A label map (`labelmap_voc.prototxt`: `item { name: "dog" label: 12
/// display_name: "dog" }`) as the names' labels (the fork's
/// `MapNameToLabel`); with `check_label`, a name or a label given twice
/// is refused, as the fork refuses it; without, the last one counts.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("blobflow-labelmap-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("labelmap.prototxt");
/// std::fs::write(&path, r#"item { name: "none_of_the_above" label: 0 } item { name: "dog" label: 12 }"#)?;
/// let names = blob_data::read_label_map(&path, true)?;
/// assert_eq!(names["dog"], 12);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_label_map(path: &Path, check_label: bool) -> Result<HashMap<String, i32>, ToolError> {
    let text = blob_runtime::read_text_file(path).map_err(|e| e.to_string())?;
    blob_proto::LabelMap::parse(&text)
        .and_then(|map| map.name_to_label(check_label))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The text of `node`'s child `tag`, trimmed.
fn child_text<'a>(node: roxmltree::Node<'a, 'a>, tag: &str) -> Option<&'a str> {
    node.children()
        .find(|c| c.has_tag_name(tag))
        .and_then(|c| c.text())
        .map(str::trim)
}

/// The fork's `ReadXMLToAnnotatedDatum`: the objects of a VOC annotation
/// grouped by label. `image` is the image's (height, width), used where
/// the annotation gives no size; `warn` hears what the fork warns of.
fn voc_groups(
    xml: &Path,
    image: (usize, usize),
    names: &HashMap<String, i32>,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<AnnotationGroup>, String> {
    let text = blob_runtime::read_text_file(xml).map_err(|e| e.to_string())?;
    let doc = roxmltree::Document::parse(&text).map_err(|e| format!("{}: {e}", xml.display()))?;
    let root = doc.root_element();
    if !root.has_tag_name("annotation") {
        return Err(format!(
            "{}: the root element is <{}>, not VOC's <annotation>",
            xml.display(),
            root.tag_name().name()
        ));
    }
    let size = root.children().find(|c| c.has_tag_name("size"));
    let dim = |tag: &str| {
        size.and_then(|s| child_text(s, tag))
            .and_then(|t| t.parse::<usize>().ok())
    };
    let (height, width) = match (dim("height"), dim("width")) {
        (Some(h), Some(w)) => (h, w),
        _ => {
            warn(format!(
                "{}: no <size> with <height> and <width>; the image's {} x {} is used",
                xml.display(),
                image.1,
                image.0
            ));
            image
        }
    };
    if height != image.0 {
        warn(format!("{} inconsistent image height.", xml.display()));
    }
    if width != image.1 {
        warn(format!("{} inconsistent image width.", xml.display()));
    }
    if height == 0 || width == 0 {
        return Err(format!("{} no valid image width/height.", xml.display()));
    }
    let mut groups: Vec<AnnotationGroup> = Vec::new();
    for object in root.children().filter(|c| c.has_tag_name("object")) {
        // The fork takes `difficult` as read so far when it meets the
        // box: VOC writes it first.
        let mut difficult = false;
        let mut current: Option<(usize, usize)> = None;
        for field in object.children().filter(roxmltree::Node::is_element) {
            match field.tag_name().name() {
                "name" => {
                    let name = field.text().unwrap_or("").trim();
                    let label = *names.get(name).ok_or_else(|| {
                        format!(
                            "{}: Unknown name: {name:?} (not in the label map)",
                            xml.display()
                        )
                    })?;
                    let g = match groups.iter().position(|g| g.group_label == Some(label)) {
                        Some(g) => g,
                        None => {
                            groups.push(AnnotationGroup {
                                group_label: Some(label),
                                annotation: Vec::new(),
                            });
                            groups.len() - 1
                        }
                    };
                    let instance = groups[g]
                        .annotation
                        .last()
                        .map_or(0, |a| a.instance_id.unwrap_or(0) + 1);
                    groups[g].annotation.push(Annotation {
                        instance_id: Some(instance),
                        bbox: None,
                        lanes: None,
                    });
                    current = Some((g, groups[g].annotation.len() - 1));
                }
                "difficult" => difficult = field.text().map(str::trim) == Some("1"),
                "bndbox" => {
                    let Some((g, a)) = current else {
                        return Err(format!(
                            "{}: an object's <bndbox> comes before its <name>",
                            xml.display()
                        ));
                    };
                    // Pixel coordinates, whole numbers in VOC; a
                    // fractional one is truncated as the fork's int is.
                    let coord = |tag: &str| {
                        child_text(field, tag)
                            .and_then(|t| t.parse::<f64>().ok())
                            .map_or(0, |v| v as i64)
                    };
                    let (xmin, ymin, xmax, ymax) =
                        (coord("xmin"), coord("ymin"), coord("xmax"), coord("ymax"));
                    let (w, h) = (width as i64, height as i64);
                    if [xmin, xmax].iter().any(|&x| x < 0 || x > w)
                        || [ymin, ymax].iter().any(|&y| y < 0 || y > h)
                    {
                        warn(format!(
                            "{} bounding box exceeds image boundary.",
                            xml.display()
                        ));
                    }
                    if xmin > xmax || ymin > ymax {
                        warn(format!("{} bounding box irregular.", xml.display()));
                    }
                    groups[g].annotation[a].bbox = Some(NormalizedBBox {
                        xmin: Some(xmin as f32 / width as f32),
                        ymin: Some(ymin as f32 / height as f32),
                        xmax: Some(xmax as f32 / width as f32),
                        ymax: Some(ymax as f32 / height as f32),
                        difficult: Some(difficult),
                        ..Default::default()
                    });
                }
                _ => {}
            }
        }
    }
    Ok(groups)
}

/// The most lanes a record's label top holds (the YOLO fork's LaneData
/// writes five rows a record).
pub(crate) const MOST_LANES: usize = 5;
/// The most points of a lane the label top holds.
pub(crate) const MOST_LANE_POINTS: usize = 64;

/// The YOLO fork's `ReadJSONToAnnotatedDatum` for lanes: a TuSimple
/// label file (`{"lanes": [[x, ...], ...], "h_samples": [y, ...]}`,
/// pixels; an `x` of -2 where the lane is not at that height) as one
/// group a lane, each point `(x / width, y / height)` numbered by its
/// place. The size is `image.height` / `image.width` where the file
/// gives them, else the image's (`image`: height, width); `warn` hears
/// what the fork warns of. More lanes or points than LaneData's label
/// top holds are refused (the fork writes past it).
fn tusimple_groups(
    json: &Path,
    image: (usize, usize),
    warn: &mut dyn FnMut(String),
) -> Result<Vec<AnnotationGroup>, String> {
    let name = json.display();
    let text = blob_runtime::read_text_file(json).map_err(|e| e.to_string())?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{name}: {e}"))?;
    let whole = |v: &serde_json::Value, what: &str| {
        v.as_i64()
            .ok_or_else(|| format!("{name}: {what} {v} is not a whole number"))
    };
    let list = |key: &str| {
        doc.get(key)
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| format!("{name}: no \"{key}\" array (TuSimple's label files have one)"))
    };
    let size = |key: &str| {
        doc.get("image")
            .and_then(|i| i.get(key))
            .and_then(serde_json::Value::as_u64)
            .map(|v| v as usize)
    };
    let (height, width) = match (size("height"), size("width")) {
        (Some(h), Some(w)) => (h, w),
        _ => image,
    };
    if height != image.0 {
        warn(format!("{name} inconsistent image height."));
    }
    if width != image.1 {
        warn(format!("{name} inconsistent image width."));
    }
    if height == 0 || width == 0 {
        return Err(format!("{name} no valid image width/height."));
    }
    let heights = list("h_samples")?
        .iter()
        .map(|v| whole(v, "an h_samples value"))
        .collect::<Result<Vec<i64>, String>>()?;
    if heights.len() > MOST_LANE_POINTS {
        return Err(format!(
            "{name}: {} h_samples, more than the {MOST_LANE_POINTS} points a lane may have in \
             LaneData's label top",
            heights.len()
        ));
    }
    let lanes = list("lanes")?;
    if lanes.len() > MOST_LANES {
        return Err(format!(
            "{name}: {} lanes, more than the {MOST_LANES} LaneData's label top holds",
            lanes.len()
        ));
    }
    let mut groups = Vec::with_capacity(lanes.len());
    for (l, lane) in lanes.iter().enumerate() {
        let xs = lane
            .as_array()
            .ok_or_else(|| format!("{name}: lane {l} is not an array"))?;
        if xs.len() != heights.len() {
            return Err(format!(
                "{name}: lane {l} has {} points for {} h_samples",
                xs.len(),
                heights.len()
            ));
        }
        let mut annotation = Vec::with_capacity(xs.len());
        for (i, (x, &y)) in xs.iter().zip(&heights).enumerate() {
            let x = whole(x, &format!("lane {l}'s point"))?;
            annotation.push(Annotation {
                instance_id: Some(i as i32),
                bbox: None,
                lanes: Some(LaneInfo {
                    x: Some(x as f32 / width as f32),
                    y: Some(y as f32 / height as f32),
                    id: None,
                }),
            });
        }
        groups.push(AnnotationGroup {
            group_label: None,
            annotation,
        });
    }
    Ok(groups)
}

/// What `convert_annoset` stores with each image (`--anno_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnnotationKind {
    /// `detection`: the objects' boxes; the list's lines are `IMAGE
    /// ANNOTATION`.
    #[default]
    Detection,
    /// The YOLO fork's `detection_with_segmentation`: the boxes and a
    /// segmentation label image (a PNG whose pixels are class values,
    /// stored as it is in the datum's `seg_label`, the record's type
    /// `BBOXandSeg`); the lines are `IMAGE ANNOTATION LABEL_IMAGE`.
    /// Its records must be `encoded`, as the fork reads them.
    DetectionWithSegmentation,
    /// The YOLO fork's `lane_detection`: TuSimple's lanes (a JSON label
    /// file each; `--label_type json`), one group a lane, a point an
    /// annotation, the record's type `LANE` (what its `LaneData`
    /// reads); the lines are `IMAGE ANNOTATION`, and no label map is
    /// read.
    LaneDetection,
}

impl AnnotationKind {
    /// The kind by the fork's `--anno_type` name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "detection" => Some(Self::Detection),
            "detection_with_segmentation" => Some(Self::DetectionWithSegmentation),
            "lane_detection" => Some(Self::LaneDetection),
            _ => None,
        }
    }
}

/// The SSD fork's `convert_annoset --anno_type=detection
/// --label_type=xml --label_map_file=MAP ROOTFOLDER/ LISTFILE DB_NAME`:
/// each `IMAGE ANNOTATION` pair of the list (both names after `root` as
/// written) stored as an `AnnotatedDatum` under the key `%08d_IMAGE`:
/// the image as `convert_imageset` stores it (`options`: gray, resize,
/// encoded...), its objects from the VOC XML file. An image that cannot
/// be read is passed over and reported, as the fork passes it over; a
/// missing annotation file gives a record without objects, as the fork
/// gives it; an unknown object name or a file that is not VOC's is an
/// error naming it. With [`AnnotationKind::DetectionWithSegmentation`]
/// each line names a label image too, stored with its record; one that
/// is missing or not a PNG is an error naming it. With
/// [`AnnotationKind::LaneDetection`] the annotations are TuSimple's
/// JSON lanes and `label_map` is not read (`None` will do); the
/// detection kinds need it. The store appears only when complete;
/// returns how many records it holds.
///
/// ```
/// use blob_data::{AnnotationKind, Backend, ImageSetOptions, convert_annoset};
/// let dir = std::env::temp_dir().join(format!("blobflow-annoset-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// image::RgbImage::new(40, 20).save(dir.join("a.png"))?;
/// std::fs::write(dir.join("a.xml"), "<annotation><size><width>40</width><height>20</height></size>\
///     <object><name>dog</name><difficult>0</difficult>\
///     <bndbox><xmin>10</xmin><ymin>5</ymin><xmax>30</xmax><ymax>20</ymax></bndbox></object></annotation>")?;
/// std::fs::write(dir.join("list.txt"), "a.png a.xml\n")?;
/// std::fs::write(dir.join("labelmap.prototxt"), r#"item { name: "dog" label: 1 }"#)?;
/// let root = format!("{}/", dir.display());
/// let stored = convert_annoset(&root, &dir.join("list.txt"), &dir.join("db"), Backend::Lmdb,
///     &ImageSetOptions::default(), AnnotationKind::Detection, Some(&dir.join("labelmap.prototxt")),
///     false, &mut |_| {})?;
/// assert_eq!(stored, 1);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn convert_annoset(
    root: &str,
    list: &Path,
    db: &Path,
    backend: Backend,
    options: &ImageSetOptions,
    kind: AnnotationKind,
    label_map: Option<&Path>,
    check_label: bool,
    report: &mut dyn FnMut(ImageSetEvent),
) -> Result<usize, ToolError> {
    let lanes = kind == AnnotationKind::LaneDetection;
    let names = match label_map {
        _ if lanes => HashMap::new(),
        Some(path) => read_label_map(path, check_label)?,
        None => {
            return Err(
                "a label map file (--label_map_file) names the objects' labels of \
                        detection annotations"
                    .into(),
            );
        }
    };
    let segmentation = kind == AnnotationKind::DetectionWithSegmentation;
    if segmentation && !(options.encoded || options.encode_type.is_some()) {
        return Err(
            "detection_with_segmentation stores encoded images alone (--encoded): the \
                    YOLO fork reads a record's seg_label only where its image is encoded"
                .into(),
        );
    }
    let form = if segmentation {
        "IMAGE ANNOTATION LABEL_IMAGE"
    } else {
        "IMAGE ANNOTATION"
    };
    let lines = read_name_lines(list, form)?
        .into_iter()
        .map(|(line, mut names)| {
            let label_image = segmentation.then(|| names.pop().unwrap_or_default());
            let annotation = names.pop().unwrap_or_default();
            let image = names.pop().unwrap_or_default();
            (line, image.clone(), (image, annotation, label_image))
        })
        .collect();
    let store = ImageStore {
        root,
        list,
        db,
        backend,
        options,
    };
    let mut record = |line: usize,
                      (image, annotation, label_image): &(String, String, Option<String>),
                      mut datum: blob_proto::Datum,
                      report: &mut dyn FnMut(ImageSetEvent)| {
        let (path, annotation) = (format!("{root}{image}"), format!("{root}{annotation}"));
        let groups = if Path::new(&annotation).exists() {
            let size = image::ImageReader::open(&path)
                .and_then(|r| r.with_guessed_format())
                .map_err(|e| e.to_string())
                .and_then(|r| r.into_dimensions().map_err(|e| e.to_string()))
                .map_err(|e| format!("{}, line {line}: {path}: {e}", list.display()))?;
            let mut warn = |what: String| report(ImageSetEvent::Warning { line, what });
            let size = (size.1 as usize, size.0 as usize);
            if lanes {
                tusimple_groups(Path::new(&annotation), size, &mut warn)
            } else {
                voc_groups(Path::new(&annotation), size, &names, &mut warn)
            }
            .map_err(|e| format!("{}, line {line}: {e}", list.display()))?
        } else {
            Vec::new()
        };
        if let Some(label_image) = label_image {
            let path = format!("{root}{label_image}");
            let bytes = std::fs::read(&path)
                .map_err(|e| format!("{}, line {line}: {path}: {e}", list.display()))?;
            if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
                return Err(format!(
                    "{}, line {line}: {path} is not a PNG: a segmentation label image's pixels \
                     are class values, which only a lossless PNG keeps",
                    list.display()
                ));
            }
            datum.seg_label = Some(bytes);
        }
        let record = AnnotatedDatum {
            datum: Some(datum),
            r#type: Some(match kind {
                AnnotationKind::Detection => 0,
                AnnotationKind::DetectionWithSegmentation => 1,
                AnnotationKind::LaneDetection => 2,
            }),
            annotation_group: groups,
        };
        Ok(record.encode_to_vec())
    };
    store.write(lines, &mut record, report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voc_objects_group_by_label_in_order_with_instance_numbers() {
        let dir = std::env::temp_dir().join(format!("blobflow-voc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let xml = dir.join("a.xml");
        let object = |name: &str, difficult: u8, b: [i32; 4]| {
            format!(
                "<object><name>{name}</name><pose>Left</pose><difficult>{difficult}</difficult>\
                 <bndbox><xmin>{}</xmin><ymin>{}</ymin><xmax>{}</xmax><ymax>{}</ymax></bndbox></object>",
                b[0], b[1], b[2], b[3]
            )
        };
        std::fs::write(
            &xml,
            format!(
                "<annotation><folder>VOC2007</folder><size><width>200</width><height>100</height>\
                 <depth>3</depth></size>{}{}{}</annotation>",
                object("dog", 0, [20, 10, 120, 90]),
                object("cat", 1, [0, 0, 50, 50]),
                object("dog", 0, [100, 50, 200, 100]),
            ),
        )
        .unwrap();
        let names: HashMap<String, i32> = [("dog".to_string(), 12), ("cat".to_string(), 8)].into();
        let mut warnings = Vec::new();
        let groups = voc_groups(&xml, (100, 200), &names, &mut |w| warnings.push(w)).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].group_label, Some(12));
        assert_eq!(groups[1].group_label, Some(8));
        let dogs: Vec<i32> = groups[0]
            .annotation
            .iter()
            .map(|a| a.instance_id.unwrap())
            .collect();
        assert_eq!(dogs, [0, 1]);
        let b = groups[0].annotation[1].bbox.clone().unwrap();
        assert_eq!(
            (b.xmin, b.ymin, b.xmax, b.ymax),
            (Some(0.5), Some(0.5), Some(1.0), Some(1.0))
        );
        assert_eq!(
            groups[1].annotation[0].bbox.clone().unwrap().difficult,
            Some(true)
        );
        // An image of another size is warned of; an unknown name refused.
        voc_groups(&xml, (100, 100), &names, &mut |w| warnings.push(w)).unwrap();
        assert!(warnings[0].contains("inconsistent image width"));
        let only_dogs: HashMap<String, i32> = [("dog".to_string(), 12)].into();
        let e = voc_groups(&xml, (100, 200), &only_dogs, &mut |_| {}).unwrap_err();
        assert!(e.contains("Unknown name: \"cat\""), "{e}");
        std::fs::write(&xml, "<notvoc/>").unwrap();
        assert!(
            voc_groups(&xml, (1, 1), &names, &mut |_| {})
                .unwrap_err()
                .contains("<notvoc>")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
