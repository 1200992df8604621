//! What a benchmark does on a machine without a GPU.

/// Says there is no GPU and why, and fails the process where the GPU
/// check runs it (`BLOBFLOW_REQUIRE_GPU` set): there, no GPU is a
/// failure, not a skipped measurement.
pub fn no_gpu(why: impl std::fmt::Display) {
    println!("no GPU: {why}");
    if std::env::var_os("BLOBFLOW_REQUIRE_GPU").is_some() {
        std::process::exit(1);
    }
}
