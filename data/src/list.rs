//! Caffe's image lists (`ImageData`'s `source`, `convert_imageset`'s
//! LISTFILE): a line `NAME LABEL` each.

use std::path::Path;

/// One line of a list.
pub(crate) struct ListLine {
    /// Its number in the file, from 1.
    pub line: usize,
    /// The image's name as written (spaces and all).
    pub name: String,
    /// Its label.
    pub label: i32,
}

/// The lines of an image list, the label after the last space (so names
/// may hold spaces, as in Caffe); blank lines are passed over, and any
/// other line without a whole-number label is an error naming it.
pub(crate) fn read_image_list(list: &Path) -> Result<Vec<ListLine>, String> {
    let text = blob_runtime::read_text_file(list).map_err(|e| e.to_string())?;
    let at = |line: usize| format!("{}, line {line}", list.display());
    let mut lines = Vec::new();
    for (i, text) in text.lines().enumerate() {
        let text = text.trim_end_matches('\r');
        if text.trim().is_empty() {
            continue;
        }
        let Some((name, label)) = text.rsplit_once(' ') else {
            return Err(format!(
                "{}: {:?} has no label (each line is `IMAGE LABEL`)",
                at(i + 1),
                blob_proto::excerpt(text)
            ));
        };
        let label = label.trim().parse().map_err(|_| {
            format!(
                "{}: the label {:?} is not a whole number",
                at(i + 1),
                blob_proto::excerpt(label)
            )
        })?;
        lines.push(ListLine {
            line: i + 1,
            name: name.to_string(),
            label,
        });
    }
    Ok(lines)
}

/// One line of a list of image pairs (`DenseImageData`'s `source`).
pub(crate) struct PairLine {
    /// Its number in the file, from 1.
    pub line: usize,
    /// The image's name.
    pub image: String,
    /// The label image's name.
    pub label: String,
}

/// The lines of a list of `IMAGE LABEL_IMAGE` pairs, two names without
/// spaces each (Caffe reads them as whitespace-separated words); blank
/// lines are passed over, and a line of one name or of three is an
/// error naming it (Caffe would pair every later name with the wrong
/// one).
pub(crate) fn read_pair_list(list: &Path) -> Result<Vec<PairLine>, String> {
    Ok(read_name_lines(list, "IMAGE LABEL_IMAGE")?
        .into_iter()
        .map(|(line, mut names)| {
            let label = names.pop().unwrap_or_default();
            let image = names.pop().unwrap_or_default();
            PairLine { line, image, label }
        })
        .collect())
}

/// The lines of a list of names without spaces, as many a line as
/// `form` (`IMAGE ANNOTATION`) has words, each with its number from 1;
/// blank lines are passed over, and a line of another count is an error
/// naming it.
pub(crate) fn read_name_lines(
    list: &Path,
    form: &str,
) -> Result<Vec<(usize, Vec<String>)>, String> {
    let count = form.split_whitespace().count();
    let text = blob_runtime::read_text_file(list).map_err(|e| e.to_string())?;
    let mut lines = Vec::new();
    for (i, text) in text.lines().enumerate() {
        let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
        if words.is_empty() {
            continue;
        }
        if words.len() != count {
            return Err(format!(
                "{}, line {}: {:?} is not {count} names (each line is `{form}`)",
                list.display(),
                i + 1,
                blob_proto::excerpt(text)
            ));
        }
        lines.push((i + 1, words));
    }
    Ok(lines)
}
