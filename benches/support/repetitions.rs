//! How the benches time a step that may only queue work on a device.

use std::time::{Duration, Instant};

use blobflow::BlobError;

/// Repetitions per second of `step`: repetitions for at least 0.3 s
/// after two warm-up steps, best of three such runs. `finish` waits for
/// the work to be done (a read of a result, on a GPU) and ends each run
/// inside its time.
pub fn per_second(
    mut step: impl FnMut() -> Result<(), BlobError>,
    mut finish: impl FnMut() -> Result<(), BlobError>,
) -> Result<f64, BlobError> {
    step()?;
    step()?;
    finish()?;
    let mut best = 0f64;
    for _ in 0..3 {
        let t = Instant::now();
        let mut reps = 0u32;
        while reps < 3 || t.elapsed() < Duration::from_millis(300) {
            step()?;
            reps += 1;
        }
        finish()?;
        best = best.max(f64::from(reps) / t.elapsed().as_secs_f64());
    }
    Ok(best)
}
