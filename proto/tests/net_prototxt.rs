//! Every real net definition the repository carries reads against
//! Caffe's schema, and a misspelt field in one is refused with its line.

use std::path::Path;

use blob_proto::{ParamMessage, TextMessage, schema};

fn net_files() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/nets");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "prototxt") {
                files.push(f);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_shipped_net_reads_against_the_schema() {
    let files = net_files();
    assert!(files.len() >= 9, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let tree = TextMessage::parse(&text).unwrap();
        let net = ParamMessage::from_text(&schema::NET_PARAMETER, &tree)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let layers = net.messages("layer").count();
        assert!(layers >= 10, "{}: {layers} layers", file.display());
        let bytes = net.encode_to_vec();
        let back = ParamMessage::decode(&schema::NET_PARAMETER, &bytes).unwrap();
        assert_eq!(back.encode_to_vec(), bytes, "{}", file.display());
        assert!(back.unknown_fields().is_empty());
    }
}

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
