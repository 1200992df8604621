//! The SSD fork's `LabelMap` (`labelmap_voc.prototxt`: `item { name:
//! "dog" label: 12 display_name: "dog" }`) and the lookups its tools and
//! layers make of it (`MapNameToLabel`, `MapLabelToName`).

use std::collections::{BTreeMap, HashMap};

use crate::schema;
use crate::{ParamMessage, TextMessage};

/// One `item` of a label map.
#[derive(Clone, Debug, PartialEq)]
pub struct LabelItem {
    /// The name annotations use (`"dog"`).
    pub name: String,
    /// The class index.
    pub label: i32,
    /// The name to show (`display_name`; empty if not given).
    pub display_name: String,
}

/// A label map, its items in file order.
///
/// ```
/// use blob_proto::LabelMap;
/// let map = LabelMap::parse(r#"item { name: "background" label: 0 } item { name: "dog" label: 12 }"#)?;
/// assert_eq!(map.name_to_label(true)?["dog"], 12);
/// assert_eq!(map.label_to_name(true)?[&12], "dog");
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelMap {
    /// The `item`s.
    pub items: Vec<LabelItem>,
}

impl LabelMap {
    /// Reads a label map from its text format; an error names the line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let tree = TextMessage::parse(text).map_err(|e| e.to_string())?;
        let map = ParamMessage::from_text(&schema::LABEL_MAP, &tree).map_err(|e| e.to_string())?;
        let items = map
            .messages("item")
            .map(|item| LabelItem {
                name: item.string("name").to_string(),
                label: item.int("label") as i32,
                display_name: item.string("display_name").to_string(),
            })
            .collect();
        Ok(Self { items })
    }

    /// Each name's label (the fork's `MapNameToLabel`). With `strict`, a
    /// name or a label given twice is refused, as the fork refuses it;
    /// without, the last one counts.
    pub fn name_to_label(&self, strict: bool) -> Result<HashMap<String, i32>, String> {
        let mut names = HashMap::new();
        let mut labels = HashMap::new();
        for item in &self.items {
            if strict {
                if names.contains_key(&item.name) {
                    return Err(format!("{:?} is given twice", item.name));
                }
                if let Some(other) = labels.insert(item.label, item.name.clone()) {
                    return Err(format!(
                        "label {} is given to {other:?} and {:?}",
                        item.label, item.name
                    ));
                }
            }
            names.insert(item.name.clone(), item.label);
        }
        Ok(names)
    }

    /// Each label's name (the fork's `MapLabelToName`). With `strict`, a
    /// label given twice is refused; without, the last one counts.
    pub fn label_to_name(&self, strict: bool) -> Result<BTreeMap<i32, String>, String> {
        let mut names = BTreeMap::new();
        for item in &self.items {
            if let Some(other) = names.insert(item.label, item.name.clone())
                && strict
            {
                return Err(format!(
                    "label {} is given to {other:?} and {:?}",
                    item.label, item.name
                ));
            }
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_refused_only_when_strict() {
        let map = LabelMap::parse(
            "item { name: \"a\" label: 1 }\nitem { name: \"b\" label: 1 display_name: \"B\" }",
        )
        .unwrap();
        assert_eq!(map.items[1].display_name, "B");
        let err = map.label_to_name(true).unwrap_err();
        assert!(err.contains("label 1 is given to \"a\" and \"b\""), "{err}");
        assert_eq!(map.label_to_name(false).unwrap()[&1], "b");
        assert!(map.name_to_label(true).is_err());
        assert_eq!(map.name_to_label(false).unwrap()["a"], 1);
        let err = LabelMap::parse("item { name: \"a\" lable: 1 }").unwrap_err();
        assert!(err.contains("lable"), "{err}");
    }
}
