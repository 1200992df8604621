//! Every Caffe decoder on arbitrary bytes, all the way into blobs: any
//! input must give a value or an error, never a panic, an abort or an
//! allocation beyond the input.
#![no_main]

use blob_proto::{BlobProto, BlobProtoVector, NetParameter, SolverState, decode_message, detect_format};
use blob_runtime::Blob;
use libfuzzer_sys::fuzz_target;

fn blobs(protos: &[BlobProto]) {
    for p in protos {
        if let Ok(b) = Blob::<f32>::from_proto(p) {
            let _ = b.to_proto(true);
        }
        let _ = Blob::<f64>::from_proto(p);
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = detect_format(data, None);
    if let Ok(net) = NetParameter::decode(data) {
        for l in net.iter_layers() {
            let _ = (l.name(), l.type_name());
            blobs(l.blobs());
        }
        // Compared as bytes: a decoded NaN weight makes struct equality fail
        // even when the round trip is exact.
        let again = net.encode_to_vec().expect("a decoded net re-encodes");
        let twice = NetParameter::decode(&again).expect("re-decodes").encode_to_vec().expect("re-encodes");
        assert_eq!(again, twice);
    }
    if let Ok(b) = decode_message::<BlobProto>("BlobProto", data) {
        blobs(&[b]);
    }
    if let Ok(v) = decode_message::<BlobProtoVector>("BlobProtoVector", data) {
        blobs(&v.blobs);
    }
    if let Ok(s) = decode_message::<SolverState>("SolverState", data) {
        blobs(&s.history);
    }
});
