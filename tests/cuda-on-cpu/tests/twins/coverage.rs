//! Every kernel of every `.cu` file is run by a test here.

#[test]
fn every_kernel_is_held_to_the_cpu() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/twins");
    let mut tests = String::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name() != Some("coverage.rs".as_ref()) {
            tests.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
    let untested: Vec<_> = cuda_on_cpu::KERNELS
        .iter()
        .filter(|k| !names_word(&tests, k.name))
        .map(|k| format!("{} ({})", k.name, k.file))
        .collect();
    assert!(untested.is_empty(), "kernels no test runs: {untested:?}");
    assert!(
        cuda_on_cpu::KERNELS.len() > 50,
        "the build found too few kernels"
    );
}

/// Whether `word` occurs in `text` as a whole identifier.
fn names_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}
