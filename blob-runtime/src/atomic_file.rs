//! Files written whole or not at all. A process killed while writing a
//! snapshot (`kill -9`, a power cut, the out-of-memory killer) must not
//! leave a truncated `.caffemodel` or `.solverstate` under the name a
//! resume looks for: the bytes go to a hidden temporary file beside the
//! target, are flushed to the disk, and only then renamed over the
//! target, which either keeps its old bytes or has all the new ones.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{BlobError, Result};

/// What the temporary files of [`write_atomically`] have in their names
/// (`.NAME.partial-PID-N`): a file of this shape left in a folder is what
/// a killed writer left behind, never a complete file.
pub const PARTIAL_MARK: &str = ".partial-";

/// Writes `bytes` to `path` so that `path` holds either its old bytes or
/// all of `bytes`, never part of them, whenever the process dies: written
/// to a temporary file beside it, flushed and `fsync`ed, renamed over
/// `path`, and the folder `fsync`ed so the rename itself survives a power
/// cut. Every file blobflow writes goes through here (Caffe's
/// `WriteProtoToBinaryFile` writes in place).
///
/// ```
/// let dir = std::env::temp_dir().join(format!("atomic-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("weights.caffemodel");
/// blob_runtime::write_atomically(&path, b"new bytes")?;
/// assert_eq!(std::fs::read(&path).unwrap(), b"new bytes");
/// // Nothing else is left in the folder.
/// assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn write_atomically(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    let path = path.as_ref();
    let io = |source| BlobError::Io {
        path: path.display().to_string(),
        source,
    };
    let Some(name) = path.file_name() else {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "names a folder, not a file",
        )));
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let temp = dir.join(temporary_name(&name.to_string_lossy()));
    let written = write_and_sync(&temp, bytes)
        .and_then(|()| std::fs::rename(&temp, path))
        .and_then(|()| sync_folder(dir));
    if written.is_err() {
        // The target is untouched; the temporary file is ours alone.
        let _ = std::fs::remove_file(&temp);
    }
    written.map_err(io)
}

/// `.NAME.partial-PID-N`: hidden, unique to this process and call, and
/// never a name a reader of snapshots looks for.
fn temporary_name(name: &str) -> PathBuf {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    PathBuf::from(format!(
        ".{name}{PARTIAL_MARK}{}-{call}",
        std::process::id()
    ))
}

fn write_and_sync(temp: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(temp)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Makes a rename in `dir` durable (on Unix a folder is synced like a
/// file; elsewhere the rename is as durable as the system makes it).
fn sync_folder(dir: &Path) -> std::io::Result<()> {
    if cfg!(unix) {
        File::open(dir)?.sync_all()
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("atomic-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri does not open folders to sync them")]
    fn a_write_replaces_the_old_bytes_whole_and_leaves_nothing_beside() {
        let dir = scratch("replace");
        let path = dir.join("a.solverstate");
        std::fs::write(&path, b"old").unwrap();
        write_atomically(&path, b"the new state").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"the new state");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.solverstate"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri does not open folders to sync them")]
    fn a_failed_write_keeps_the_target_and_removes_its_temporary_file() {
        let dir = scratch("fail");
        // A folder where the file should go: the rename fails.
        let path = dir.join("taken");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("inside"), b"kept").unwrap();
        let err = write_atomically(&path, b"bytes").unwrap_err();
        assert!(
            err.to_string().starts_with(&path.display().to_string()),
            "{err}"
        );
        assert_eq!(std::fs::read(path.join("inside")).unwrap(), b"kept");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_path_without_a_file_name_is_refused() {
        let err = write_atomically("..", b"x").unwrap_err();
        assert!(err.to_string().contains("names a folder"), "{err}");
    }
}
