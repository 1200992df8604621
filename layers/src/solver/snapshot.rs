//! Caffe's snapshots (`Solver::Snapshot`): a net's weights as
//! `PREFIX_iter_N.caffemodel` and the solver's state as
//! `PREFIX_iter_N.solverstate`, and the other way: the newest pair that
//! is whole, for a resume after a crash.
//!
//! Each file is written whole or not at all ([`blob_runtime::write_atomically`]),
//! the `.caffemodel` before the `.solverstate` that names it, so a
//! process killed at any moment leaves at worst a model without its
//! state; [`newest_snapshot`] passes over such a model, and over any
//! state it cannot read, and says which and why.

use std::path::{Path, PathBuf};

use blob_proto::SolverState;
use blob_runtime::{BlobError, CaffeModel, MathElement, PARTIAL_MARK, Result};

use super::SgdSolver;
use crate::net::Net;

/// `PREFIX_iter_N.caffemodel` and `PREFIX_iter_N.solverstate`, Caffe's
/// names for the snapshot at iteration `iter`.
///
/// ```
/// let (model, state) = blob_layers::solver::snapshot_paths("out/lenet", 500);
/// assert_eq!(model.to_str(), Some("out/lenet_iter_500.caffemodel"));
/// assert_eq!(state.to_str(), Some("out/lenet_iter_500.solverstate"));
/// ```
pub fn snapshot_paths(prefix: impl AsRef<Path>, iter: usize) -> (PathBuf, PathBuf) {
    let stem = format!("{}_iter_{iter}", prefix.as_ref().display());
    (
        PathBuf::from(format!("{stem}.caffemodel")),
        PathBuf::from(format!("{stem}.solverstate")),
    )
}

/// Writes `net`'s weights and `solver`'s state under `prefix` (Caffe's
/// `Solver::Snapshot`): the model first, then the state that names it,
/// each whole or not at all. The state records the model's path as
/// written, as Caffe does. Returns (model, state).
///
/// ```
/// use blob_layers::net::Net;
/// use blob_layers::solver::{SgdSolver, write_snapshot};
/// let net = Net::<f32>::from_prototxt(
///     "input: 'x' input_shape { dim: 1 dim: 2 } layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'y' inner_product_param { num_output: 1 } }",
///     blob_layers::net::NetState::test(),
/// )?;
/// let dir = std::env::temp_dir().join(format!("snapshot-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let (model, state) = write_snapshot(&net, &SgdSolver::lenet(), dir.join("ip"))?;
/// assert!(model.ends_with("ip_iter_0.caffemodel") && state.exists());
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn write_snapshot<T: MathElement>(
    net: &Net<T>,
    solver: &SgdSolver<T>,
    prefix: impl AsRef<Path>,
) -> Result<(PathBuf, PathBuf)> {
    let (model, state) = snapshot_paths(prefix, solver.iter);
    net.to_model()?.save(&model)?;
    blob_runtime::write_solver_state(&state, &solver.state(&model.to_string_lossy())?)?;
    Ok((model, state))
}

/// The `.caffemodel` a `.solverstate` names, looked up beside the state
/// file: Caffe records the path relative to the folder `caffe train`
/// ran in, so the path itself is often stale, while the snapshot pair
/// always lies together.
///
/// ```
/// let state = blob_proto::SolverState { learned_net: Some("run/x_iter_5.caffemodel".into()), ..Default::default() };
/// let model = blob_layers::solver::model_of_state("snap/x_iter_5.solverstate".as_ref(), &state)?;
/// assert_eq!(model.to_str(), Some("snap/x_iter_5.caffemodel"));
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn model_of_state(state_path: &Path, state: &SolverState) -> Result<PathBuf> {
    let learned = state.learned_net.as_deref().unwrap_or_default();
    match Path::new(learned).file_name() {
        Some(file) => Ok(state_path.parent().unwrap_or(Path::new(".")).join(file)),
        None => Err(BlobError::Net {
            at: state_path.display().to_string(),
            detail: "the solver state names no .caffemodel (its learned_net is empty)".into(),
        }),
    }
}

/// The snapshot a resume continues from: the newest whose state and
/// model both read, and the files passed over on the way with the reason.
#[derive(Clone, Debug, PartialEq)]
pub struct NewestSnapshot {
    /// The `.solverstate`.
    pub state: PathBuf,
    /// The `.caffemodel` it names, beside it.
    pub model: PathBuf,
    /// Its iteration.
    pub iter: usize,
    /// Newer or partial files that were not taken, each with why.
    pub skipped: Vec<(PathBuf, String)>,
}

/// The newest complete snapshot with prefix `prefix` (Caffe's
/// `snapshot_prefix`, e.g. `out/lenet` for `out/lenet_iter_N.*`): states
/// are tried from the highest iteration down, and the first whose
/// `.solverstate` and `.caffemodel` both read whole is taken. Partial
/// files a killed writer left, states that do not read, and states whose
/// model is missing or unreadable are listed in `skipped`; an error if
/// no snapshot is complete, naming each file tried.
///
/// ```
/// let err = blob_layers::solver::newest_snapshot("/no/such/lenet").unwrap_err();
/// assert!(err.to_string().contains("/no/such"), "{err}");
/// ```
pub fn newest_snapshot(prefix: impl AsRef<Path>) -> Result<NewestSnapshot> {
    let prefix = prefix.as_ref();
    let dir = match prefix.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let stem = prefix
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let entries = std::fs::read_dir(dir).map_err(|source| BlobError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let mut states = Vec::new();
    let mut skipped = Vec::new();
    let head = format!("{stem}_iter_");
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!(".{head}")) && name.contains(PARTIAL_MARK) {
            skipped.push((
                entry.path(),
                "a partial file a writer left when it was stopped".to_string(),
            ));
            continue;
        }
        let iter = name
            .strip_prefix(&head)
            .and_then(|rest| rest.strip_suffix(".solverstate"))
            .and_then(|n| n.parse::<usize>().ok());
        if let Some(iter) = iter {
            states.push((iter, entry.path()));
        }
    }
    states.sort_by_key(|s| std::cmp::Reverse(s.0));
    for (iter, state_path) in states {
        match complete_pair(&state_path, iter) {
            Ok(model) => {
                skipped.sort();
                return Ok(NewestSnapshot {
                    state: state_path,
                    model,
                    iter,
                    skipped,
                });
            }
            Err(why) => skipped.push((state_path, why)),
        }
    }
    skipped.sort();
    let tried: Vec<String> = skipped
        .iter()
        .map(|(p, why)| format!("{}: {why}", p.display()))
        .collect();
    Err(BlobError::Net {
        at: prefix.display().to_string(),
        detail: if tried.is_empty() {
            format!("no snapshot {head}N.solverstate in {}", dir.display())
        } else {
            format!("no complete snapshot; passed over {}", tried.join("; "))
        },
    })
}

/// The model of the state at `state_path` if both read whole and agree
/// on the iteration; else why not.
fn complete_pair(state_path: &Path, iter: usize) -> std::result::Result<PathBuf, String> {
    let state = blob_runtime::read_solver_state(state_path).map_err(|e| e.to_string())?;
    if state.iter.and_then(|i| usize::try_from(i).ok()) != Some(iter) {
        return Err(format!(
            "its name says iteration {iter}, its contents {:?}",
            state.iter
        ));
    }
    let model = model_of_state(state_path, &state).map_err(|e| e.to_string())?;
    CaffeModel::open(&model).map_err(|e| format!("its model does not read: {e}"))?;
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net() -> Net<f32> {
        Net::from_prototxt(
            "input: 'x' input_shape { dim: 1 dim: 2 } layer { name: 'ip' type: 'InnerProduct' \
             bottom: 'x' top: 'y' inner_product_param { num_output: 1 } }",
            crate::net::NetState::test(),
        )
        .unwrap()
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("snapshots-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_newest_complete_pair_is_taken_and_the_rest_said() {
        let dir = scratch("newest");
        let (net, mut solver) = (net(), SgdSolver::lenet());
        for iter in [100, 200, 300, 400] {
            solver.iter = iter;
            write_snapshot(&net, &solver, dir.join("m")).unwrap();
        }
        // 400: the state cut short, as a writer in place would leave it.
        let (_, state400) = snapshot_paths(dir.join("m"), 400);
        let bytes = std::fs::read(&state400).unwrap();
        std::fs::write(&state400, &bytes[..bytes.len() / 2]).unwrap();
        // 300: the model gone (killed between the two files).
        std::fs::remove_file(snapshot_paths(dir.join("m"), 300).0).unwrap();
        // 500: only a temporary file.
        std::fs::write(dir.join(".m_iter_500.caffemodel.partial-1-0"), b"").unwrap();
        let newest = newest_snapshot(dir.join("m")).unwrap();
        assert_eq!(newest.iter, 200);
        assert_eq!(newest.state, snapshot_paths(dir.join("m"), 200).1);
        let reasons: Vec<String> = newest
            .skipped
            .iter()
            .map(|(p, why)| format!("{} {why}", p.file_name().unwrap().to_string_lossy()))
            .collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(reasons[0].starts_with(".m_iter_500") && reasons[0].contains("partial"));
        assert!(reasons[1].starts_with("m_iter_300") && reasons[1].contains("model"));
        assert!(reasons[2].starts_with("m_iter_400"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_complete_snapshot_is_an_error_naming_each_file() {
        let dir = scratch("none");
        std::fs::write(dir.join("m_iter_7.solverstate"), b"").unwrap();
        let err = newest_snapshot(dir.join("m")).unwrap_err().to_string();
        assert!(err.contains("m_iter_7.solverstate"), "{err}");
        assert!(err.contains("iteration 7"), "{err}");
        let err = newest_snapshot(dir.join("other")).unwrap_err().to_string();
        assert!(
            err.contains("no snapshot other_iter_N.solverstate"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
