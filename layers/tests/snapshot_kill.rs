//! A process killed (`kill -9`) while it snapshots leaves no partial file
//! under a snapshot's name, and the newest complete snapshot is always
//! the one a resume takes.
//!
//! The test runs this very binary again as the writer: with
//! `SNAPSHOT_WRITER_DIR` set, `writer_child` snapshots a net over and over
//! until it is killed; the parent kills it at random moments and the
//! moment a temporary file appears (mid-write), then reads every file.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use blob_layers::net::Net;
use blob_layers::solver::{SgdSolver, newest_snapshot, snapshot_paths, write_snapshot};
use blob_runtime::{CaffeModel, PARTIAL_MARK};

const CHILD_ENV: &str = "SNAPSHOT_WRITER_DIR";

/// A net with 4 MB of weights: each snapshot takes long enough to be cut.
fn net() -> Net<f32> {
    Net::from_prototxt(
        "input: 'x' input_shape { dim: 1 dim: 1000 } layer { name: 'ip' type: 'InnerProduct' \
         bottom: 'x' top: 'y' inner_product_param { num_output: 1000 } }",
        blob_layers::net::NetState::test(),
    )
    .unwrap()
}

/// The writer: snapshots at iterations 1, 2, 3... until killed. Returns
/// at once in an ordinary test run.
#[test]
fn writer_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let net = net();
    let mut solver = SgdSolver::lenet();
    // Continue after the newest snapshot, as a resumed run would.
    solver.iter = newest_snapshot(dir.join("m")).map_or(0, |s| s.iter);
    loop {
        solver.iter += 1;
        write_snapshot(&net, &solver, dir.join("m")).unwrap();
    }
}

fn spawn_writer(dir: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "writer_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The highest iteration whose model and state both read whole, found
/// without the library's own search.
fn newest_whole(dir: &Path) -> Option<usize> {
    let mut best = None;
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let Some(iter) = name
            .strip_prefix("m_iter_")
            .and_then(|r| r.strip_suffix(".solverstate"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let (model, state) = snapshot_paths(dir.join("m"), iter);
        if blob_runtime::read_solver_state(&state).is_ok() && CaffeModel::open(&model).is_ok() {
            best = best.max(Some(iter));
        }
    }
    best
}

/// Every file under a snapshot's name reads whole.
fn check_final_names(dir: &Path, kill: usize) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.contains(PARTIAL_MARK) {
            continue;
        }
        let whole = if name.ends_with(".caffemodel") {
            CaffeModel::open(&path).map(drop)
        } else {
            blob_runtime::read_solver_state(&path).map(drop)
        };
        assert!(whole.is_ok(), "kill {kill}: {name} is partial: {whole:?}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "spawns processes")]
fn killed_writers_leave_only_whole_snapshots_and_resume_takes_the_newest() {
    let dir = std::env::temp_dir().join(format!("snapshot-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    // One writer left to finish a snapshot first, so that every later
    // writer resumes after one: killed at random within 5-65 ms, none of
    // 100 writers finished one on a CI machine loaded with the other
    // tests (a process's start, a 4 MB net filled, written and synced).
    let (started, cap) = (Instant::now(), Duration::from_secs(120));
    let mut first = spawn_writer(&dir);
    while newest_whole(&dir).is_none() && started.elapsed() < cap {
        std::thread::sleep(Duration::from_millis(10));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(
        newest_whole(&dir).is_some(),
        "a writer finished no snapshot in {cap:?}"
    );
    let (mut mid_write, kills) = (0, 100);
    for kill in 0..kills {
        let mut child = spawn_writer(&dir);
        if kill % 2 == 0 {
            // The moment a temporary file appears: mid-write.
            let (started, cap) = (Instant::now(), Duration::from_secs(20));
            let before = partials(&dir);
            while partials(&dir) <= before && started.elapsed() < cap {
                std::hint::spin_loop();
            }
            mid_write += 1;
        } else {
            std::thread::sleep(Duration::from_millis(5 + random(60)));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        check_final_names(&dir, kill);
        let expected = newest_whole(&dir);
        match newest_snapshot(dir.join("m")) {
            Ok(found) => assert_eq!(Some(found.iter), expected, "kill {kill}"),
            Err(e) => assert_eq!(expected, None, "kill {kill}: {e}"),
        }
    }
    assert!(newest_whole(&dir).is_some(), "the writers wrote snapshots");
    eprintln!(
        "{kills} kills ({mid_write} as a temporary file appeared): no partial file under a final name"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// How many temporary files the folder holds now: those killed writers
/// left behind, and the one being written, if any.
fn partials(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().contains(PARTIAL_MARK))
                .count()
        })
        .unwrap_or(0)
}
