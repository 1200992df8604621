//! LevelDB stores, as Caffe's `db::LevelDB` reads and writes them
//! (snappy-compressed blocks), through rusty-leveldb.

use std::path::{Path, PathBuf};

use rusty_leveldb::{DB, LdbIterator, Options, compressor};

use crate::store::{StoreError, store_error};

/// A LevelDB store to read. LevelDB's handles are not shared between
/// threads, so the database is opened by the thread that reads it.
pub(crate) struct LevelDbReader {
    path: PathBuf,
}

impl LevelDbReader {
    pub(crate) fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// See [`StoreReader::cycle`](crate::StoreReader::cycle).
    pub(crate) fn cycle(
        &self,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        restarted: &mut dyn FnMut(),
    ) -> Result<(), StoreError> {
        let options = Options {
            create_if_missing: false,
            paranoid_checks: true,
            ..Options::default()
        };
        let mut db = DB::open(&self.path, options)
            .map_err(|e| store_error(&self.path, format!("cannot open the LevelDB store: {e}")))?;
        loop {
            let mut records = db
                .new_iter()
                .map_err(|e| store_error(&self.path, format!("cannot read: {e}")))?;
            let mut any = false;
            while let Some((key, value)) = records.next() {
                any = true;
                if !visit(&key, &value) {
                    return Ok(());
                }
            }
            if !any {
                return Err(store_error(
                    &self.path,
                    "the LevelDB store holds no records",
                ));
            }
            restarted();
        }
    }
}

/// A new LevelDB store, written into its partial folder.
pub(crate) struct LevelDbWriter {
    path: PathBuf,
    partial: PathBuf,
    db: Option<DB>,
    written: usize,
}

impl LevelDbWriter {
    pub(crate) fn create(path: PathBuf, partial: PathBuf) -> Result<Self, StoreError> {
        let options = Options {
            create_if_missing: true,
            error_if_exists: false,
            // Caffe's: a 256 MB write buffer, snappy-compressed blocks.
            write_buffer_size: 256 << 20,
            compressor: <compressor::SnappyCompressor as compressor::CompressorId>::ID,
            ..Options::default()
        };
        let db = DB::open(&partial, options)
            .map_err(|e| store_error(&partial, format!("cannot create the LevelDB store: {e}")))?;
        Ok(Self {
            path,
            partial,
            db: Some(db),
            written: 0,
        })
    }

    pub(crate) fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let db = self.db.as_mut().expect("open until finished");
        db.put(key, value).map_err(|e| {
            store_error(
                &self.partial,
                format!("cannot write key {:?}: {e}", String::from_utf8_lossy(key)),
            )
        })?;
        self.written += 1;
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<usize, StoreError> {
        let mut db = self.db.take().expect("open until finished");
        db.flush()
            .and_then(|()| db.close())
            .map_err(|e| store_error(&self.partial, e))?;
        drop(db);
        std::fs::rename(&self.partial, &self.path).map_err(|e| store_error(&self.path, e))?;
        Ok(self.written)
    }
}

/// A writer dropped before it finished takes its partial folder with it.
impl Drop for LevelDbWriter {
    fn drop(&mut self) {
        if let Some(db) = self.db.take() {
            drop(db);
            let _ = std::fs::remove_dir_all(&self.partial);
        }
    }
}
