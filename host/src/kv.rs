//! `fermyon:spin/key-value@2.0.0` on two back ends, chosen per store label by runtime
//! config:
//!
//! - SQLite files in Spin's own layout (table `spin_key_value(store, key, value)`), so a
//!   `.spin/sqlite_key_value.db` written by `spin up` and one written by edgehost are
//!   interchangeable (the default);
//! - Redis (`type = "redis"`, `url`), as Spin's Redis store: a key is the Redis key itself
//!   (no prefix), so the store is the whole Redis database the URL names, and `get-keys`
//!   lists that database. Keys and values are binary-safe.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use redis::AsyncCommands;
use rusqlite::{Connection, OptionalExtension, params};
use wasmtime::component::{HasData, Linker, Resource};

use crate::bindings::fermyon::spin::key_value::{self, Error, Store};
use crate::handles::Handles;
use crate::runtime_config::KvStoreConfig;

/// How many stores one instance may hold open at once (Spin's default capacity).
pub const MAX_OPEN_STORES: usize = 256;
/// Largest value or key list handed to a guest (Spin's limit).
const MAX_RESULT_BYTES: usize = 128 * 1024 * 1024;

/// The stores the host knows, by label.
#[derive(Default)]
pub struct KvStores {
    stores: HashMap<String, Arc<KvStore>>,
}

impl KvStores {
    /// Opens the "default" store at `default_path` (unless runtime config places it) plus
    /// the runtime-config stores.
    pub fn open(default_path: &Path, extra: &[(String, KvStoreConfig)]) -> Result<KvStores> {
        let mut stores = HashMap::new();
        if !extra.iter().any(|(label, _)| label == "default") {
            stores.insert(
                "default".to_string(),
                Arc::new(KvStore::open_sqlite("default", Some(default_path))?),
            );
        }
        for (label, config) in extra {
            let store = match config {
                KvStoreConfig::Sqlite(path) => KvStore::open_sqlite(label, path.as_deref())?,
                KvStoreConfig::Redis { url } => KvStore::open_redis(label, url)?,
            };
            stores.insert(label.clone(), Arc::new(store));
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

/// One labelled store.
pub struct KvStore {
    label: String,
    backend: Backend,
}

enum Backend {
    /// A single SQLite connection: key-value operations are single statements, so one
    /// serialised connection per store is enough.
    Sqlite(Arc<Mutex<Connection>>),
    Redis(RedisPool),
}

impl KvStore {
    fn open_sqlite(label: &str, path: Option<&Path>) -> Result<KvStore> {
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
            backend: Backend::Sqlite(Arc::new(Mutex::new(conn))),
        })
    }

    /// A Redis store; connections are made on first use, so Redis need not be up yet.
    fn open_redis(label: &str, url: &str) -> Result<KvStore> {
        let client = redis::Client::open(url)
            .with_context(|| format!("[key_value_store.{label}]: invalid Redis URL"))?;
        Ok(KvStore {
            label: label.to_string(),
            backend: Backend::Redis(RedisPool::new(client)),
        })
    }

    /// Runs `f` on the SQLite connection on the blocking pool; SQLite errors become `other`.
    async fn sqlite<T: Send + 'static>(
        &self,
        conn: &Arc<Mutex<Connection>>,
        f: impl FnOnce(&Connection, &str) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, Error> {
        let conn = conn.clone();
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
        let value = match &self.backend {
            Backend::Sqlite(conn) => {
                self.sqlite(conn, move |c, store| {
                    c.prepare_cached(
                        "SELECT value FROM spin_key_value WHERE store = ?1 AND key = ?2",
                    )?
                    .query_row(params![store, key], |r| r.get(0))
                    .optional()
                })
                .await?
            }
            Backend::Redis(pool) => {
                pool.run(|mut c| {
                    let key = key.clone();
                    async move { c.get::<_, Option<Vec<u8>>>(key.as_bytes()).await }
                })
                .await?
            }
        };
        if value.as_ref().is_some_and(|v| v.len() > MAX_RESULT_BYTES) {
            return Err(Error::Other(format!(
                "query result exceeds limit of {MAX_RESULT_BYTES} bytes"
            )));
        }
        Ok(value)
    }

    pub async fn set(&self, key: String, value: Vec<u8>) -> Result<(), Error> {
        match &self.backend {
            Backend::Sqlite(conn) => {
                self.sqlite(conn, move |c, store| {
                    c.prepare_cached(
                        "INSERT INTO spin_key_value (store, key, value) VALUES (?1, ?2, ?3)
                         ON CONFLICT(store, key) DO UPDATE SET value = excluded.value",
                    )?
                    .execute(params![store, key, value])
                    .map(drop)
                })
                .await
            }
            Backend::Redis(pool) => {
                pool.run(|mut c| {
                    let (key, value) = (key.clone(), value.clone());
                    async move { c.set::<_, _, ()>(key.as_bytes(), value).await }
                })
                .await
            }
        }
    }

    pub async fn delete(&self, key: String) -> Result<(), Error> {
        match &self.backend {
            Backend::Sqlite(conn) => {
                self.sqlite(conn, move |c, store| {
                    c.prepare_cached("DELETE FROM spin_key_value WHERE store = ?1 AND key = ?2")?
                        .execute(params![store, key])
                        .map(drop)
                })
                .await
            }
            Backend::Redis(pool) => {
                pool.run(|mut c| {
                    let key = key.clone();
                    async move { c.del::<_, ()>(key.as_bytes()).await }
                })
                .await
            }
        }
    }

    pub async fn exists(&self, key: String) -> Result<bool, Error> {
        match &self.backend {
            Backend::Sqlite(conn) => {
                self.sqlite(conn, move |c, store| {
                    c.prepare_cached("SELECT 1 FROM spin_key_value WHERE store = ?1 AND key = ?2")?
                        .exists(params![store, key])
                })
                .await
            }
            Backend::Redis(pool) => {
                pool.run(|mut c| {
                    let key = key.clone();
                    async move { c.exists::<_, bool>(key.as_bytes()).await }
                })
                .await
            }
        }
    }

    pub async fn get_keys(&self) -> Result<Vec<String>, Error> {
        let keys = match &self.backend {
            Backend::Sqlite(conn) => {
                self.sqlite(conn, move |c, store| {
                    let mut stmt = c.prepare_cached(
                        "SELECT key FROM spin_key_value WHERE store = ?1 ORDER BY key",
                    )?;
                    let keys = stmt
                        .query_map(params![store], |r| r.get(0))?
                        .collect::<rusqlite::Result<Vec<String>>>()?;
                    Ok(keys)
                })
                .await?
            }
            Backend::Redis(pool) => pool.run(scan_keys).await?,
        };
        let bytes: usize = keys.iter().map(|k| k.len() + 24).sum();
        if bytes > MAX_RESULT_BYTES {
            return Err(Error::Other(format!(
                "query result exceeds limit of {MAX_RESULT_BYTES} bytes"
            )));
        }
        Ok(keys)
    }
}

/// Every key of the connection's database, with `SCAN` (which, unlike `KEYS`, does not
/// block the server while it walks a large keyspace).
async fn scan_keys(mut conn: redis::aio::MultiplexedConnection) -> redis::RedisResult<Vec<String>> {
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        for key in batch {
            let key = String::from_utf8(key).map_err(|_| {
                redis::RedisError::from((
                    redis::ErrorKind::TypeError,
                    "a key in the store is not valid UTF-8",
                ))
            })?;
            keys.push(key);
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    // SCAN may return a key more than once.
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// Connections per Redis store. Each is multiplexed (many requests in flight on one
/// socket); a few spread the load and keep one slow reply from delaying every request.
const REDIS_CONNECTIONS: usize = 4;
const REDIS_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REDIS_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A small pool of multiplexed Redis connections, each made on first use and made again
/// after it breaks.
struct RedisPool {
    client: redis::Client,
    slots: Vec<tokio::sync::Mutex<Option<redis::aio::MultiplexedConnection>>>,
    next: AtomicUsize,
}

impl RedisPool {
    fn new(client: redis::Client) -> RedisPool {
        RedisPool {
            client,
            slots: (0..REDIS_CONNECTIONS)
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Runs `f` on one of the connections (round robin); Redis errors become `other`. A
    /// connection found broken (Redis restarted since it was made) is replaced and `f`
    /// run once more on the new one: every key-value operation is idempotent, so the
    /// guest does not see a restart that is over.
    async fn run<T, F, Fut>(&self, f: F) -> Result<T, Error>
    where
        F: Fn(redis::aio::MultiplexedConnection) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let slot = &self.slots[self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len()];
        match self.run_on(slot, &f).await {
            Err(e) if is_broken(&e) => self.run_on(slot, &f).await,
            result => result,
        }
        .map_err(|e| Error::Other(e.to_string()))
    }

    async fn run_on<T, F, Fut>(
        &self,
        slot: &tokio::sync::Mutex<Option<redis::aio::MultiplexedConnection>>,
        f: &F,
    ) -> redis::RedisResult<T>
    where
        F: Fn(redis::aio::MultiplexedConnection) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let conn = {
            let mut slot = slot.lock().await;
            match slot.as_ref() {
                Some(c) => c.clone(),
                None => {
                    let config = redis::AsyncConnectionConfig::new()
                        .set_connection_timeout(REDIS_CONNECT_TIMEOUT)
                        .set_response_timeout(REDIS_RESPONSE_TIMEOUT);
                    let c = self
                        .client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?;
                    *slot = Some(c.clone());
                    c
                }
            }
        };
        let result = f(conn).await;
        if result.as_ref().is_err_and(is_broken) {
            *slot.lock().await = None;
        }
        result
    }
}

/// The connection is gone (as opposed to a command Redis refused).
fn is_broken(e: &redis::RedisError) -> bool {
    e.is_unrecoverable_error() || e.is_connection_dropped() || e.is_io_error()
}

/// The stores one instance has open, by `store` handle.
pub type OpenStores = Handles<Arc<KvStore>>;

/// A new instance's (empty) table of open stores, with Spin's capacity.
pub const fn open_stores() -> OpenStores {
    Handles::new(MAX_OPEN_STORES)
}

/// What the key-value interface sees of one instance.
pub struct KvView<'a> {
    /// The labels the component may open (its `key_value_stores`).
    pub allowed: &'a HashSet<String>,
    pub stores: &'a KvStores,
    pub open: &'a mut OpenStores,
}

struct KeyValue;

impl HasData for KeyValue {
    type Data<'a> = KvView<'a>;
}

/// Links `fermyon:spin/key-value`, with `view` to find an instance's part.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> KvView<'_>,
) -> wasmtime::Result<()> {
    key_value::add_to_linker::<T, KeyValue>(linker, view)
}

impl KvView<'_> {
    fn store(&self, handle: &Resource<Store>) -> wasmtime::Result<Arc<KvStore>> {
        Ok(self.open.get(handle)?.clone())
    }
}

impl key_value::Host for KvView<'_> {}

impl key_value::HostStore for KvView<'_> {
    async fn open(&mut self, label: String) -> wasmtime::Result<Result<Resource<Store>, Error>> {
        if !self.allowed.contains(&label) {
            return Ok(Err(Error::AccessDenied));
        }
        let Some(store) = self.stores.get(&label).cloned() else {
            return Ok(Err(Error::NoSuchStore));
        };
        Ok(self.open.push(store).map_err(|_| Error::StoreTableFull))
    }

    async fn get(
        &mut self,
        store: Resource<Store>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        Ok(self.store(&store)?.get(key).await)
    }

    async fn set(
        &mut self,
        store: Resource<Store>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(self.store(&store)?.set(key, value).await)
    }

    async fn delete(
        &mut self,
        store: Resource<Store>,
        key: String,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(self.store(&store)?.delete(key).await)
    }

    async fn exists(
        &mut self,
        store: Resource<Store>,
        key: String,
    ) -> wasmtime::Result<Result<bool, Error>> {
        Ok(self.store(&store)?.exists(key).await)
    }

    async fn get_keys(
        &mut self,
        store: Resource<Store>,
    ) -> wasmtime::Result<Result<Vec<String>, Error>> {
        Ok(self.store(&store)?.get_keys().await)
    }

    async fn drop(&mut self, store: Resource<Store>) -> wasmtime::Result<()> {
        self.open.remove(store)?;
        Ok(())
    }
}
