//! The SSD fork's `save_output_param`: DetectionOutput keeps every
//! detection of a test set, in the pixels of each image (its line of the
//! `name_size_file`, taken in turn), and once `num_test_image` images have
//! passed writes them as the benchmark servers want them: VOC's one file
//! per class (`comp4_det_test_dog.txt`: `image score xmin ymin xmax
//! ymax`), COCO's JSON list, or ILSVRC's one file (`image label score
//! xmin ymin xmax ymax`). Each file is written whole or not at all.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use blob_proto::{LabelMap, ParamMessage, format_g};

use crate::dyn_layer::{bad_param, sub_param};
use crate::image_sizes::{ImageSize, OutputResize, output_box, read_name_sizes};
use crate::layer::Result;
use crate::normalized_box::Corners;

const OP: &str = "set up DetectionOutput's save_output_param";

/// The layout of the saved detections (`output_format`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    Voc,
    Coco,
    Ilsvrc,
}

/// One detection to save: its box as the fork rounds it (pixels to two
/// decimals: `xmin, ymin, width, height`).
#[derive(Clone, Debug)]
struct Saved {
    image: usize,
    label: i32,
    score: f32,
    bbox: [f32; 4],
}

/// The detections of a test set so far, and where they go.
pub(crate) struct SaveOutput {
    directory: PathBuf,
    prefix: String,
    format: Format,
    /// The name of each class saved (every one but the background).
    names: BTreeMap<i32, String>,
    images: Vec<ImageSize>,
    num_test_image: usize,
    resize: Option<OutputResize>,
    /// The line of `images` of the next image.
    next: usize,
    kept: Vec<Saved>,
}

impl SaveOutput {
    /// The `save_output_param` of a `detection_output_param`, if it names
    /// an `output_directory` (created here). Where the fork would warn
    /// and save nothing (no label map or name-size file, an unknown
    /// format), this refuses: a test run asked to save should not end
    /// without its files.
    pub(crate) fn from_param(
        p: &ParamMessage,
        num_classes: usize,
        background: i64,
    ) -> Result<Option<Self>> {
        let s = sub_param(p, "save_output_param");
        let directory = s.string("output_directory");
        if directory.is_empty() {
            return Ok(None);
        }
        let required = |field: &str| -> Result<&str> {
            match s.string(field) {
                "" => Err(bad_param(
                    OP,
                    format!(
                        "output_directory {directory} is given but no {field}: the detections could not be named"
                    ),
                )),
                v => Ok(v),
            }
        };
        let format = match s.string("output_format") {
            "VOC" => Format::Voc,
            "COCO" => Format::Coco,
            "ILSVRC" => Format::Ilsvrc,
            other => {
                return Err(bad_param(
                    OP,
                    format!("output_format {other:?} is none of \"VOC\", \"COCO\", \"ILSVRC\""),
                ));
            }
        };
        let label_map_file = required("label_map_file")?;
        let read = |e: String| bad_param(OP, format!("label_map_file {label_map_file}: {e}"));
        let text = blob_runtime::read_text_file(label_map_file).map_err(|e| read(e.to_string()))?;
        let all_names = LabelMap::parse(&text)
            .and_then(|m| m.label_to_name(true))
            .map_err(read)?;
        let mut names = BTreeMap::new();
        for class in (0..num_classes as i32).filter(|&c| i64::from(c) != background) {
            let name = all_names
                .get(&class)
                .ok_or_else(|| read(format!("class {class} has no name")))?;
            // VOC's files are named after the classes: a name must not
            // lead the file out of the output directory.
            if format == Format::Voc
                && (name.is_empty() || name.contains(['/', '\\', '\0']) || name == "..")
            {
                return Err(read(format!(
                    "class {class}'s name {:?} cannot name a result file",
                    blob_proto::excerpt(name)
                )));
            }
            names.insert(class, name.clone());
        }
        let images = read_name_sizes(required("name_size_file")?, OP)?;
        let num_test_image = if s.has("num_test_image") {
            s.uint("num_test_image") as usize
        } else {
            images.len()
        };
        if num_test_image == 0 || num_test_image > images.len() {
            return Err(bad_param(
                OP,
                format!(
                    "num_test_image {num_test_image} must be at least 1 and at most the {} images of name_size_file",
                    images.len()
                ),
            ));
        }
        std::fs::create_dir_all(directory).map_err(|e| {
            bad_param(
                OP,
                format!("cannot create output_directory {directory}: {e}"),
            )
        })?;
        Ok(Some(Self {
            directory: PathBuf::from(directory),
            prefix: s.string("output_name_prefix").to_string(),
            format,
            names,
            images,
            num_test_image,
            resize: OutputResize::from_param(&s, OP)?,
            next: 0,
            kept: Vec::new(),
        }))
    }

    /// Keeps the detections of a batch of `batch` images (DetectionOutput's
    /// rows); writes the files once the test set is complete, and starts
    /// over.
    pub(crate) fn record(&mut self, rows: &[[f32; 7]], batch: usize) -> Result<()> {
        for image in 0..batch {
            let size = &self.images[self.next];
            for r in rows.iter().filter(|r| r[0] == image as f32 && r[1] != -1.0) {
                let b = output_box(
                    Corners::from([r[3], r[4], r[5], r[6]]),
                    size,
                    self.resize.as_ref(),
                );
                let round = |v: f32| ((v * 100.0).round() as f64 / 100.0) as f32;
                let c = b.corners;
                self.kept.push(Saved {
                    image: self.next,
                    label: r[1] as i32,
                    score: r[2],
                    bbox: [
                        round(c.xmin),
                        round(c.ymin),
                        round(c.xmax - c.xmin),
                        round(c.ymax - c.ymin),
                    ],
                });
            }
            self.next += 1;
            if self.next == self.num_test_image {
                self.write()?;
                self.next = 0;
                self.kept.clear();
            }
        }
        Ok(())
    }

    /// The files of the detections kept.
    fn write(&self) -> Result<()> {
        let mut files: BTreeMap<String, String> = BTreeMap::new();
        match self.format {
            Format::Voc => {
                for name in self.names.values() {
                    files.insert(format!("{}{name}.txt", self.prefix), String::new());
                }
                for d in &self.kept {
                    let Some(name) = self.names.get(&d.label) else {
                        continue;
                    };
                    let text = files
                        .entry(format!("{}{name}.txt", self.prefix))
                        .or_default();
                    let [x, y, w, h] = d.bbox.map(|v| v as i64);
                    let _ = writeln!(
                        text,
                        "{} {} {x} {y} {} {}",
                        self.images[d.image].name,
                        format_g(f64::from(d.score), 6),
                        x + w,
                        y + h
                    );
                }
            }
            Format::Ilsvrc => {
                let mut text = String::new();
                for d in &self.kept {
                    let [x, y, w, h] = d.bbox.map(|v| v as i64);
                    let _ = writeln!(
                        text,
                        "{} {} {} {x} {y} {} {}",
                        self.images[d.image].name,
                        d.label,
                        format_g(f64::from(d.score), 6),
                        x + w,
                        y + h
                    );
                }
                files.insert(format!("{}.txt", self.prefix), text);
            }
            Format::Coco => {
                let mut text = String::from("[\n");
                for (i, d) in self.kept.iter().enumerate() {
                    let name = self.names.get(&d.label).map_or("", String::as_str);
                    let [x, y, w, h] = d.bbox;
                    let _ = writeln!(
                        text,
                        "    {{\"image_id\": {}, \"category_id\": {}, \"bbox\": [{x}, {y}, {w}, {h}], \"score\": {}}}{}",
                        json_value(&self.images[d.image].name),
                        json_value(name),
                        d.score,
                        if i + 1 < self.kept.len() { "," } else { "" }
                    );
                }
                text.push_str("]\n");
                files.insert(format!("{}.json", self.prefix), text);
            }
        }
        for (file, text) in files {
            let path = self.directory.join(&file);
            blob_runtime::write_atomically(&path, text.as_bytes()).map_err(|e| {
                bad_param(
                    "save detections",
                    format!("cannot write {}: {e}", path.display()),
                )
            })?;
        }
        Ok(())
    }
}

/// A name as the fork's JSON holds it: a number where it reads as one
/// (COCO's image and category ids), else a quoted string.
fn json_value(name: &str) -> String {
    let digits = name.strip_prefix('-').unwrap_or(name);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, "1"));
    let number = !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && (whole == "0" || !whole.starts_with('0'))
        && !fraction.is_empty()
        && fraction.bytes().all(|b| b.is_ascii_digit());
    if number {
        return name.to_string();
    }
    let mut quoted = String::from("\"");
    for c in name.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(quoted, "\\u{:04x}", c as u32);
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::json_value;

    #[test]
    fn names_are_numbers_only_where_json_reads_them_so() {
        assert_eq!(json_value("139"), "139");
        assert_eq!(json_value("-2.5"), "-2.5");
        assert_eq!(json_value("000139"), "\"000139\"");
        assert_eq!(json_value("dog"), "\"dog\"");
        assert_eq!(json_value("1."), "\"1.\"");
        assert_eq!(json_value("a\"b"), "\"a\\\"b\"");
    }
}
