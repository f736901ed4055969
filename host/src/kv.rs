//! `fermyon:spin/key-value@2.0.0`, backed by SQLite files in Spin's own layout (table
//! `spin_key_value(store, key, value)`), so a `.spin/sqlite_key_value.db` written by
//! `spin up` and one written by edgehost are interchangeable.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension, params};
use wasmtime::component::Resource;

use crate::bindings::fermyon::spin::key_value::{self, Error};
use crate::state::InstanceState;

/// How many stores one instance may hold open at once (Spin's default capacity).
pub const MAX_OPEN_STORES: usize = 256;

/// The stores the host knows, by label.
#[derive(Default)]
pub struct KvStores {
    stores: HashMap<String, Arc<KvStore>>,
}

impl KvStores {
    /// Opens the "default" store at `default_path` plus the runtime-config stores.
    pub fn open(default_path: &Path, extra: &[(String, Option<PathBuf>)]) -> Result<KvStores> {
        let mut stores = HashMap::new();
        stores.insert(
            "default".to_string(),
            Arc::new(KvStore::open("default", Some(default_path))?),
        );
        for (label, path) in extra {
            stores.insert(
                label.clone(),
                Arc::new(KvStore::open(label, path.as_deref())?),
            );
        }
        Ok(KvStores { stores })
    }

    pub fn get(&self, label: &str) -> Option<&Arc<KvStore>> {
        self.stores.get(label)
    }

    pub fn contains(&self, label: &str) -> bool {
        self.stores.contains_key(label)
    }
}

/// One labelled store: a single SQLite connection (key-value operations are single
/// statements, so one serialised connection per store is enough).
pub struct KvStore {
    label: String,
    conn: Arc<Mutex<Connection>>,
}

impl KvStore {
    fn open(label: &str, path: Option<&Path>) -> Result<KvStore> {
        let conn = match path {
            Some(p) => {
                if let Some(dir) = p.parent() {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("cannot create {}", dir.display()))?;
                }
                Connection::open(p)
            }
            None => Connection::open_in_memory(),
        }
        .with_context(|| format!("cannot open key-value store `{label}`"))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        if path.is_some() {
            // WAL lets other processes (e.g. a DB browser) read while we write.
            conn.pragma_update(None, "journal_mode", "WAL")?;
        }
        conn.execute(
            "CREATE TABLE IF NOT EXISTS spin_key_value (
                store TEXT NOT NULL,
                key   TEXT NOT NULL,
                value BLOB NOT NULL,
                PRIMARY KEY (store, key)
            )",
            [],
        )
        .with_context(|| format!("cannot initialise key-value store `{label}`"))?;
        Ok(KvStore {
            label: label.to_string(),
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `f` on the connection on the blocking pool; SQLite errors become `other`.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection, &str) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, Error> {
        let conn = self.conn.clone();
        let label = self.label.clone();
        tokio::task::spawn_blocking(move || {
            let conn = conn
                .lock()
                .map_err(|_| Error::Other("store lock poisoned".into()))?;
            f(&conn, &label).map_err(|e| Error::Other(e.to_string()))
        })
        .await
        .map_err(|e| Error::Other(format!("key-value task failed: {e}")))?
    }

    pub async fn get(&self, key: String) -> Result<Option<Vec<u8>>, Error> {
        self.run(move |c, store| {
            c.prepare_cached("SELECT value FROM spin_key_value WHERE store = ?1 AND key = ?2")?
                .query_row(params![store, key], |r| r.get(0))
                .optional()
        })
        .await
    }

    pub async fn set(&self, key: String, value: Vec<u8>) -> Result<(), Error> {
        self.run(move |c, store| {
            c.prepare_cached(
                "INSERT INTO spin_key_value (store, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT(store, key) DO UPDATE SET value = excluded.value",
            )?
            .execute(params![store, key, value])
            .map(drop)
        })
        .await
    }

    pub async fn delete(&self, key: String) -> Result<(), Error> {
        self.run(move |c, store| {
            c.prepare_cached("DELETE FROM spin_key_value WHERE store = ?1 AND key = ?2")?
                .execute(params![store, key])
                .map(drop)
        })
        .await
    }

    pub async fn exists(&self, key: String) -> Result<bool, Error> {
        self.run(move |c, store| {
            c.prepare_cached("SELECT 1 FROM spin_key_value WHERE store = ?1 AND key = ?2")?
                .exists(params![store, key])
        })
        .await
    }

    pub async fn get_keys(&self) -> Result<Vec<String>, Error> {
        self.run(move |c, store| {
            let mut stmt =
                c.prepare_cached("SELECT key FROM spin_key_value WHERE store = ?1 ORDER BY key")?;
            let keys = stmt
                .query_map(params![store], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()?;
            Ok(keys)
        })
        .await
    }
}

/// The resource behind a guest's `store` handle.
pub struct KvStoreHandle(Arc<KvStore>);

impl InstanceState {
    fn kv_store(&self, handle: &Resource<KvStoreHandle>) -> wasmtime::Result<Arc<KvStore>> {
        Ok(self.table.get(handle)?.0.clone())
    }
}

impl key_value::Host for InstanceState {}

impl key_value::HostStore for InstanceState {
    async fn open(
        &mut self,
        label: String,
    ) -> wasmtime::Result<Result<Resource<KvStoreHandle>, Error>> {
        if !self.env.kv_allowed.contains(&label) {
            return Ok(Err(Error::AccessDenied));
        }
        let Some(store) = self.services.kv.get(&label).cloned() else {
            return Ok(Err(Error::NoSuchStore));
        };
        if self.open_stores >= MAX_OPEN_STORES {
            return Ok(Err(Error::StoreTableFull));
        }
        let handle = self.table.push(KvStoreHandle(store))?;
        self.open_stores += 1;
        Ok(Ok(handle))
    }

    async fn get(
        &mut self,
        store: Resource<KvStoreHandle>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        Ok(self.kv_store(&store)?.get(key).await)
    }

    async fn set(
        &mut self,
        store: Resource<KvStoreHandle>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(self.kv_store(&store)?.set(key, value).await)
    }

    async fn delete(
        &mut self,
        store: Resource<KvStoreHandle>,
        key: String,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(self.kv_store(&store)?.delete(key).await)
    }

    async fn exists(
        &mut self,
        store: Resource<KvStoreHandle>,
        key: String,
    ) -> wasmtime::Result<Result<bool, Error>> {
        Ok(self.kv_store(&store)?.exists(key).await)
    }

    async fn get_keys(
        &mut self,
        store: Resource<KvStoreHandle>,
    ) -> wasmtime::Result<Result<Vec<String>, Error>> {
        Ok(self.kv_store(&store)?.get_keys().await)
    }

    async fn drop(&mut self, store: Resource<KvStoreHandle>) -> wasmtime::Result<()> {
        self.table.delete(store)?;
        self.open_stores = self.open_stores.saturating_sub(1);
        Ok(())
    }
}
