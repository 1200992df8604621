//! caffe.proto's schema reader on arbitrary input: a net prototxt read
//! against it (text), and a NetParameter's bytes (binary), give a
//! message or an error, never a panic; what was read writes back as
//! bytes that read again to the same bytes.
#![no_main]

use blob_proto::{ParamMessage, ProtoError, TextMessage, schema};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(tree) = TextMessage::parse(text)
    {
        match ParamMessage::from_text(&schema::NET_PARAMETER, &tree) {
            Ok(net) => {
                let bytes = net.encode_to_vec();
                let back = ParamMessage::decode(&schema::NET_PARAMETER, &bytes).unwrap();
                assert_eq!(back.encode_to_vec(), bytes);
            }
            Err(ProtoError::Text { line, .. }) => {
                assert!(line >= 1 && line <= text.matches('\n').count() + 1);
            }
            Err(other) => panic!("a text error without its line: {other}"),
        }
    }
    if let Ok(net) = ParamMessage::decode(&schema::NET_PARAMETER, data) {
        let bytes = net.encode_to_vec();
        let back = ParamMessage::decode(&schema::NET_PARAMETER, &bytes).unwrap();
        assert_eq!(back.encode_to_vec(), bytes);
    }
});
