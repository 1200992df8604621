//! A misspelt field in a real net definition is refused with its line.
//! (Every shipped net reading and round-tripping against the messages
//! the layer registry knows is `layers/tests/net_init.rs`'s.)

use std::path::Path;

use blob_proto::{ParamMessage, TextMessage, schema};

#[test]
fn a_misspelt_field_in_a_real_net_names_its_line() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/nets/mtcnn/det2.prototxt");
    let text = std::fs::read_to_string(file).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("kernel_size"))
        .unwrap()
        + 1;
    let bad = text.replacen("kernel_size", "kernal_size", 1);
    let err = ParamMessage::from_text(&schema::NET_PARAMETER, &TextMessage::parse(&bad).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("line {line}, "))
            && err.ends_with("ConvolutionParameter has no field named kernal_size"),
        "{err}"
    );
}
