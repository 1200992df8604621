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
        // The end of a text after its last newline is on the line below.
        let lines = text.matches('\n').count() + 1;
        assert!((1..=lines).contains(&line), "line {line} of a text of {lines} lines");
    }
    if let Ok(file) = SolverFile::<f32>::parse(text) {
        let _ = file.solver.learning_rate();
    }
    let _ = SolverFile::<f64>::parse(text);
});
