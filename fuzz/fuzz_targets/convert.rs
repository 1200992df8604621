//! `blobflow convert`'s path on arbitrary bytes: a model read, written as
//! `.safetensors`, read back. Any input gives a file whose tensors read
//! back one per blob, or an error; never a panic (two same-named layers
//! with blobs panicked inside the encoder).
#![no_main]

use blob_runtime::{CaffeModel, TensorFile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(model) = CaffeModel::from_bytes(data) else {
        return;
    };
    let Ok(bytes) = model.to_safetensors() else {
        return;
    };
    let file = TensorFile::from_bytes(bytes).expect("what convert writes reads back");
    let blobs: usize = model.layers().map(|l| l.blobs().len()).sum();
    assert_eq!(file.names().len(), blobs, "one tensor per blob");
});
