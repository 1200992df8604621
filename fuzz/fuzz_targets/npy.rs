//! The .npy reader on arbitrary bytes: a blob whose values fill its
//! shape, or an error naming the file, never a panic or an allocation
//! beyond what the bytes hold.
#![no_main]

use blob_runtime::{Blob, npy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match npy::from_bytes::<f32>(data, "fuzz.npy") {
        Ok(blob) => {
            assert_eq!(blob.count(), blob.shape().iter().product::<usize>());
            let again: Blob<f32> = npy::from_bytes(&npy::to_bytes(&blob).unwrap(), "again.npy").unwrap();
            assert_eq!(again.shape(), blob.shape());
        }
        Err(e) => assert!(e.to_string().contains("fuzz.npy"), "{e}"),
    }
});
