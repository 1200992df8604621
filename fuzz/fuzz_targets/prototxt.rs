//! The text-format reader and the solver prototxt reader on arbitrary
//! text: any input gives a value or an error naming a line, never a
//! panic or a stack overflow.
#![no_main]

use blob_layers::solver::SolverFile;
use blob_proto::{ProtoError, TextMessage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(ProtoError::Text { line, .. }) = TextMessage::parse(text) {
        assert!(line >= 1 && line <= text.lines().count().max(1), "line {line} of a text of {} lines", text.lines().count());
    }
    if let Ok(file) = SolverFile::<f32>::parse(text) {
        let _ = file.solver.learning_rate();
    }
    let _ = SolverFile::<f64>::parse(text);
});
