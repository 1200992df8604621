//! The SSD fork's `get_image_size` (what its `create_list.sh` runs for
//! the test set): each listed image's name and size, `name height width`
//! a line, the `name_size_file` that DetectionOutput's
//! `save_output_param` and DetectionEvaluate read.

use std::collections::HashMap;
use std::path::Path;

use crate::imageset::{ImageSetEvent, ToolError};
use crate::list::read_pair_list;

/// The `name_size_file` of the images of `list` (`IMAGE ANNOTATION` or
/// `IMAGE LABEL` a line), each under `root`: each image's file stem and
/// its height and width in pixels, in the list's order. With
/// `name_id_file` (`NAME ID` a line, one for each image: COCO's), the
/// image's id stands for its name. An image that cannot be read, or a
/// name the id file lacks, is an error naming its line (the fork would
/// write a size it never read).
///
/// ```no_run
/// use std::path::Path;
/// let text = blob_data::image_sizes("VOCdevkit/", Path::new("test.txt"), None, &mut |_| {})?;
/// std::fs::write("test_name_size.txt", text)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn image_sizes(
    root: &str,
    list: &Path,
    name_id_file: Option<&Path>,
    report: &mut dyn FnMut(ImageSetEvent),
) -> Result<String, ToolError> {
    let lines = read_pair_list(list)?;
    report(ImageSetEvent::Total(lines.len()));
    let ids = match name_id_file {
        Some(file) => Some(read_name_ids(file, lines.len())?),
        None => None,
    };
    let mut text = String::new();
    for (done, line) in lines.iter().enumerate() {
        let path = Path::new(root).join(&line.image);
        let at = || format!("{}, line {}: {}", list.display(), line.line, path.display());
        let (width, height) = image::ImageReader::open(&path)
            .and_then(|r| r.with_guessed_format())
            .map_err(|e| e.to_string())
            .and_then(|r| r.into_dimensions().map_err(|e| e.to_string()))
            .map_err(|e| format!("{}: {e}", at()))?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = match &ids {
            Some(ids) => ids
                .get(&stem)
                .ok_or_else(|| format!("{}: {stem:?} is not in the name_id_file", at()))?
                .to_string(),
            None => stem,
        };
        text.push_str(&format!("{name} {height} {width}\n"));
        if (done + 1) % 1000 == 0 {
            report(ImageSetEvent::Processed(done + 1));
        }
    }
    if !lines.len().is_multiple_of(1000) {
        report(ImageSetEvent::Processed(lines.len()));
    }
    Ok(text)
}

/// A `name_id_file`: `NAME ID` a line, each name once, as many as the
/// list has images.
fn read_name_ids(file: &Path, images: usize) -> Result<HashMap<String, i64>, ToolError> {
    let text = blob_runtime::read_text_file(file).map_err(|e| e.to_string())?;
    let mut ids = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = || format!("{}, line {}", file.display(), i + 1);
        match words[..] {
            [] => continue,
            [name, id] => {
                let id = id.parse::<i64>().map_err(|_| {
                    format!(
                        "{}: the id {:?} is not a whole number",
                        at(),
                        blob_proto::excerpt(id)
                    )
                })?;
                if ids.insert(name.to_string(), id).is_some() {
                    return Err(format!("{}: {name:?} is given twice", at()));
                }
            }
            _ => {
                return Err(format!(
                    "{}: {:?} is not `NAME ID`",
                    at(),
                    blob_proto::excerpt(line)
                ));
            }
        }
    }
    if ids.len() != images {
        return Err(format!(
            "{} names {} images, the list {images}",
            file.display(),
            ids.len()
        ));
    }
    Ok(ids)
}
