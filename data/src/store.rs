//! Caffe's key-value stores (`db::DB`): LMDB read in key order, over and
//! over, and written the way `convert_imageset` writes it.

use std::path::{Path, PathBuf};

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, WithoutTls};

/// A store refused or failed: which one, and why.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {detail}")]
pub struct StoreError {
    /// The store's folder.
    pub path: String,
    /// What went wrong.
    pub detail: String,
}

fn store_error(path: &Path, detail: impl std::fmt::Display) -> StoreError {
    StoreError {
        path: path.display().to_string(),
        detail: detail.to_string(),
    }
}

/// What a folder that is not an LMDB looks like instead, for the error.
fn what_else(path: &Path) -> String {
    if !path.exists() {
        "no such folder".into()
    } else if path.join("CURRENT").is_file() {
        "a LevelDB store, not an LMDB (set `backend: LEVELDB`; LevelDB is not read yet, \
         convert it with `blobflow convert-imageset --backend lmdb` from its images)"
            .into()
    } else if path.is_file() {
        "a file, not an LMDB folder (LMDB keeps data.mdb in a folder)".into()
    } else {
        "not an LMDB: no data.mdb in it".into()
    }
}

type Records<'e> = Database<'e, Bytes, Bytes>;

/// An LMDB opened for reading (Caffe's `LMDB::Open(source, READ)`: read
/// only, no thread-local transactions, and without a lock file where the
/// folder cannot be written).
pub struct LmdbReader {
    path: PathBuf,
    env: Env<WithoutTls>,
}

impl LmdbReader {
    /// Opens the store in folder `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if !path.join("data.mdb").is_file() {
            return Err(store_error(&path, what_else(&path)));
        }
        let open = |flags: EnvFlags| {
            let mut options = EnvOpenOptions::new().read_txn_without_tls();
            // SAFETY: READ_ONLY (and NO_LOCK where the folder is read-only):
            // this process never writes the map, and Caffe's stores are
            // not written while they are read.
            unsafe {
                options.flags(flags);
                options.open(&path)
            }
        };
        let env = match open(EnvFlags::READ_ONLY) {
            Ok(env) => env,
            Err(heed::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                open(EnvFlags::READ_ONLY | EnvFlags::NO_LOCK)
                    .map_err(|e| store_error(&path, format!("cannot open the LMDB: {e}")))?
            }
            Err(e) => return Err(store_error(&path, format!("cannot open the LMDB: {e}"))),
        };
        Ok(Self { path, env })
    }

    /// The store's folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn database(&self) -> Result<Option<Records<'_>>, StoreError> {
        let txn = self.env.read_txn().map_err(|e| self.error(e))?;
        let opened = self
            .env
            .open_databases_and_commit(txn, |opener, txn| -> Result<_, heed::Error> {
                Ok(CommitOrAbort::<_, ()>::Commit(
                    opener.open_database::<Bytes, Bytes>(txn, None)?,
                ))
            })
            .map_err(|e| self.error(e))?;
        Ok(opened.unwrap_commit())
    }

    fn error(&self, e: impl std::fmt::Display) -> StoreError {
        store_error(&self.path, e)
    }

    /// Calls `visit(key, value)` on every record in key order, starting
    /// over at the first after the last (Caffe's cursor `SeekToFirst`
    /// when it is no longer valid) until `visit` returns `false`.
    /// `restarted` is told each time the store starts over. An empty
    /// store is an error: it would give no batch ever.
    pub fn cycle(
        &self,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        restarted: &mut dyn FnMut(),
    ) -> Result<(), StoreError> {
        let Some(db) = self.database()? else {
            return Err(self.error("the LMDB holds no records"));
        };
        let txn = self.env.read_txn().map_err(|e| self.error(e))?;
        loop {
            let mut any = false;
            for record in db.iter(&txn).map_err(|e| self.error(e))? {
                let (key, value) = record.map_err(|e| self.error(format!("cannot read: {e}")))?;
                any = true;
                if !visit(key, value) {
                    return Ok(());
                }
            }
            if !any {
                return Err(self.error("the LMDB holds no records"));
            }
            restarted();
        }
    }
}

/// The most an LMDB written here may grow to (Caffe's `LMDB_MAP_SIZE`,
/// 1 TB): address space, not disk; the file grows as records are added.
const MAP_SIZE: usize = if usize::BITS >= 64 { 1 << 40 } else { 1 << 30 };

/// Writes a new LMDB as Caffe's tools do, records committed every 1000
/// puts; the store appears under its name only when
/// [`finish`](Self::finish) has committed it all, so a folder named
/// `path` is never a half-written store.
///
/// ```
/// use blob_data::{LmdbReader, LmdbWriter};
/// let dir = std::env::temp_dir().join(format!("blobflow-lmdb-doc-{}", std::process::id()));
/// let _ = std::fs::remove_dir_all(&dir);
/// let mut w = LmdbWriter::create(&dir)?;
/// w.put(b"00000001", b"one")?;
/// w.put(b"00000000", b"zero")?;
/// assert_eq!(w.finish()?, 2);
/// let mut seen = Vec::new();
/// LmdbReader::open(&dir)?.cycle(
///     &mut |key, value| { seen.push((key.to_vec(), value.to_vec())); seen.len() < 3 },
///     &mut || {},
/// )?;
/// assert_eq!(seen[0], (b"00000000".to_vec(), b"zero".to_vec()));
/// assert_eq!(seen[2].0, b"00000000"); // started over after the last
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), blob_data::StoreError>(())
/// ```
pub struct LmdbWriter {
    path: PathBuf,
    partial: PathBuf,
    env: Env,
    pending: Vec<(Vec<u8>, Vec<u8>)>,
    written: usize,
    finished: bool,
}

impl LmdbWriter {
    /// Starts a store at `path`, which must not exist (Caffe's tools
    /// refuse to write into an existing store too).
    pub fn create(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if path.exists() {
            return Err(store_error(
                &path,
                "exists already; remove it or choose another name",
            ));
        }
        let name = path
            .file_name()
            .ok_or_else(|| store_error(&path, "names no folder"))?
            .to_string_lossy()
            .into_owned();
        let partial = path.with_file_name(format!(
            ".{name}{}{}",
            blob_runtime::PARTIAL_MARK,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&partial).map_err(|e| store_error(&partial, e))?;
        let mut options = EnvOpenOptions::new();
        options.map_size(MAP_SIZE);
        // SAFETY: the folder is new and this writer is its only user.
        let env = unsafe { options.open(&partial) }.map_err(|e| store_error(&partial, e))?;
        Ok(Self {
            path,
            partial,
            env,
            pending: Vec::new(),
            written: 0,
            finished: false,
        })
    }

    /// Adds one record.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.pending.push((key.to_vec(), value.to_vec()));
        self.written += 1;
        if self.pending.len() == 1000 {
            self.commit()?;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        let fail = |e: heed::Error| store_error(&self.partial, e);
        let txn = self.env.write_txn().map_err(fail)?;
        let db = self
            .env
            .create_databases_and_commit(txn, |opener, txn| -> Result<_, heed::Error> {
                Ok(CommitOrAbort::<_, ()>::Commit(
                    opener.create_database::<Bytes, Bytes>(txn, None)?,
                ))
            })
            .map_err(fail)?
            .unwrap_commit();
        let mut txn = self.env.write_txn().map_err(fail)?;
        for (key, value) in self.pending.drain(..) {
            db.put(&mut txn, &key, &value).map_err(|e| {
                store_error(
                    &self.partial,
                    format!("cannot write key {:?}: {e}", String::from_utf8_lossy(&key)),
                )
            })?;
        }
        txn.commit().map_err(fail)
    }

    /// Commits what is left, flushes it to disk, and gives the store its
    /// name; returns how many records it holds.
    pub fn finish(mut self) -> Result<usize, StoreError> {
        self.commit()?;
        self.env
            .force_sync()
            .map_err(|e| store_error(&self.partial, e))?;
        std::fs::rename(&self.partial, &self.path).map_err(|e| store_error(&self.path, e))?;
        self.finished = true;
        Ok(self.written)
    }
}

/// A writer dropped before [`LmdbWriter::finish`] (an error, a panic)
/// takes its partial folder with it.
impl Drop for LmdbWriter {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_dir_all(&self.partial);
        }
    }
}
