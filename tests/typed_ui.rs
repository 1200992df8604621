//! The compile-fail suite: every shape error the typed API catches, with
//! the message the compiler gives (`tests/ui/fail/*.stderr`). The program
//! it accepts, `tests/ui/pass/typed_api.rs`, is a test target of its own
//! (`typed_api`), so trybuild only checks (`cargo check`) and the two
//! suites below share one build of the dependencies. Snapshots are blessed
//! on the toolchain pinned in rust-toolchain.toml.

use std::path::Path;

#[test]
fn typed_blob_diagnostics() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
}

/// With only compile-fail cases trybuild runs `cargo check`, not `cargo
/// build`: these errors reach an editor (rust-analyzer) too.
#[test]
fn static_index_errors_are_reported_by_cargo_check() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/check/*.rs");
}

fn stderr_files() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dir in ["tests/ui/fail", "tests/ui/check"] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) == Some("stderr") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path.display().to_string(), text));
            }
        }
    }
    assert!(out.len() >= 40, "{} snapshots", out.len());
    out
}

#[test]
fn every_first_line_is_an_error_in_words() {
    for (path, text) in stderr_files() {
        let primary = text.lines().next().unwrap_or("");
        assert!(primary.starts_with("error"), "{path}: {primary}");
    }
    // Every case has its snapshot.
    for dir in ["tests/ui/fail", "tests/ui/check"] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) == Some("rs") {
                assert!(
                    Path::new(&path.with_extension("stderr")).exists(),
                    "{} has no .stderr",
                    path.display()
                );
            }
        }
    }
}

/// No line a user reads (primary, labels, notes, help) spells a typenum
/// integer: dims print as `D<64>` or a declared name.
#[test]
fn no_typenum_in_any_line() {
    for (path, text) in stderr_files() {
        for (i, line) in text.lines().enumerate() {
            for word in ["UInt<", "UTerm", "typenum", "B0", "B1"] {
                assert!(!line.contains(word), "{path}:{}: {word} in `{line}`", i + 1);
            }
        }
    }
}

/// The guide's table (`src/typed.rs`) quotes each case's first line and
/// label; it must say what the compiler says today.
#[test]
fn the_guides_table_quotes_the_snapshots() {
    let guide = std::fs::read_to_string("src/typed.rs").unwrap();
    let snapshots = stderr_files();
    let mut rows = 0;
    for line in guide.lines() {
        let Some(row) = line.strip_prefix("//! | ") else {
            continue;
        };
        let cells: Vec<&str> = row.trim_end_matches(" |").split(" | ").collect();
        if cells.len() != 4 || !cells[1].starts_with("`` ") {
            continue;
        }
        let unquote = |cell: &str| cell.trim_matches('`').trim().to_string();
        let (first_line, label, case) = (unquote(cells[1]), unquote(cells[2]), unquote(cells[3]));
        let (path, text) = snapshots
            .iter()
            .find(|(path, _)| path.ends_with(&format!("/{case}.stderr")))
            .unwrap_or_else(|| panic!("the guide names a case `{case}` with no snapshot"));
        assert_eq!(text.lines().next(), Some(first_line.as_str()), "{path}");
        assert!(text.contains(&label), "{path} has no label `{label}`");
        rows += 1;
    }
    assert!(rows >= 20, "the guide's table has {rows} rows");
}
