//! The .npy readers on arbitrary bytes, in memory and from a file (which
//! reads the header, checks the size, then the data a chunk at a time):
//! both give the same blob, or an error naming the file, never a panic
//! or an allocation beyond what the bytes hold.
#![no_main]

use blob_runtime::{Blob, npy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("fuzz-npy-{}.npy", std::process::id()));
    std::fs::write(&path, data).unwrap();
    let from_file = npy::read::<f32>(&path);
    match (&from_file, npy::from_bytes::<f32>(data, "fuzz.npy")) {
        (Ok(a), Ok(b)) => assert_eq!(
            (a.shape(), a.to_vec().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>()),
            (b.shape(), b.to_vec().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>())
        ),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("the file reader says {a:?}, the bytes reader {b:?}"),
    }
    match npy::from_bytes::<f32>(data, "fuzz.npy") {
        Ok(blob) => {
            assert_eq!(blob.count(), blob.shape().iter().product::<usize>());
            let again: Blob<f32> = npy::from_bytes(&npy::to_bytes(&blob).unwrap(), "again.npy").unwrap();
            assert_eq!(again.shape(), blob.shape());
        }
        Err(e) => assert!(e.to_string().contains("fuzz.npy"), "{e}"),
    }
});
