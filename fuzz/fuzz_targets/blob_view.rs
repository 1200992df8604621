//! The borrowed blob reader (`BlobProtoView`, the bulk path of `.binaryproto`
//! files and large blobs) on arbitrary bytes: never a panic, and wherever it
//! accepts the bytes it reads what the owned decoder reads, and loads into a
//! blob exactly what the owned proto loads.
#![no_main]

use blob_proto::{BlobProto, BlobProtoView, Message};
use blob_runtime::Blob;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(view) = BlobProtoView::parse(data) else {
        return;
    };
    let owned = view.to_owned_proto();
    // Compared as bytes: NaN values make struct equality fail even when
    // both readers agree.
    if let Ok(decoded) = BlobProto::decode(data) {
        assert_eq!(owned.encode_to_vec(), decoded.encode_to_vec(), "view and owned decode differ");
    }
    for runs in [&view.data, &view.diff, &view.double_data, &view.double_diff] {
        let mut out = vec![0u8; runs.byte_len()];
        runs.copy_to(&mut out);
    }
    let mut from_view = Blob::<f32>::new(&[0]).expect("an empty blob");
    let mut from_owned = Blob::<f32>::new(&[0]).expect("an empty blob");
    let a = from_view.load_proto_view(&view, true);
    let b = Blob::<f32>::from_proto(&owned).map(|blob| from_owned = blob);
    assert_eq!(a.is_ok(), b.is_ok(), "view load {a:?} vs owned load {b:?}");
    if a.is_ok() {
        assert_eq!(from_view.shape(), from_owned.shape());
        let (x, y) = (from_view.to_vec(), from_owned.to_vec());
        if let (Ok(x), Ok(y)) = (x, y) {
            assert_eq!(
                x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
    }
});
