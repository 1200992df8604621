//! caffe.proto's schema reader on arbitrary input, with the forks'
//! parameter fields the layer registry adds: a net prototxt read against
//! it (text), and a NetParameter's bytes (binary), give a message or an
//! error, never a panic; what was read writes back as bytes that read
//! again to the same bytes.
#![no_main]

use std::sync::OnceLock;

use blob_proto::schema::MessageSchema;
use blob_proto::{ParamMessage, ProtoError, TextMessage};
use libfuzzer_sys::fuzz_target;

/// `NetParameter` as the registry reads it (Caffe's and the forks' fields).
fn net_parameter() -> &'static MessageSchema {
    static NET: OnceLock<&'static MessageSchema> = OnceLock::new();
    NET.get_or_init(|| {
        blob_layers::registry::LayerRegistry::<f32>::with_caffe_layers()
            .schemas()
            .net_parameter()
    })
}

fuzz_target!(|data: &[u8]| {
    let net_parameter = net_parameter();
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(tree) = TextMessage::parse(text)
    {
        match ParamMessage::from_text(net_parameter, &tree) {
            Ok(net) => {
                let bytes = net.encode_to_vec();
                let back = ParamMessage::decode(net_parameter, &bytes).unwrap();
                assert_eq!(back.encode_to_vec(), bytes);
            }
            Err(ProtoError::Text { line, .. }) => {
                assert!(line >= 1 && line <= text.matches('\n').count() + 1);
            }
            Err(other) => panic!("a text error without its line: {other}"),
        }
    }
    if let Ok(net) = ParamMessage::decode(net_parameter, data) {
        let bytes = net.encode_to_vec();
        let back = ParamMessage::decode(net_parameter, &bytes).unwrap();
        assert_eq!(back.encode_to_vec(), bytes);
    }
});
