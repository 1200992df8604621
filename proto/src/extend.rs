//! Caffe's messages with fields `caffe.proto` lacks: a fork's layer
//! parameters (`interp_param`, `ceil_mode` in `pooling_param`, ...) and a
//! user's own, registered at run time and read, written and defaulted
//! like Caffe's own.
//!
//! Schemas are `&'static` tables compared by address, so an extended
//! message is a new table: every message on the way from `NetParameter`
//! (and `SolverParameter`) down to an extended one is copied once with
//! its extended children, and the copies are kept for the life of the
//! process, one set per distinct list of extensions. Messages no
//! extension reaches stay Caffe's own tables.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use crate::ProtoError;
use crate::schema::{FieldKind, FieldSchema, MessageSchema, NET_PARAMETER, SOLVER_PARAMETER};

/// A field added to a message of `caffe.proto`.
#[derive(Clone, Copy, Debug)]
pub struct Extension {
    /// The message it extends, as `caffe.proto` declares it (e.g.
    /// [`LAYER_PARAMETER`](crate::schema::LAYER_PARAMETER)).
    pub message: &'static MessageSchema,
    /// The field.
    pub field: FieldSchema,
}

/// The messages a reader knows: Caffe's `caffe.proto` and the fields
/// registered on top of it (Caffe keeps them in the generated
/// `caffe.pb.h` of each fork; here they are added without recompiling).
///
/// ```
/// use blob_proto::schema::{self, FieldDefault, FieldKind, FieldSchema, MessageSchema};
/// use blob_proto::{ParamMessage, Schemas, TextMessage};
///
/// static GAIN: MessageSchema = MessageSchema {
///     name: "GainParameter",
///     fields: &[FieldSchema::optional("gain", 1, FieldKind::Float).with_default(FieldDefault::Float(2.0))],
/// };
/// let mut schemas = Schemas::caffe();
/// schemas.extend(&schema::LAYER_PARAMETER, FieldSchema::optional("gain_param", 5001, FieldKind::Message(&GAIN)))?;
///
/// let text = TextMessage::parse(r#"layer { name: "g" type: "Gain" gain_param { } }"#)?;
/// let net = ParamMessage::from_text(schemas.net_parameter(), &text)?;
/// let layer = net.messages("layer").next().unwrap();
/// assert_eq!(layer.message("gain_param").unwrap().float("gain"), 2.0);
///
/// // Caffe's own tables do not know it.
/// assert!(ParamMessage::from_text(&schema::NET_PARAMETER, &text).is_err());
/// # Ok::<(), blob_proto::ProtoError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Schemas {
    extensions: Vec<Extension>,
    tables: &'static Tables,
}

/// One set of extended tables.
#[derive(Debug)]
struct Tables {
    net: &'static MessageSchema,
    solver: &'static MessageSchema,
    /// Caffe's table's address to its extended copy, for those copied.
    copies: HashMap<usize, &'static MessageSchema>,
}

impl Default for Schemas {
    fn default() -> Self {
        Self::caffe()
    }
}

impl Schemas {
    /// `caffe.proto` alone (BVLC's messages and the SSD fork's).
    pub fn caffe() -> Self {
        static CAFFE: OnceLock<Tables> = OnceLock::new();
        Self {
            extensions: Vec::new(),
            tables: CAFFE.get_or_init(|| Tables {
                net: &NET_PARAMETER,
                solver: &SOLVER_PARAMETER,
                copies: HashMap::new(),
            }),
        }
    }

    /// Adds `field` to `message`. Registering the same field again is a
    /// no-op; a name or number the message already uses for another field
    /// is an error, as is a message no net or solver holds.
    pub fn extend(
        &mut self,
        message: &'static MessageSchema,
        field: FieldSchema,
    ) -> Result<(), ProtoError> {
        let invalid = |detail: String| ProtoError::Invalid {
            at: message.name.into(),
            detail,
        };
        if !reachable().contains(&address(message)) {
            return Err(invalid(format!(
                "{} is not a message of a NetParameter or a SolverParameter, so no file \
                 could hold field {}",
                message.name, field.name
            )));
        }
        let existing = message.fields.iter().chain(
            self.extensions
                .iter()
                .filter(|e| std::ptr::eq(e.message, message))
                .map(|e| &e.field),
        );
        for other in existing {
            let same_name = other.name == field.name;
            let same_number = other.number == field.number;
            if same_name && same_number && key_of_field(other) == key_of_field(&field) {
                return Ok(());
            }
            if same_name || same_number {
                return Err(invalid(format!(
                    "{} (field {}) clashes with {} (field {}), which {} already has",
                    field.name, field.number, other.name, other.number, message.name
                )));
            }
        }
        self.extensions.push(Extension { message, field });
        self.tables = tables_for(&self.extensions);
        Ok(())
    }

    /// The registered fields, in the order added.
    pub fn extensions(&self) -> &[Extension] {
        &self.extensions
    }

    /// `NetParameter` with the extensions: what a `.prototxt` is read
    /// against.
    pub fn net_parameter(&self) -> &'static MessageSchema {
        self.tables.net
    }

    /// `SolverParameter` with the extensions (its inline nets included).
    pub fn solver_parameter(&self) -> &'static MessageSchema {
        self.tables.solver
    }

    /// `LayerParameter` with the extensions.
    pub fn layer_parameter(&self) -> &'static MessageSchema {
        self.message(&crate::schema::LAYER_PARAMETER)
    }

    /// The extended copy of one of Caffe's messages (the message itself
    /// where no extension reaches it).
    pub fn message(&self, caffe: &'static MessageSchema) -> &'static MessageSchema {
        self.tables
            .copies
            .get(&address(caffe))
            .copied()
            .unwrap_or(caffe)
    }
}

fn address(m: &MessageSchema) -> usize {
    m as *const MessageSchema as usize
}

/// The messages a net or solver file can hold, by address.
fn reachable() -> &'static HashSet<usize> {
    static REACHABLE: OnceLock<HashSet<usize>> = OnceLock::new();
    REACHABLE.get_or_init(|| {
        let mut seen = HashSet::new();
        let mut stack = vec![&NET_PARAMETER, &SOLVER_PARAMETER];
        while let Some(m) = stack.pop() {
            if seen.insert(address(m)) {
                for f in m.fields {
                    if let FieldKind::Message(child) = f.kind {
                        stack.push(child);
                    }
                }
            }
        }
        seen
    })
}

/// What makes two fields the same field: everything but the address.
fn key_of_field(f: &FieldSchema) -> String {
    let kind = match f.kind {
        FieldKind::Message(m) => format!("message@{:x}", address(m)),
        FieldKind::Enum(e) => format!("enum@{:x}", e as *const _ as usize),
        scalar => format!("{scalar:?}"),
    };
    format!(
        "{}/{}/{:?}/{kind}/{:?}",
        f.name, f.number, f.label, f.default
    )
}

/// The tables for a list of extensions: built once per distinct list and
/// kept, so registries built again and again (a `Net` per call) share them.
fn tables_for(extensions: &[Extension]) -> &'static Tables {
    static BUILT: Mutex<Vec<(Vec<String>, &'static Tables)>> = Mutex::new(Vec::new());
    let key: Vec<String> = extensions
        .iter()
        .map(|e| format!("{:x}:{}", address(e.message), key_of_field(&e.field)))
        .collect();
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, tables)) = built.iter().find(|(k, _)| *k == key) {
        return tables;
    }
    let mut copier = Copier {
        extensions,
        done: HashMap::new(),
        visiting: HashSet::new(),
    };
    let net = copier.copy(&NET_PARAMETER).unwrap_or(&NET_PARAMETER);
    let solver = copier.copy(&SOLVER_PARAMETER).unwrap_or(&SOLVER_PARAMETER);
    let copies = copier
        .done
        .into_iter()
        .filter_map(|(at, copy)| copy.map(|c| (at, c)))
        .collect();
    let tables: &'static Tables = Box::leak(Box::new(Tables {
        net,
        solver,
        copies,
    }));
    built.push((key, tables));
    tables
}

struct Copier<'e> {
    extensions: &'e [Extension],
    /// Each message seen: its copy, or `None` where nothing changed.
    done: HashMap<usize, Option<&'static MessageSchema>>,
    visiting: HashSet<usize>,
}

impl Copier<'_> {
    /// The message's extended copy, or `None` where no extension reaches it.
    fn copy(&mut self, m: &'static MessageSchema) -> Option<&'static MessageSchema> {
        let at = address(m);
        if let Some(done) = self.done.get(&at) {
            return *done;
        }
        if !self.visiting.insert(at) {
            return None;
        }
        let children: Vec<Option<&'static MessageSchema>> = m
            .fields
            .iter()
            .map(|f| match f.kind {
                FieldKind::Message(child) => self.copy(child),
                _ => None,
            })
            .collect();
        let own: Vec<FieldSchema> = self
            .extensions
            .iter()
            .filter(|e| std::ptr::eq(e.message, m))
            .map(|e| e.field)
            .collect();
        self.visiting.remove(&at);
        let copy = if own.is_empty() && children.iter().all(Option::is_none) {
            None
        } else {
            let fields: Vec<FieldSchema> = m
                .fields
                .iter()
                .zip(&children)
                .map(|(f, child)| match child {
                    Some(c) => FieldSchema {
                        kind: FieldKind::Message(c),
                        ..*f
                    },
                    None => *f,
                })
                .chain(own)
                .collect();
            let fields: &'static [FieldSchema] = Box::leak(fields.into_boxed_slice());
            Some(&*Box::leak(Box::new(MessageSchema {
                name: m.name,
                fields,
            })))
        };
        self.done.insert(at, copy);
        copy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{FieldDefault, LAYER_PARAMETER, POOLING};
    use crate::{ParamMessage, ParamValue, TextMessage};

    static PLAIN: MessageSchema = MessageSchema {
        name: "PlainParameter",
        fields: &[FieldSchema::optional("k", 1, FieldKind::Int32)],
    };

    fn plain() -> FieldSchema {
        FieldSchema::optional("plain_param", 7001, FieldKind::Message(&PLAIN))
    }

    #[test]
    fn a_field_inside_a_caffe_message_reads_and_round_trips() {
        let mut s = Schemas::caffe();
        s.extend(
            &POOLING,
            FieldSchema::optional("ceil_mode", 1013, FieldKind::Bool)
                .with_default(FieldDefault::Bool(true)),
        )
        .unwrap();
        let text = TextMessage::parse(
            "layer { name: 'p' type: 'Pooling' pooling_param { kernel_size: 2 ceil_mode: false } }",
        )
        .unwrap();
        let net = ParamMessage::from_text(s.net_parameter(), &text).unwrap();
        let back = ParamMessage::decode(s.net_parameter(), &net.encode_to_vec()).unwrap();
        let pool = back
            .messages("layer")
            .next()
            .unwrap()
            .message("pooling_param");
        assert!(!pool.unwrap().boolean("ceil_mode"));
        assert!(ParamMessage::new(s.message(&POOLING)).boolean("ceil_mode"));
        // Untouched messages stay Caffe's tables.
        assert!(std::ptr::eq(
            s.message(&crate::schema::CONVOLUTION),
            &crate::schema::CONVOLUTION
        ));
    }

    #[test]
    fn the_same_extensions_share_one_set_of_tables() {
        let mut a = Schemas::caffe();
        let mut b = Schemas::caffe();
        a.extend(&LAYER_PARAMETER, plain()).unwrap();
        b.extend(&LAYER_PARAMETER, plain()).unwrap();
        b.extend(&LAYER_PARAMETER, plain()).unwrap();
        assert!(std::ptr::eq(a.net_parameter(), b.net_parameter()));
        assert_eq!(b.extensions().len(), 1);
        assert!(!std::ptr::eq(a.net_parameter(), &NET_PARAMETER));
        // The solver's inline nets know the field too.
        let net = a.solver_parameter().field("net_param").unwrap();
        assert!(matches!(net.kind, FieldKind::Message(m) if std::ptr::eq(m, a.net_parameter())));
    }

    #[test]
    fn clashing_names_and_numbers_are_refused() {
        let mut s = Schemas::caffe();
        let by_number = FieldSchema::optional("my_conv", 106, FieldKind::Message(&PLAIN));
        let err = s
            .extend(&LAYER_PARAMETER, by_number)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("my_conv (field 106) clashes with convolution_param (field 106)"),
            "{err}"
        );
        s.extend(&LAYER_PARAMETER, plain()).unwrap();
        let by_name = FieldSchema::optional("plain_param", 7002, FieldKind::Int32);
        let err = s.extend(&LAYER_PARAMETER, by_name).unwrap_err().to_string();
        assert!(
            err.contains("clashes with plain_param (field 7001)"),
            "{err}"
        );
        let err = s.extend(&PLAIN, plain()).unwrap_err().to_string();
        assert!(err.contains("not a message of a NetParameter"), "{err}");
    }

    #[test]
    fn bytes_of_an_unregistered_field_are_kept_and_read_once_registered() {
        let mut s = Schemas::caffe();
        s.extend(&LAYER_PARAMETER, plain()).unwrap();
        let text = TextMessage::parse("name: 'x' plain_param { k: 3 }").unwrap();
        let layer = ParamMessage::from_text(s.layer_parameter(), &text).unwrap();
        let bytes = layer.encode_to_vec();
        let caffe = ParamMessage::decode(&LAYER_PARAMETER, &bytes).unwrap();
        assert_eq!(caffe.unknown_fields().len(), 1);
        assert_eq!(caffe.encode_to_vec(), bytes);
        let known = ParamMessage::decode(s.layer_parameter(), &bytes).unwrap();
        let k = known.message("plain_param").unwrap().field("k").unwrap();
        assert_eq!(k.value, ParamValue::Int(3));
    }
}
