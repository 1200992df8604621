//! The application builds and prints what ReLU left.

#[test]
fn the_app_runs_through_the_reexport() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_downstream-reexport-app"))
        .output()
        .expect("run the app");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "[0.0, 2.0, 0.0, 4.0, 5.0, 0.0, 7.0, 0.0]"
    );
}
