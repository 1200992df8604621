//! The `.safetensors` reader on arbitrary bytes, all the way into blobs and
//! a Caffe model: any input gives a value or an error, never a panic.
#![no_main]

use blob_runtime::TensorFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = TensorFile::from_bytes(data.to_vec()) else {
        return;
    };
    let _ = file.info();
    for name in file.names() {
        if let Ok(b) = file.blob::<f32>(&name) {
            let _ = b.to_vec();
        }
        let _ = file.blob::<f64>(&name);
        let _ = file.blob::<i32>(&name);
    }
    let _ = file.to_caffemodel::<f32>();
});
