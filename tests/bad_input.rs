//! Damaged and hostile files: every failure is an error that says what is
//! wrong, never a panic, and no length in a file makes the reader allocate
//! beyond the input.

use std::path::PathBuf;

use blobflow::prelude::*;
use blobflow::proto::{
    BlobProto, BlobShape, FileFormat, Message, NetParameter, SolverState, decode_message,
    detect_format,
};

#[path = "support/ground_truth.rs"]
mod ground_truth;

fn fixture_files() -> Vec<PathBuf> {
    let root = ground_truth::fixtures();
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("caffemodel" | "binaryproto" | "solverstate")
            ) {
                out.push(p);
            }
        }
    }
    out
}

/// Decodes `bytes` as `format` all the way into blobs; Ok(()) or the error
/// message.
fn load(format: FileFormat, bytes: &[u8]) -> Result<(), String> {
    let to_blobs = |protos: &[BlobProto]| -> Result<(), String> {
        for p in protos {
            Blob::<f32>::from_proto(p).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    match format {
        FileFormat::NetParameter | FileFormat::NetParameterV1 => {
            let net = NetParameter::decode(bytes).map_err(|e| e.to_string())?;
            for l in net.iter_layers() {
                to_blobs(l.blobs())?;
            }
            Ok(())
        }
        FileFormat::BlobProto => {
            let b: BlobProto = decode_message("BlobProto", bytes).map_err(|e| e.to_string())?;
            to_blobs(&[b])
        }
        FileFormat::BlobProtoVector => {
            let v: blobflow::proto::BlobProtoVector =
                decode_message("BlobProtoVector", bytes).map_err(|e| e.to_string())?;
            to_blobs(&v.blobs)
        }
        FileFormat::SolverState => {
            let s: SolverState = decode_message("SolverState", bytes).map_err(|e| e.to_string())?;
            to_blobs(&s.history)
        }
    }
}

#[test]
fn truncated_files_at_every_length_of_the_first_4_kib_are_errors_not_panics() {
    let mut errors = 0;
    for path in fixture_files() {
        let bytes = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        let format = detect_format(&bytes, Some(name)).unwrap();
        for len in 0..bytes.len().min(4096) {
            let cut = &bytes[..len];
            // Detection may fail on a damaged file too: that is an error with
            // a message, and the extension still gives the format.
            let f = detect_format(cut, Some(name)).unwrap_or(format);
            match load(f, cut) {
                Ok(()) => {}
                Err(msg) => {
                    assert!(!msg.is_empty());
                    errors += 1;
                }
            }
        }
        // The whole file loads.
        load(format, &bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    assert!(
        errors > 1000,
        "truncations must mostly be refused ({errors})"
    );
}

#[test]
fn wrong_wire_types_are_named() {
    // BlobProto.data (5) as a varint.
    let err = decode_message::<BlobProto>("BlobProto", &[0x28, 0x01]).unwrap_err();
    assert!(err.to_string().contains("BlobProto.data"), "{err}");
    // BlobProto.num (1) as 32-bit.
    let err = decode_message::<BlobProto>("BlobProto", &[0x0d, 0, 0, 0, 0]).unwrap_err();
    assert!(err.to_string().contains("BlobProto.num"), "{err}");
    // A layer name that is not UTF-8.
    let err = NetParameter::decode(&[0xa2, 0x06, 0x03, 0x0a, 0x01, 0xff]).unwrap_err();
    assert!(err.to_string().contains("UTF-8"), "{err}");
}

#[test]
fn absurd_lengths_do_not_allocate() {
    // data (5), length 2^62: reserving that would abort the process.
    let mut b = vec![0x2a];
    let mut v = 1u64 << 62;
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
    let err = decode_message::<BlobProto>("BlobProto", &b).unwrap_err();
    assert!(err.to_string().contains("remain"), "{err}");
    // The same length on a net's layer.
    let mut n = vec![0xa2, 0x06];
    n.extend(&b[1..]);
    let err = NetParameter::decode(&n).unwrap_err();
    assert!(err.to_string().contains("NetParameter.layer[0]"), "{err}");
    // Packed data whose length is not a multiple of 4.
    let err = decode_message::<BlobProto>("BlobProto", &[0x2a, 0x03, 1, 2, 3]).unwrap_err();
    assert!(err.to_string().contains("multiple of 4"), "{err}");
}

#[test]
fn negative_and_overflowing_dims_are_errors() {
    let neg = BlobProto {
        shape: Some(BlobShape { dim: vec![2, -3] }),
        ..Default::default()
    };
    let err = Blob::<f32>::from_proto(&neg).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid blob shape [2, -3] in file: dim -3 is negative"
    );
    let big = BlobProto {
        shape: Some(BlobShape {
            dim: vec![1 << 40, 1 << 40],
        }),
        ..Default::default()
    };
    let err = Blob::<f32>::from_proto(&big).unwrap_err();
    assert!(err.to_string().contains("overflows"), "{err}");
    let legacy = BlobProto {
        num: Some(-1),
        channels: Some(1),
        height: Some(1),
        width: Some(1),
        ..Default::default()
    };
    assert!(Blob::<f32>::from_proto(&legacy).is_err());
    // Counts past i32 are fine as shapes (no data needed to check that).
    let wide = BlobProto {
        shape: Some(BlobShape { dim: vec![1 << 33] }),
        ..Default::default()
    };
    assert_eq!(
        blobflow::runtime::proto_shape(&wide).unwrap(),
        [1usize << 33]
    );
}

#[test]
fn count_and_data_size_must_agree() {
    let p = BlobProto {
        shape: Some(BlobShape { dim: vec![2, 3] }),
        data: vec![1.0; 5],
        ..Default::default()
    };
    let err = Blob::<f32>::from_proto(&p).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot load blob from proto: the file's data field has 5 elements but 6 are needed"
    );
    let p = BlobProto {
        shape: Some(BlobShape { dim: vec![2] }),
        data: vec![1.0; 2],
        diff: vec![1.0],
        ..Default::default()
    };
    let err = Blob::<f32>::from_proto(&p).unwrap_err();
    assert!(
        err.to_string().contains("diff field has 1 elements but 2"),
        "{err}"
    );
    let p = BlobProto {
        shape: Some(BlobShape { dim: vec![2] }),
        double_data: vec![1.0; 3],
        ..Default::default()
    };
    assert!(
        Blob::<f64>::from_proto(&p)
            .unwrap_err()
            .to_string()
            .contains("double_data")
    );
}

#[test]
fn nvcaffe_raw_data_is_read() {
    let half = [0x00u8, 0x3c, 0x00, 0xc0, 0x00, 0x38]; // 1.0, -2.0, 0.5
    let p = BlobProto {
        shape: Some(BlobShape { dim: vec![3] }),
        raw_data_type: Some(2),
        raw_data: Some(half.to_vec()),
        ..Default::default()
    };
    let back = BlobProto::decode(&p.encode_to_vec()[..]).unwrap();
    let b = Blob::<f32>::from_proto(&back).unwrap();
    assert_eq!(&*b.cpu_data().unwrap(), &[1.0, -2.0, 0.5]);
    for (ty, bytes) in [
        (1, 1.5f32.to_le_bytes().to_vec()),
        (0, 1.5f64.to_le_bytes().to_vec()),
    ] {
        let p = BlobProto {
            shape: Some(BlobShape { dim: vec![1] }),
            raw_data_type: Some(ty),
            raw_data: Some(bytes),
            ..Default::default()
        };
        assert_eq!(Blob::<f64>::from_proto(&p).unwrap().data_at(&[0]), 1.5);
    }
    let bad = BlobProto {
        shape: Some(BlobShape { dim: vec![1] }),
        raw_data_type: Some(7),
        raw_data: Some(vec![0; 4]),
        ..Default::default()
    };
    assert!(
        Blob::<f32>::from_proto(&bad)
            .unwrap_err()
            .to_string()
            .contains("raw_data_type 7")
    );
}

#[test]
fn unpacked_repeated_floats_are_read() {
    // data (5) as three separate 32-bit fields, the proto2 default encoding.
    let mut b = Vec::new();
    for v in [1.0f32, 2.0, 3.0] {
        b.push(0x2d);
        b.extend(v.to_le_bytes());
    }
    b.extend([0x3a, 0x02, 0x08, 0x03]); // shape { dim: 3 }, dims unpacked
    let p: BlobProto = decode_message("BlobProto", &b).unwrap();
    assert_eq!(p.data, [1.0, 2.0, 3.0]);
    assert_eq!(p.shape.unwrap().dim, [3]);
}

#[test]
fn oversized_messages_are_refused_when_written() {
    // Not allocated: a shape alone does not need data, but encoded_len of
    // a huge data vector is what is checked, so build one lazily sized.
    let huge = BlobProto {
        data: vec![0.0; (i32::MAX as usize) / 4 + 1],
        ..Default::default()
    };
    let err = blobflow::proto::encode_message("BlobProto", &huge).unwrap_err();
    assert!(err.to_string().contains("exceed"), "{err}");
}

#[test]
fn a_huge_shape_without_data_allocates_nothing() {
    // Found by fuzzing: the shape claimed ~2^45 elements and the file held
    // none; the reader reshaped and zero-filled before counting the data.
    let p = BlobProto {
        shape: Some(BlobShape { dim: vec![1 << 45] }),
        ..Default::default()
    };
    let err = Blob::<f32>::from_proto(&p).unwrap_err();
    assert!(
        err.to_string().contains("data field has 0 elements"),
        "{err}"
    );
    let bytes = p.encode_to_vec();
    let view = blobflow::proto::BlobProtoView::parse(&bytes).unwrap();
    let mut b = Blob::<f32>::default();
    assert!(b.load_proto_view(&view, true).is_err());
    // Neither attempt touched memory.
    assert_eq!(b.data_head(), Head::Uninitialized);
}

/// One flipped byte in a dim of a real model: the shape then disagrees
/// with the values stored. The weights API refuses it, naming the layer,
/// the blob, the shape's count and the values stored, and loads nothing
/// (`blobflow inspect` is held to the same in its own tests).
#[test]
fn a_dim_that_disagrees_with_the_data_is_refused_by_name() {
    let model = CaffeModel::from_bytes(&ground_truth::lenet_with_a_flipped_dim()).unwrap();
    let want = ground_truth::FLIPPED_DIM_ERROR;
    let err = model.layer_blobs::<f32>("conv1").unwrap_err().to_string();
    assert!(err.contains(want), "{err}");
    let mut net = blobflow::layers::net::Net::<f32>::from_file(
        concat!(env!("CARGO_MANIFEST_DIR"), "/models/lenet/lenet.prototxt"),
        blobflow::layers::net::NetState::test(),
    )
    .unwrap();
    let err = net.copy_from(&model).unwrap_err().to_string();
    // Loading into LeNet's (20, 1, 5, 5) fails on the shape first, as
    // Caffe's CopyTrainedLayersFrom does.
    assert!(
        err.contains("Source param shape is 12 1 5 5 (300)"),
        "{err}"
    );
    let mut wide = vec![
        Blob::<f32>::new(&[12, 1, 5, 5]).unwrap(),
        Blob::<f32>::new(&[20]).unwrap(),
    ];
    let err = model
        .copy_layer_into("conv1", &mut wide)
        .unwrap_err()
        .to_string();
    assert!(err.contains(want), "{err}");
    assert_eq!(
        wide[0].data_head(),
        blobflow::Head::Uninitialized,
        "nothing loaded"
    );
}

/// `n` copies of one serialized field.
fn repeated(field: &[u8], n: usize) -> Vec<u8> {
    field.repeat(n)
}

#[test]
fn counts_no_caffe_file_reaches_are_refused_before_they_fill_memory() {
    use blobflow::proto::{MAX_FIELDS, MAX_LAYERS, MAX_TEXT_FIELDS, TextMessage};
    // layer { name: "a" }: field 100, 3 bytes.
    let layer = [0xa2, 0x06, 0x03, 0x0a, 0x01, b'a'];
    let at_limit = repeated(&layer, MAX_LAYERS);
    assert_eq!(
        NetParameter::decode(&at_limit)
            .unwrap()
            .iter_layers()
            .count(),
        MAX_LAYERS
    );
    let over = repeated(&layer, MAX_LAYERS + 1);
    let err = NetParameter::decode(&over).unwrap_err().to_string();
    assert!(
        err.contains(&format!("NetParameter.layer[{MAX_LAYERS}]")) && err.contains("more than"),
        "{err}"
    );

    // One layer of many unknown fields (field 1000, varint 0).
    let mut body = Vec::new();
    for _ in 0..=MAX_FIELDS {
        body.extend_from_slice(&[0xc0, 0x3e, 0x00]);
    }
    let mut net = vec![0xa2, 0x06];
    let mut len = body.len();
    while len >= 0x80 {
        net.push((len as u8) | 0x80);
        len >>= 7;
    }
    net.push(len as u8);
    net.extend_from_slice(&body);
    let err = NetParameter::decode(&net).unwrap_err().to_string();
    assert!(err.contains("fields and blobs"), "{err}");

    // A solver state of empty history blobs, after `iter: 1`.
    let mut state = vec![0x08, 0x01];
    state.extend(repeated(&[0x1a, 0x00], MAX_FIELDS + 1));
    let err = decode_message::<SolverState>("SolverState", &state)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("SolverState: more than"), "{err}");
    let mut fine = vec![0x08, 0x01];
    fine.extend(repeated(&[0x1a, 0x00], 1000));
    assert_eq!(
        decode_message::<SolverState>("SolverState", &fine)
            .unwrap()
            .history
            .len(),
        1000
    );

    // A prototxt of empty layers, and one list of values.
    let text = "layer {}\n".repeat(MAX_TEXT_FIELDS + 1);
    let err = TextMessage::parse(&text).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("line {}", MAX_TEXT_FIELDS + 1)) && err.contains("more than"),
        "{err}"
    );
    let list = format!("stepvalue: [{}1]", "1, ".repeat(MAX_TEXT_FIELDS));
    assert!(
        TextMessage::parse(&list)
            .unwrap_err()
            .to_string()
            .contains("more than")
    );
}

/// Fields inside layers count against one budget for the whole file: 3
/// layers of 99,000 empty blobs each (594 KB) decode into 54 MB, and at
/// a hundred such layers 20 MB took 1.8 GB.
#[test]
fn a_file_of_empty_blobs_is_refused_by_its_size_not_decoded() {
    fn varint(mut n: usize, out: &mut Vec<u8>) {
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }
    for inner in [[0x3a, 0x00], [0x1a, 0x00]] {
        // blobs (field 7) or bottoms (field 3), each empty.
        let mut body = vec![0x0a, 0x01, b'l'];
        body.extend(repeated(&inner, 99_000));
        let mut layer = vec![0xa2, 0x06];
        varint(body.len(), &mut layer);
        layer.extend_from_slice(&body);
        let net = repeated(&layer, 3);
        let err = NetParameter::decode(&net).unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "layers and blobs in all for a file of {} bytes",
                net.len()
            )),
            "{err}"
        );
        // One such layer is within the budget, and reads.
        assert_eq!(
            NetParameter::decode(&layer).unwrap().iter_layers().count(),
            1
        );
    }
}
