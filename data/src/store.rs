//! Caffe's key-value stores (`db::DB`): LMDB and LevelDB, read in key
//! order, over and over, and written the way `convert_imageset` writes
//! them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, WithoutTls};

/// Caffe's `DataParameter.DB`: which kind of store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// LevelDB (Caffe's default), snappy-compressed as Caffe writes it.
    LevelDb,
    /// LMDB.
    Lmdb,
}

impl Backend {
    /// The backend Caffe's enum name gives (`LEVELDB`, `LMDB`).
    pub fn from_caffe_name(name: &str) -> Option<Self> {
        match name {
            "LEVELDB" => Some(Self::LevelDb),
            "LMDB" => Some(Self::Lmdb),
            _ => None,
        }
    }
}

/// A store refused or failed: which one, and why.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {detail}")]
pub struct StoreError {
    /// The store's folder.
    pub path: String,
    /// What went wrong.
    pub detail: String,
}

pub(crate) fn store_error(path: &Path, detail: impl std::fmt::Display) -> StoreError {
    StoreError {
        path: path.display().to_string(),
        detail: detail.to_string(),
    }
}

/// What a folder that is not a store of `wanted` looks like instead, for
/// the error.
fn what_else(path: &Path, wanted: Backend) -> String {
    if !path.exists() {
        "no such folder".into()
    } else if path.is_file() {
        "a file, not a store's folder".into()
    } else if wanted == Backend::Lmdb && path.join("CURRENT").is_file() {
        "a LevelDB store, not an LMDB (set `backend: LEVELDB`)".into()
    } else if wanted == Backend::LevelDb && path.join("data.mdb").is_file() {
        "an LMDB, not a LevelDB store (set `backend: LMDB`)".into()
    } else if wanted == Backend::Lmdb {
        "not an LMDB: no data.mdb in it".into()
    } else {
        "not a LevelDB store: no CURRENT file in it".into()
    }
}

type Records<'e> = Database<'e, Bytes, Bytes>;

/// An LMDB opened for reading (Caffe's `LMDB::Open(source, READ)`: read
/// only, no thread-local transactions, and without a lock file where the
/// folder cannot be written).
pub(crate) struct LmdbReader {
    path: PathBuf,
    env: Arc<Env<WithoutTls>>,
}

/// The LMDBs this process has open, by canonical path. LMDB allows one
/// environment per file in a process (heed refuses a second), while
/// Caffe's nets often read one store from several layers (a train net
/// and a "test on train" net): they share it. Entries are weak, so a
/// store closes when its last reader goes.
static OPEN_LMDBS: Mutex<Vec<(PathBuf, Weak<Env<WithoutTls>>)>> = Mutex::new(Vec::new());

impl LmdbReader {
    /// Opens the store in folder `path`, or shares the environment
    /// already open on it.
    pub(crate) fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if !path.join("data.mdb").is_file() {
            return Err(store_error(&path, what_else(&path, Backend::Lmdb)));
        }
        let key = std::fs::canonicalize(&path).map_err(|e| store_error(&path, e))?;
        let mut open_ones = OPEN_LMDBS.lock().unwrap_or_else(|e| e.into_inner());
        open_ones.retain(|(_, env)| env.strong_count() > 0);
        if let Some(env) = open_ones
            .iter()
            .find(|(p, _)| *p == key)
            .and_then(|(_, env)| env.upgrade())
        {
            return Ok(Self { path, env });
        }
        let env = Arc::new(Self::open_env(&path)?);
        open_ones.push((key, Arc::downgrade(&env)));
        Ok(Self { path, env })
    }

    fn open_env(path: &Path) -> Result<Env<WithoutTls>, StoreError> {
        let open = |flags: EnvFlags| {
            let mut options = EnvOpenOptions::new().read_txn_without_tls();
            // SAFETY: READ_ONLY (and NO_LOCK where the folder is read-only):
            // this process never writes the map, and Caffe's stores are
            // not written while they are read.
            unsafe {
                options.flags(flags);
                options.open(path)
            }
        };
        let fail = |e: heed::Error| store_error(path, format!("cannot open the LMDB: {e}"));
        // A store whose last reader was just dropped may still be closing.
        let mut tries = 0;
        loop {
            match open(EnvFlags::READ_ONLY) {
                Ok(env) => return Ok(env),
                Err(heed::Error::EnvAlreadyOpened) if tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                // A folder this process cannot write (Caffe retries so
                // too), or a lock file held open by another LMDB build of
                // another lock format (a `caffe` reading the store now):
                // read without the lock table, as nothing writes a store
                // while it is trained from.
                Err(heed::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::PermissionDenied
                            | std::io::ErrorKind::ReadOnlyFilesystem
                    ) =>
                {
                    return open(EnvFlags::READ_ONLY | EnvFlags::NO_LOCK).map_err(fail);
                }
                Err(heed::Error::Mdb(heed::MdbError::VersionMismatch)) => {
                    return open(EnvFlags::READ_ONLY | EnvFlags::NO_LOCK).map_err(fail);
                }
                Err(e) => return Err(fail(e)),
            }
        }
    }

    /// The store's folder.
    pub(crate) fn path(&self) -> &Path {
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
    pub(crate) fn cycle(
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

/// A new LMDB, records committed every 1000 puts, written into a hidden
/// partial folder that [`finish`](Self::finish) renames.
pub(crate) struct LmdbWriter {
    path: PathBuf,
    partial: PathBuf,
    env: Env,
    pending: Vec<(Vec<u8>, Vec<u8>)>,
    written: usize,
    finished: bool,
}

impl LmdbWriter {
    fn create(path: &Path) -> Result<Self, StoreError> {
        let (path, partial) = partial_folder(path)?;
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

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
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

    fn finish(mut self) -> Result<usize, StoreError> {
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

/// A new store's final path and the hidden partial folder beside it that
/// it is written into: `path` must not exist (Caffe's tools refuse to
/// write into an existing store too).
fn partial_folder(path: &Path) -> Result<(PathBuf, PathBuf), StoreError> {
    if path.exists() {
        return Err(store_error(
            path,
            "exists already; remove it or choose another name",
        ));
    }
    let name = path
        .file_name()
        .ok_or_else(|| store_error(path, "names no folder"))?
        .to_string_lossy()
        .into_owned();
    let partial = path.with_file_name(format!(
        ".{name}{}{}",
        blob_runtime::PARTIAL_MARK,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).map_err(|e| store_error(&partial, e))?;
    Ok((path.to_path_buf(), partial))
}

/// A store opened for reading (Caffe's `db::GetDB(backend)->Open(source,
/// READ)`): an LMDB read only (without a lock file where the folder
/// cannot be written), or a LevelDB store, where LevelDB's own rules
/// apply: opening it replays its log, which may write a table file into
/// the folder, as Caffe's LevelDB does.
pub struct StoreReader(Reader);

enum Reader {
    Lmdb(LmdbReader),
    LevelDb(crate::leveldb::LevelDbReader),
}

impl StoreReader {
    /// Opens the store in folder `path`; a folder that is not a store of
    /// that kind is an error saying what it is instead.
    pub fn open(path: impl AsRef<Path>, backend: Backend) -> Result<Self, StoreError> {
        let path = path.as_ref();
        Ok(Self(match backend {
            Backend::Lmdb => Reader::Lmdb(LmdbReader::open(path)?),
            Backend::LevelDb => {
                if !path.join("CURRENT").is_file() {
                    return Err(store_error(path, what_else(path, Backend::LevelDb)));
                }
                Reader::LevelDb(crate::leveldb::LevelDbReader::new(path))
            }
        }))
    }

    /// The store's folder.
    pub fn path(&self) -> &Path {
        match &self.0 {
            Reader::Lmdb(r) => r.path(),
            Reader::LevelDb(r) => r.path(),
        }
    }

    /// Calls `visit(key, value)` on every record in key order, starting
    /// over at the first after the last (Caffe's cursor `SeekToFirst`
    /// when it is no longer valid) until `visit` returns `false`;
    /// `restarted` is told each time the store starts over. An empty
    /// store is an error: it would give no batch ever.
    pub fn cycle(
        &self,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        restarted: &mut dyn FnMut(),
    ) -> Result<(), StoreError> {
        match &self.0 {
            Reader::Lmdb(r) => r.cycle(visit, restarted),
            Reader::LevelDb(r) => r.cycle(visit, restarted),
        }
    }
}

/// A new store written as Caffe's tools write it; it appears under its
/// name only when [`finish`](Self::finish) has written it all, so a
/// folder named `path` is never a half-written store (a writer dropped
/// unfinished takes its partial folder with it).
///
/// ```
/// use blob_data::{Backend, StoreReader, StoreWriter};
/// for backend in [Backend::Lmdb, Backend::LevelDb] {
///     let dir = std::env::temp_dir().join(format!("blobflow-store-doc-{}-{backend:?}", std::process::id()));
///     let _ = std::fs::remove_dir_all(&dir);
///     let mut w = StoreWriter::create(&dir, backend)?;
///     w.put(b"00000001", b"one")?;
///     w.put(b"00000000", b"zero")?;
///     assert_eq!(w.finish()?, 2);
///     let mut seen = Vec::new();
///     StoreReader::open(&dir, backend)?.cycle(
///         &mut |key, value| { seen.push((key.to_vec(), value.to_vec())); seen.len() < 3 },
///         &mut || {},
///     )?;
///     assert_eq!(seen[0], (b"00000000".to_vec(), b"zero".to_vec()));
///     assert_eq!(seen[2].0, b"00000000"); // started over after the last
///     std::fs::remove_dir_all(&dir).unwrap();
/// }
/// # Ok::<(), blob_data::StoreError>(())
/// ```
/// An LMDB is committed every 1000 records; a LevelDB store is
/// snappy-compressed, as Caffe's are.
pub struct StoreWriter(Writer);

enum Writer {
    Lmdb(LmdbWriter),
    // LevelDB's handle is large; one writer is made per store.
    LevelDb(Box<crate::leveldb::LevelDbWriter>),
}

impl StoreWriter {
    /// Starts a store at `path`, which must not exist.
    pub fn create(path: impl AsRef<Path>, backend: Backend) -> Result<Self, StoreError> {
        let path = path.as_ref();
        Ok(Self(match backend {
            Backend::Lmdb => Writer::Lmdb(LmdbWriter::create(path)?),
            Backend::LevelDb => {
                let (path, partial) = partial_folder(path)?;
                Writer::LevelDb(Box::new(crate::leveldb::LevelDbWriter::create(
                    path, partial,
                )?))
            }
        }))
    }

    /// Adds one record.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        match &mut self.0 {
            Writer::Lmdb(w) => w.put(key, value),
            Writer::LevelDb(w) => w.put(key, value),
        }
    }

    /// Writes what is left to disk and gives the store its name; returns
    /// how many records it holds.
    pub fn finish(self) -> Result<usize, StoreError> {
        match self.0 {
            Writer::Lmdb(w) => w.finish(),
            Writer::LevelDb(w) => (*w).finish(),
        }
    }
}
