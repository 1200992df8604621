//! The solver prototxt reader on arbitrary text: a solver or an error
//! naming `<text>` and never a panic; a count that Caffe's int32 field
//! cannot hold is never accepted.
#![no_main]

use blob_layers::solver::SolverFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match SolverFile::<f32>::parse(text) {
        Ok(file) => {
            let int32 = i32::MAX as usize;
            assert!(file.max_iter <= int32 && file.display <= int32 && file.snapshot <= int32);
            assert!(file.test_iter.iter().all(|&n| n <= int32));
        }
        Err(e) => assert!(e.to_string().starts_with("<text>"), "{e}"),
    }
});
