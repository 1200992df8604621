//! Every Caffe-written file in the repository's `tests/fixtures/` decodes,
//! and encodes back to exactly the bytes Caffe wrote.

use std::path::{Path, PathBuf};

use blob_proto::{
    BlobProto, BlobProtoVector, FileFormat, NetParameter, SolverState, decode_message,
    detect_format, encode_message,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn all_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![fixtures()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if ["caffemodel", "binaryproto", "solverstate"]
                .contains(&p.extension().and_then(|x| x.to_str()).unwrap_or(""))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_fixture_round_trips_byte_for_byte() {
    let files = all_files();
    assert!(files.len() >= 15, "fixtures found: {files:?}");
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        let format = detect_format(&bytes, Some(name)).unwrap();
        let again = match format {
            FileFormat::NetParameter | FileFormat::NetParameterV1 => NetParameter::decode(&bytes)
                .unwrap()
                .encode_to_vec()
                .unwrap(),
            FileFormat::BlobProto => {
                let b: BlobProto = decode_message("BlobProto", &bytes).unwrap();
                encode_message("BlobProto", &b).unwrap()
            }
            FileFormat::BlobProtoVector => {
                let b: BlobProtoVector = decode_message("BlobProtoVector", &bytes).unwrap();
                encode_message("BlobProtoVector", &b).unwrap()
            }
            FileFormat::SolverState => {
                let s: SolverState = decode_message("SolverState", &bytes).unwrap();
                encode_message("SolverState", &s).unwrap()
            }
        };
        assert!(
            again == bytes,
            "{} ({format:?}) did not round-trip",
            path.display()
        );
    }
}

#[test]
fn formats_are_detected() {
    let f = fixtures();
    let cases = [
        (
            "lenet/lenet_iter_10000.caffemodel",
            FileFormat::NetParameter,
        ),
        (
            "lenet_v1/lenet_iter_10000.caffemodel",
            FileFormat::NetParameterV1,
        ),
        ("mtcnn_det1/det1.caffemodel", FileFormat::NetParameter),
        (
            "imagenet_mean/imagenet_mean.binaryproto",
            FileFormat::BlobProto,
        ),
        (
            "caffe-written/blob_scalar_f32.binaryproto",
            FileFormat::BlobProto,
        ),
        (
            "caffe-written/blobvec_f32_f64diff.binaryproto",
            FileFormat::BlobProtoVector,
        ),
        (
            "caffe-written/net/tiny_net_iter_10.solverstate",
            FileFormat::SolverState,
        ),
        (
            "caffe-written/net/tiny_net_iter_10.caffemodel",
            FileFormat::NetParameter,
        ),
    ];
    for (file, want) in cases {
        let p = f.join(file);
        let bytes = std::fs::read(&p).unwrap();
        let got = detect_format(&bytes, p.file_name().and_then(|n| n.to_str())).unwrap();
        assert_eq!(got, want, "{file}");
    }
}

/// Caffe's own text dumps (`*.caffemodel.prototxt`, `*.solverstate.prototxt`,
/// written by protobuf's text printer beside each binary file) read as
/// text say what the binary files say: every blob value, in order, and
/// every layer name. Every other `.prototxt` of the repository (nets,
/// solvers) reads too.
#[test]
fn caffes_text_dumps_read_as_their_binary_files() {
    use blob_proto::{TextMessage, TextValue};
    fn values(m: &TextMessage, out: &mut Vec<f32>) {
        for f in &m.fields {
            match (&f.value, f.name.as_str()) {
                (TextValue::Scalar(v), "data" | "double_data") => out.push(v.parse().unwrap()),
                (TextValue::Message(inner), _) => values(inner, out),
                _ => {}
            }
        }
    }
    let mut texts = Vec::new();
    let mut stack = vec![fixtures(), fixtures().join("../../models")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "prototxt") {
                texts.push(p);
            }
        }
    }
    assert!(texts.len() >= 10, "prototxt files found: {texts:?}");
    let mut dumps = 0;
    for path in texts {
        let text = std::fs::read_to_string(&path).unwrap();
        let message =
            TextMessage::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // `x.caffemodel.prototxt` dumps `x.caffemodel`; `x.prototxt`
        // beside `x.binaryproto` dumps that.
        let mut binary = path.with_extension("");
        if binary.extension().is_none() && path.with_extension("binaryproto").exists() {
            binary = path.with_extension("binaryproto");
        }
        let kind = binary.extension().and_then(|x| x.to_str()).unwrap_or("");
        let mut from_text = Vec::new();
        values(&message, &mut from_text);
        let bytes = match kind {
            "caffemodel" | "solverstate" | "binaryproto" => std::fs::read(&binary).unwrap(),
            _ => continue,
        };
        let (blobs, names): (Vec<BlobProto>, Vec<String>) = match kind {
            "caffemodel" => {
                let net = NetParameter::decode(&bytes).unwrap();
                let names = net.iter_layers().map(|l| l.name().to_string()).collect();
                (
                    net.iter_layers().flat_map(|l| l.blobs().to_vec()).collect(),
                    names,
                )
            }
            "solverstate" => {
                let s: SolverState = decode_message("SolverState", &bytes).unwrap();
                (s.history, Vec::new())
            }
            _ => (
                vec![decode_message("BlobProto", &bytes).unwrap()],
                Vec::new(),
            ),
        };
        let from_binary: Vec<f32> = blobs
            .iter()
            .flat_map(|b| {
                b.data
                    .iter()
                    .copied()
                    .chain(b.double_data.iter().map(|&d| d as f32))
            })
            .collect();
        assert!(!from_binary.is_empty(), "{}: no values", binary.display());
        // Protobuf prints floats to 9 significant digits: they read back exactly.
        assert_eq!(from_text, from_binary, "{}", path.display());
        let text_names: Vec<String> = message
            .all("layer")
            .filter_map(|l| match &l.value {
                TextValue::Message(m) => m.all("name").next().map(|n| n.value.to_string()),
                _ => None,
            })
            .collect();
        let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
        assert_eq!(text_names, quoted, "{}", path.display());
        dumps += 1;
    }
    assert!(dumps >= 8, "text dumps checked: {dumps}");
}
