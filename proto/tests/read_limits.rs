//! The readers' limits are the process's: refused at the default, read
//! once raised. Its own test binary, since it changes them.

use blob_proto::{MAX_LAYERS, MAX_TEXT_FIELDS, NetParameter, ReadLimits, TextMessage};

#[test]
fn a_raised_limit_reads_what_the_default_refuses() {
    // layer { name: "a" }: field 100, 3 bytes, one more than the limit.
    let net = [0xa2, 0x06, 0x03, 0x0a, 0x01, b'a'].repeat(MAX_LAYERS + 1);
    let text = "layer {}\n".repeat(MAX_TEXT_FIELDS + 1);

    let err = NetParameter::decode(&net).unwrap_err().to_string();
    assert!(err.contains("more than 100000 layers"), "{err}");
    assert!(err.contains("ReadLimits raises the limit"), "{err}");
    let err = TextMessage::parse(&text).unwrap_err().to_string();
    assert!(err.contains("more than 200000 fields"), "{err}");

    ReadLimits {
        layers: MAX_LAYERS + 1,
        text_fields: MAX_TEXT_FIELDS + 1,
        ..ReadLimits::default()
    }
    .set();
    let read = NetParameter::decode(&net).map(|n| n.iter_layers().count());
    let parsed = TextMessage::parse(&text).map(|m| m.fields.len());
    ReadLimits::default().set();
    assert_eq!(read.unwrap(), MAX_LAYERS + 1);
    assert_eq!(parsed.unwrap(), MAX_TEXT_FIELDS + 1);
}
