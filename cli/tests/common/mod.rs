//! What the CLI's test files share: running the tool.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `blobflow inspect --json FILE` and parses its output, failing the
/// test with the tool's message if it fails.
pub fn inspect_json(path: &Path) -> Value {
    serde_json::from_slice(&inspect_output(&["inspect", "--json"], path)).unwrap()
}

/// Runs `blobflow inspect FILE` and returns its table, failing the test
/// with the tool's message if it fails.
#[allow(dead_code)] // not every test file prints tables
pub fn inspect_table(path: &Path) -> String {
    String::from_utf8(inspect_output(&["inspect"], path)).unwrap()
}

fn inspect_output(args: &[&str], path: &Path) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
