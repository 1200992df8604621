//! The compile-fail suite: every shape error the typed API catches, with
//! the message the compiler gives (`tests/ui/fail/*.stderr`), and the
//! programs it accepts (`tests/ui/pass`). Snapshots are blessed on the
//! toolchain pinned in rust-toolchain.toml.

#[test]
fn typed_blob_diagnostics() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}

#[test]
fn primary_lines_name_shapes_not_typenum() {
    for entry in std::fs::read_dir("tests/ui/fail").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("stderr") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let primary = text.lines().next().unwrap_or("");
        assert!(
            primary.starts_with("error"),
            "{}: {primary}",
            path.display()
        );
        assert!(!primary.contains("UInt<"), "{}: {primary}", path.display());
    }
}
