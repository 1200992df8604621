//! Protobuf's text format as Caffe's `.prototxt` files write it, read into
//! a tree of fields that keeps where each one stands, for readers that
//! map it onto their own types and name the line of a bad value.

use crate::ProtoError;
use crate::limits::{ReadLimits, over_limit};

/// A message in text format: its fields in file order, a repeated field
/// once per value.
///
/// ```
/// use blob_proto::{TextMessage, TextValue};
/// let m = TextMessage::parse("base_lr: 0.01  # a comment\nlr_policy: \"inv\"\nparam { lr_mult: 2 }")?;
/// assert_eq!(m.fields[0].name, "base_lr");
/// assert_eq!(m.fields[0].value, TextValue::Scalar("0.01".into()));
/// assert_eq!(m.fields[1].value, TextValue::Str("inv".into()));
/// assert_eq!(m.fields[2].line, 3);
/// let bad = TextMessage::parse("base_lr 0.01").unwrap_err();
/// assert_eq!(bad.to_string(), "line 1, column 9: expected ':' or '{' after base_lr, found 0.01");
/// # Ok::<(), blob_proto::ProtoError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TextMessage {
    /// The fields, in the order the text gives them.
    pub fields: Vec<TextField>,
}

/// One field of a [`TextMessage`].
#[derive(Clone, Debug, PartialEq)]
pub struct TextField {
    /// The field's name, e.g. `base_lr`.
    pub name: String,
    /// The line it starts on, from 1.
    pub line: usize,
    /// The column its name starts at, in bytes from 1.
    pub column: usize,
    /// Its value.
    pub value: TextValue,
}

/// A field's value.
#[derive(Clone, Debug, PartialEq)]
pub enum TextValue {
    /// An unquoted token: a number, `true`/`false` or an enum name.
    Scalar(String),
    /// A quoted string, escapes resolved; adjacent strings joined.
    Str(String),
    /// A nested message.
    Message(TextMessage),
}

/// Nesting deeper than this is refused rather than followed (Caffe's
/// reader stops at 100).
const MAX_DEPTH: usize = 100;

impl TextField {
    /// An error about this field: `line L, column C: detail`.
    ///
    /// ```
    /// let m = blob_proto::TextMessage::parse("a: 1\n  b: x")?;
    /// assert_eq!(m.fields[1].error("no field b").to_string(), "line 2, column 3: no field b");
    /// # Ok::<(), blob_proto::ProtoError>(())
    /// ```
    pub fn error(&self, detail: impl Into<String>) -> ProtoError {
        ProtoError::Text {
            line: self.line,
            column: self.column,
            detail: detail.into(),
        }
    }
}

impl TextMessage {
    /// Reads a message in text format. Errors name the line and column
    /// and what was expected there.
    pub fn parse(text: &str) -> Result<Self, ProtoError> {
        let mut reader = Reader {
            text: text.as_bytes(),
            at: 0,
            line: 1,
            line_start: 0,
            fields: 0,
            max_fields: ReadLimits::current().text_fields,
        };
        let message = reader.message(0, None)?;
        Ok(message)
    }

    /// The fields named `name`, in order.
    ///
    /// ```
    /// let m = blob_proto::TextMessage::parse("stepvalue: 10 stepvalue: 20")?;
    /// assert_eq!(m.all("stepvalue").count(), 2);
    /// # Ok::<(), blob_proto::ProtoError>(())
    /// ```
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a TextField> + 'a {
        self.fields.iter().filter(move |f| f.name == name)
    }
}

impl std::fmt::Display for TextValue {
    /// The value as the text wrote it (a message as `{...}`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Scalar(s) => f.write_str(s),
            Self::Str(s) => write!(f, "{s:?}"),
            Self::Message(_) => f.write_str("{...}"),
        }
    }
}

struct Reader<'a> {
    text: &'a [u8],
    at: usize,
    line: usize,
    line_start: usize,
    /// Fields read so far, nested ones included.
    fields: usize,
    /// The most it may read.
    max_fields: usize,
}

/// Bytes that end an unquoted token.
fn ends_token(b: u8) -> bool {
    b.is_ascii_whitespace() || b"{}<>[],;:#\"'".contains(&b)
}

impl Reader<'_> {
    /// Counts one more field (or list value) against
    /// [`ReadLimits::text_fields`].
    fn count_field(&mut self) -> Result<(), ProtoError> {
        self.fields += 1;
        if self.fields > self.max_fields {
            return Err(self.error(over_limit(self.max_fields, "fields")));
        }
        Ok(())
    }

    fn error(&self, detail: String) -> ProtoError {
        ProtoError::Text {
            line: self.line,
            column: self.at - self.line_start + 1,
            detail,
        }
    }

    /// "expected ..., found ..." at the cursor.
    fn unexpected(&mut self, expected: String) -> ProtoError {
        let found = self.found();
        self.error(format!("{expected}, found {found}"))
    }

    /// Skips whitespace and `#` comments.
    fn skip_blank(&mut self) {
        while let Some(&b) = self.text.get(self.at) {
            if b == b'#' {
                while self.text.get(self.at).is_some_and(|&c| c != b'\n') {
                    self.at += 1;
                }
            } else if b.is_ascii_whitespace() {
                self.at += 1;
                if b == b'\n' {
                    self.line += 1;
                    self.line_start = self.at;
                }
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_blank();
        self.text.get(self.at).copied()
    }

    /// What stands at the cursor, for messages.
    fn found(&mut self) -> String {
        match self.peek() {
            None => "the end of the text".into(),
            Some(b) if ends_token(b) && !b.is_ascii_whitespace() => format!("'{}'", b as char),
            Some(_) => {
                // At most 60 bytes of it: a hostile file's token may be
                // 100 MB long.
                const SHOWN: usize = 60;
                let start = self.at;
                let end = (start..self.text.len())
                    .find(|&i| ends_token(self.text[i]))
                    .unwrap_or(self.text.len());
                let shown = &self.text[start..end.min(start + SHOWN)];
                let more = if end > start + SHOWN { "..." } else { "" };
                format!("{}{more}", String::from_utf8_lossy(shown))
            }
        }
    }

    /// An unquoted token (a name or a scalar).
    fn token(&mut self) -> Option<String> {
        self.skip_blank();
        let start = self.at;
        while self.text.get(self.at).is_some_and(|&b| !ends_token(b)) {
            self.at += 1;
        }
        (self.at > start).then(|| String::from_utf8_lossy(&self.text[start..self.at]).into_owned())
    }

    /// Fields until `close` (or the end of the text, at depth 0).
    fn message(&mut self, depth: usize, close: Option<u8>) -> Result<TextMessage, ProtoError> {
        if depth > MAX_DEPTH {
            return Err(self.error(format!("messages nested deeper than {MAX_DEPTH}")));
        }
        let mut message = TextMessage::default();
        loop {
            match (self.peek(), close) {
                (None, None) => return Ok(message),
                (None, Some(c)) => {
                    return Err(self.error(format!(
                        "expected '{}' to close the message, found the end of the text",
                        c as char
                    )));
                }
                (Some(b), Some(c)) if b == c => {
                    self.at += 1;
                    return Ok(message);
                }
                _ => {}
            }
            self.field(depth, &mut message)?;
            if matches!(self.peek(), Some(b',' | b';')) {
                self.at += 1;
            }
        }
    }

    /// One field (a list gives one field per value) into `message`.
    fn field(&mut self, depth: usize, message: &mut TextMessage) -> Result<(), ProtoError> {
        self.skip_blank();
        let (line, column) = (self.line, self.at - self.line_start + 1);
        let start = (self.at, self.line, self.line_start);
        let name = match self.token() {
            Some(name) if is_name(&name) => name,
            _ => {
                // Point at what stands where the name should.
                (self.at, self.line, self.line_start) = start;
                return Err(self.unexpected("expected a field name".into()));
            }
        };
        let colon = self.peek() == Some(b':');
        if colon {
            self.at += 1;
        }
        self.count_field()?;
        let mut push = |value| {
            message.fields.push(TextField {
                name: name.clone(),
                line,
                column,
                value,
            })
        };
        match self.peek() {
            Some(b'[') if colon => {
                self.at += 1;
                if self.peek() == Some(b']') {
                    self.at += 1;
                    return Ok(());
                }
                loop {
                    self.count_field()?;
                    push(self.value(depth, &name)?);
                    match self.peek() {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(());
                        }
                        _ => {
                            return Err(self.unexpected(format!(
                                "expected ',' or ']' in the list of {}",
                                crate::excerpt(&name)
                            )));
                        }
                    }
                }
            }
            Some(b'{' | b'<') => push(self.value(depth, &name)?),
            _ if colon => push(self.value(depth, &name)?),
            _ => {
                return Err(self.unexpected(format!(
                    "expected ':' or '{{' after {}",
                    crate::excerpt(&name)
                )));
            }
        }
        Ok(())
    }

    /// A scalar, a string or a nested message.
    fn value(&mut self, depth: usize, name: &str) -> Result<TextValue, ProtoError> {
        match self.peek() {
            Some(open @ (b'{' | b'<')) => {
                self.at += 1;
                let close = if open == b'{' { b'}' } else { b'>' };
                Ok(TextValue::Message(self.message(depth + 1, Some(close))?))
            }
            Some(b'"' | b'\'') => {
                let opened = (self.at, self.line, self.line_start);
                let mut joined = Vec::new();
                while let Some(quote @ (b'"' | b'\'')) = self.peek() {
                    self.at += 1;
                    self.string(quote, &mut joined)?;
                }
                String::from_utf8(joined).map(TextValue::Str).map_err(|_| {
                    (self.at, self.line, self.line_start) = opened;
                    self.error(format!(
                        "the string of {} is not UTF-8",
                        crate::excerpt(name)
                    ))
                })
            }
            _ => match self.token() {
                Some(token) => Ok(TextValue::Scalar(token)),
                None => {
                    Err(self.unexpected(format!("expected a value for {}", crate::excerpt(name))))
                }
            },
        }
    }

    /// The rest of a string opened by `quote`, escapes resolved.
    fn string(&mut self, quote: u8, out: &mut Vec<u8>) -> Result<(), ProtoError> {
        loop {
            let Some(&b) = self.text.get(self.at) else {
                return Err(self.error("a string runs to the end of the text".into()));
            };
            self.at += 1;
            match b {
                b'\n' => {
                    self.at -= 1;
                    return Err(self.error("a string runs to the end of its line".into()));
                }
                _ if b == quote => return Ok(()),
                b'\\' => {
                    let Some(&e) = self.text.get(self.at) else {
                        return Err(self.error("a string runs to the end of the text".into()));
                    };
                    self.at += 1;
                    out.push(match e {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        b'a' => 0x07,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'v' => 0x0b,
                        b'\\' | b'\'' | b'"' | b'?' => e,
                        b'x' => self.digits(16, 2)?,
                        b'0'..=b'7' => {
                            self.at -= 1;
                            self.digits(8, 3)?
                        }
                        _ => {
                            self.at -= 2;
                            return Err(
                                self.error(format!("unknown escape '\\{}' in a string", e as char))
                            );
                        }
                    });
                }
                _ => out.push(b),
            }
        }
    }

    /// Up to `most` digits of `radix` as one byte (`\x41`, `\101`).
    fn digits(&mut self, radix: u32, most: usize) -> Result<u8, ProtoError> {
        let mut value = 0u32;
        let mut count = 0;
        while count < most {
            let Some(d) = self
                .text
                .get(self.at)
                .and_then(|&b| (b as char).to_digit(radix))
            else {
                break;
            };
            value = value * radix + d;
            self.at += 1;
            count += 1;
        }
        match u8::try_from(value) {
            Ok(byte) if count > 0 => Ok(byte),
            _ => Err(self.error("a numeric escape in a string is not one byte".into())),
        }
    }
}

/// A field name: a letter or `_`, then letters, digits and `_`.
fn is_name(token: &str) -> bool {
    let mut chars = token.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> TextMessage {
        TextMessage::parse(text).unwrap()
    }

    fn error(text: &str) -> String {
        TextMessage::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn reads_caffe_solver_syntax() {
        let m = parse(
            "net: \"lenet_train_test.prototxt\"\n# comment\ntest_iter: 20\nbase_lr: 0.01\n\
             lr_policy: \"inv\"\nsolver_mode: CPU\nstepvalue: [10, 20]\nparam { lr_mult: 1 } param < lr_mult: 2 >;\n",
        );
        let names: Vec<&str> = m.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "net",
                "test_iter",
                "base_lr",
                "lr_policy",
                "solver_mode",
                "stepvalue",
                "stepvalue",
                "param",
                "param"
            ]
        );
        assert_eq!(m.fields[4].value, TextValue::Scalar("CPU".into()));
        assert_eq!(m.fields[6].value, TextValue::Scalar("20".into()));
        assert_eq!(m.fields[7].line, 8);
        let TextValue::Message(inner) = &m.fields[8].value else {
            panic!("param is a message");
        };
        assert_eq!(inner.fields[0].value, TextValue::Scalar("2".into()));
    }

    #[test]
    fn strings_resolve_escapes_and_join() {
        let m = parse(r#"s: "a\"b\n" 'c\x41\101'"#);
        assert_eq!(m.fields[0].value, TextValue::Str("a\"b\ncAA".into()));
    }

    #[test]
    fn a_long_field_name_is_cut_short_in_errors() {
        let name = "x".repeat(5000);
        for text in [
            format!("{name} 1"),
            format!("{name}: [1 2]"),
            format!("{name}:"),
        ] {
            let e = error(&text);
            assert!(e.len() < 200, "{} bytes: {e}", e.len());
            assert!(e.contains("xxx..."), "{e}");
        }
    }

    #[test]
    fn errors_name_the_line_column_and_what_was_found() {
        assert_eq!(
            error("a: 1\nb {\n c: 2"),
            "line 3, column 6: expected '}' to close the message, found the end of the text"
        );
        assert_eq!(
            error("a: 1\n}"),
            "line 2, column 1: expected a field name, found '}'"
        );
        assert_eq!(
            error("a: \"open"),
            "line 1, column 9: a string runs to the end of the text"
        );
        assert_eq!(
            error("a: [1 2]"),
            "line 1, column 7: expected ',' or ']' in the list of a, found 2"
        );
        assert_eq!(
            error("a:"),
            "line 1, column 3: expected a value for a, found the end of the text"
        );
        assert_eq!(
            error("[ext]: 1"),
            "line 1, column 1: expected a field name, found '['"
        );
        assert_eq!(
            error("a: x\n2\n"),
            "line 2, column 1: expected a field name, found 2"
        );
        assert_eq!(
            error("s: \"\\q\""),
            "line 1, column 5: unknown escape '\\q' in a string"
        );
        assert_eq!(
            error("s: \"\\xff\""),
            "line 1, column 4: the string of s is not UTF-8"
        );
        let deep = "a {".repeat(MAX_DEPTH + 2);
        assert!(error(&deep).contains("nested deeper than 100"));
    }
}
