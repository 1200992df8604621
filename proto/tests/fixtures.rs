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
