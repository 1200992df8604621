//! What the CLI's test files share: running the tool.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `blobflow inspect --json FILE` and parses its output, failing the
/// test with the tool's message if it fails.
pub fn inspect_json(path: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .args(["inspect", "--json"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
