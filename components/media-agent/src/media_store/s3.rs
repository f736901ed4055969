//! The media store in an S3-compatible bucket (AWS S3, Cloudflare R2, Garage, Ceph RGW),
//! addressed path-style (`<endpoint>/<bucket>/<object>`), requests signed with SigV4.
//!
//! Writes go to a local spool first (`<state>/spool/`: a kept segment is a hard link to
//! the file the HLS writer wrote, a playlist a file written whole), so they stay as fast as
//! [`LocalStore`]'s and never wait on the network; an uploader task sends the spool to the
//! bucket in the order it was written, a few objects at a time (a playlist or a deletion
//! alone, after everything before it), retrying with a backoff (capped at [`MAX_BACKOFF`])
//! for as long as the store is down, and removes each spooled copy once the store has it. A playlist written again before it was uploaded is
//! uploaded once, its newest version. Reads look in the spool first. Deletions are queued
//! in the same order (and kept as files in the spool, so that a restart still does them).
//! An agent restarted with a spool uploads what is in it.

pub use super::bucket::{Client, S3Settings};

use super::{LocalStore, MediaStore, checked, is_object_name};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// The longest pause between two tries of an upload the store did not take.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// What the uploader has to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Task {
    Upload(String),
    DeletePrefix(String),
}

/// The spool's queue: tasks by their sequence number; each spooled object's number and
/// version (a write again gets the next number: it is uploaded after what came before).
#[derive(Debug, Default)]
struct Queue {
    next: u64,
    order: BTreeMap<u64, Task>,
    objects: HashMap<String, (u64, u64)>,
    version: u64,
    /// What the uploader is sending now, and since when the store has refused it.
    failing_since: Option<Instant>,
}

impl Queue {
    fn push(&mut self, task: Task) -> u64 {
        let seq = self.next;
        self.next += 1;
        self.order.insert(seq, task);
        seq
    }

    fn spooled(&mut self, object: &str) {
        if let Some((seq, _)) = self.objects.remove(object) {
            self.order.remove(&seq);
        }
        let seq = self.push(Task::Upload(object.to_string()));
        self.version += 1;
        self.objects.insert(object.to_string(), (seq, self.version));
    }
}

/// The local spool: the files (`<spool>/objects/<object>`), the deletions to do
/// (`<spool>/deletions/<prefix, / as +>`), and the queue.
#[derive(Debug)]
struct Spool {
    files: LocalStore,
    deletions: PathBuf,
    queue: Mutex<Queue>,
    wake: tokio::sync::Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn under(object: &str, prefix: &str) -> bool {
    object
        .strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// A temporary file of [`LocalStore`] (`<name>.<12 hex>.tmp`), left by a crash.
fn is_temporary(name: &str) -> bool {
    name.strip_suffix(".tmp")
        .and_then(|stem| stem.rsplit_once('.'))
        .is_some_and(|(_, hex)| hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl Spool {
    /// The spool in `dir`, its queue rebuilt from what an earlier run left (oldest first).
    fn open(dir: &Path) -> io::Result<Spool> {
        let files = LocalStore::new(dir.join("objects"));
        let deletions = dir.join("deletions");
        std::fs::create_dir_all(files.root())?;
        std::fs::create_dir_all(&deletions)?;
        let mut found: Vec<(SystemTime, Task)> = Vec::new();
        let mut stack = vec![files.root().to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d)? {
                let entry = entry?;
                let kind = entry.file_type()?;
                let path = entry.path();
                if kind.is_dir() {
                    stack.push(path);
                } else if kind.is_file() {
                    let name = entry.file_name().to_string_lossy().to_string();
                    if is_temporary(&name) {
                        let _ = std::fs::remove_file(&path);
                        continue;
                    }
                    let object = path
                        .strip_prefix(files.root())
                        .ok()
                        .and_then(|p| p.to_str())
                        .map(str::to_string)
                        .filter(|o| is_object_name(o));
                    if let Some(object) = object {
                        found.push((entry.metadata()?.modified()?, Task::Upload(object)));
                    }
                }
            }
        }
        for entry in std::fs::read_dir(&deletions)? {
            let entry = entry?;
            let prefix = entry.file_name().to_string_lossy().replace('+', "/");
            if is_object_name(&prefix) {
                found.push((entry.metadata()?.modified()?, Task::DeletePrefix(prefix)));
            }
        }
        // Oldest first; written in the same instant, a playlist after what it lists.
        let playlist = |t: &Task| matches!(t, Task::Upload(o) if o.ends_with(".m3u8"));
        found.sort_by_key(|a| (a.0, playlist(&a.1)));
        let mut queue = Queue::default();
        for (_, task) in found {
            match task {
                Task::Upload(object) => queue.spooled(&object),
                task => {
                    queue.push(task);
                }
            }
        }
        Ok(Spool {
            files,
            deletions,
            queue: Mutex::new(queue),
            wake: tokio::sync::Notify::new(),
        })
    }

    fn deletion_marker(&self, prefix: &str) -> PathBuf {
        self.deletions.join(prefix.replace('/', "+"))
    }

    fn spooled_path(&self, object: &str) -> PathBuf {
        self.files.root().join(object)
    }

    /// The spooled objects and deletions still to do.
    fn pending(&self) -> usize {
        lock(&self.queue).order.len()
    }
}

/// The S3-compatible media store: see the module's documentation.
pub struct S3Store {
    client: Client,
    spool: Arc<Spool>,
    /// The store's own runtime: the uploader, and the reads of the trait's synchronous
    /// calls, whatever runtime (or none) the caller runs on.
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store")
            .field("client", &self.client)
            .field("spool", &self.spool.files.root())
            .finish_non_exhaustive()
    }
}

impl Drop for S3Store {
    fn drop(&mut self) {
        // Dropped from async code too: nothing may block here. What is spooled stays
        // spooled for the next run.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl S3Store {
    /// The store in `settings`' bucket, spooling in `spool_dir` (made if missing); starts
    /// uploading what an earlier run left there.
    pub fn new(settings: S3Settings, spool_dir: &Path) -> io::Result<S3Store> {
        let client = Client::new(settings)?;
        let spool = Arc::new(Spool::open(spool_dir)?);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("media-store")
            .enable_all()
            .build()?;
        runtime.spawn(upload(client.clone(), spool.clone()));
        Ok(S3Store {
            client,
            spool,
            runtime: Some(runtime),
        })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs `work` on the store's runtime and waits for it (the trait is synchronous).
    fn block<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = io::Result<T>> + Send + 'static,
    ) -> io::Result<T> {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| io::Error::other("the media store stopped"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        runtime.spawn(async move {
            let _ = tx.send(work.await);
        });
        rx.recv()
            .map_err(|_| io::Error::other("the media store stopped"))?
    }

    fn enqueue(
        &self,
        object: &str,
        write: impl FnOnce(&LocalStore) -> io::Result<u64>,
    ) -> io::Result<u64> {
        let mut queue = lock(&self.spool.queue);
        let size = write(&self.spool.files)?;
        queue.spooled(object);
        drop(queue);
        self.spool.wake.notify_one();
        Ok(size)
    }
}

impl MediaStore for S3Store {
    fn keep_file(&self, dir: &Path, name: &str, object: &str) -> io::Result<u64> {
        checked(object)?;
        self.enqueue(object, |files| files.keep_file(dir, name, object))
    }

    fn put(&self, object: &str, bytes: &[u8]) -> io::Result<()> {
        checked(object)?;
        self.enqueue(object, |files| files.put(object, bytes).map(|()| 0))
            .map(|_| ())
    }

    fn get(&self, object: &str) -> io::Result<Vec<u8>> {
        match std::fs::read(self.spool.spooled_path(checked(object)?)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            read => return read,
        }
        let client = self.client.clone();
        let object = object.to_string();
        self.block(async move { client.get(&object).await })?
            .ok_or_else(|| io::ErrorKind::NotFound.into())
    }

    fn exists(&self, object: &str) -> bool {
        if !is_object_name(object) {
            return false;
        }
        if self.spool.spooled_path(object).is_file() {
            return true;
        }
        let client = self.client.clone();
        let object = object.to_string();
        self.block(async move { client.head(&object).await })
            .unwrap_or(false)
    }

    fn delete_prefix(&self, prefix: &str) -> io::Result<()> {
        checked(prefix)?;
        let mut queue = lock(&self.spool.queue);
        // What is spooled goes at once; what the store has, in turn (a store that is down
        // deletes it once back, as it uploads).
        std::fs::write(self.spool.deletion_marker(prefix), b"")?;
        let gone: Vec<String> = queue
            .objects
            .keys()
            .filter(|o| under(o, prefix))
            .cloned()
            .collect();
        for object in gone {
            if let Some((seq, _)) = queue.objects.remove(&object) {
                queue.order.remove(&seq);
            }
        }
        queue.push(Task::DeletePrefix(prefix.to_string()));
        self.spool.files.delete_prefix(prefix)?;
        drop(queue);
        self.spool.wake.notify_one();
        Ok(())
    }

    fn flushed(&self, prefix: &str) -> bool {
        let queue = lock(&self.spool.queue);
        !queue.order.values().any(|task| match task {
            Task::Upload(object) | Task::DeletePrefix(object) => under(object, prefix),
        })
    }

    fn pending(&self) -> usize {
        self.spool.pending()
    }
}

/// Takes a task the store did off the queue; answers an object deleted while it was
/// being uploaded.
fn finished(
    spool: &Spool,
    queue: &mut Queue,
    seq: u64,
    task: &Task,
    version: u64,
) -> Option<String> {
    match task {
        Task::Upload(object) => match queue.objects.get(object) {
            // Unless it was written again meanwhile: the newer version goes in its turn.
            Some(&(s, v)) if s == seq && v == version => {
                queue.objects.remove(object);
                queue.order.remove(&seq);
                let _ = std::fs::remove_file(spool.spooled_path(object));
                None
            }
            Some(_) => None,
            None => Some(object.clone()),
        },
        Task::DeletePrefix(prefix) => {
            queue.order.remove(&seq);
            let again = queue
                .order
                .values()
                .any(|t| *t == Task::DeletePrefix(prefix.clone()));
            if !again {
                let _ = std::fs::remove_file(spool.deletion_marker(prefix));
            }
            None
        }
    }
}

/// Uploads in flight at most at once.
pub const PARALLEL_UPLOADS: usize = 4;

/// Whether `task` waits for everything before it, and holds back everything after it: a
/// playlist (never in the store before the segments it lists, nor an older version after
/// a newer one) and a deletion. Segments and pictures go side by side.
fn is_barrier(task: &Task) -> bool {
    match task {
        Task::Upload(object) => object.ends_with(".m3u8"),
        Task::DeletePrefix(_) => true,
    }
}

/// Sends one task to the store.
async fn send(client: &Client, spool: &Spool, task: &Task) -> io::Result<()> {
    match task {
        Task::Upload(object) => match tokio::fs::read(spool.spooled_path(object)).await {
            Ok(bytes) => client.put(object, bytes).await,
            // Deleted meanwhile: nothing to send.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        },
        Task::DeletePrefix(prefix) => client.delete_prefix(prefix).await.map(|_| ()),
    }
}

/// The uploader: the spool's tasks in order, up to [`PARALLEL_UPLOADS`] at once (one
/// while the store refuses them), a barrier ([`is_barrier`]) alone; each task stays
/// queued until the store took it.
async fn upload(client: Client, spool: Arc<Spool>) {
    let mut failures = 0u32;
    let mut running = tokio::task::JoinSet::new();
    // The sequence numbers and objects in flight.
    let mut in_flight: HashMap<u64, Option<String>> = HashMap::new();
    loop {
        let limit = if failures > 0 { 1 } else { PARALLEL_UPLOADS };
        {
            let queue = lock(&spool.queue);
            for (seq, task) in &queue.order {
                if running.len() >= limit {
                    break;
                }
                if let Some(object) = in_flight.get(seq) {
                    // Nothing passes a barrier in flight.
                    if object.as_deref().is_none_or(|o| o.ends_with(".m3u8")) {
                        break;
                    }
                    continue;
                }
                let object = match task {
                    Task::Upload(object) => Some(object.clone()),
                    Task::DeletePrefix(_) => None,
                };
                // An object written again while its older version is on its way waits
                // for it (the store keeps the last PUT to land).
                let busy = object
                    .as_ref()
                    .is_some_and(|o| in_flight.values().any(|f| f.as_ref() == Some(o)));
                if is_barrier(task) || busy {
                    if in_flight.is_empty() && !busy {
                        let version = object
                            .as_ref()
                            .and_then(|o| queue.objects.get(o))
                            .map_or(0, |v| v.1);
                        in_flight.insert(*seq, object);
                        let (client, spool, task, seq) =
                            (client.clone(), spool.clone(), task.clone(), *seq);
                        running.spawn(async move {
                            let done = send(&client, &spool, &task).await;
                            (seq, task, version, done)
                        });
                    }
                    break;
                }
                let version = object
                    .as_ref()
                    .and_then(|o| queue.objects.get(o))
                    .map_or(0, |v| v.1);
                in_flight.insert(*seq, object);
                let (client, spool, task, seq) =
                    (client.clone(), spool.clone(), task.clone(), *seq);
                running.spawn(async move {
                    let done = send(&client, &spool, &task).await;
                    (seq, task, version, done)
                });
            }
        }
        if running.is_empty() {
            // Woken by a write; a timed look again in case a wake-up came in between.
            let _ = tokio::time::timeout(Duration::from_secs(1), spool.wake.notified()).await;
            continue;
        }
        // A finished task, or a new write (which may start beside those running).
        let joined = tokio::select! {
            joined = running.join_next() => joined,
            _ = spool.wake.notified() => continue,
        };
        let Some(Ok((seq, task, version, done))) = joined else {
            continue;
        };
        in_flight.remove(&seq);
        match done {
            Ok(()) => {
                failures = 0;
                let orphan = {
                    let mut queue = lock(&spool.queue);
                    if let Some(since) = queue.failing_since.take() {
                        eprintln!(
                            "media-agent: the media store is back after {:.1} s; {} objects to upload",
                            since.elapsed().as_secs_f64(),
                            queue.order.len()
                        );
                    }
                    finished(&spool, &mut queue, seq, &task, version)
                };
                if let Some(object) = orphan {
                    // Deleted while it was being sent: its deletion may have run before
                    // the upload landed.
                    let _ = client.delete(&object).await;
                }
            }
            Err(e) => {
                {
                    let mut queue = lock(&spool.queue);
                    if queue.failing_since.is_none() {
                        queue.failing_since = Some(Instant::now());
                        eprintln!(
                            "media-agent: the media store did not take {}: {e}; retrying until it does",
                            match &task {
                                Task::Upload(o) => o.clone(),
                                Task::DeletePrefix(p) => format!("the deletion of {p}"),
                            }
                        );
                    }
                }
                failures = failures.saturating_add(1);
                let pause = Duration::from_millis(100u64.saturating_mul(1 << failures.min(5)))
                    .min(MAX_BACKOFF);
                tokio::time::sleep(pause).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("s3-store-{}", domain::ids::random_hex(8)));
        std::fs::create_dir(&dir).unwrap();
        dir
    }

    use crate::media_store::bucket::tests::settings;

    /// A bucket on loopback that keeps objects in memory, notes the order of uploads, and
    /// answers 503 to everything while it is "down".
    struct FakeBucket {
        addr: std::net::SocketAddr,
        objects: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
        uploads: Arc<Mutex<Vec<String>>>,
        up: Arc<std::sync::atomic::AtomicBool>,
        _runtime: tokio::runtime::Runtime,
    }

    impl FakeBucket {
        fn start(up: bool) -> FakeBucket {
            use http_body_util::{BodyExt, Full};
            use hyper::body::Bytes;
            use std::sync::atomic::Ordering;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let listener = runtime
                .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                .unwrap();
            let addr = listener.local_addr().unwrap();
            let objects: Arc<Mutex<BTreeMap<String, Vec<u8>>>> = Arc::default();
            let uploads: Arc<Mutex<Vec<String>>> = Arc::default();
            let up = Arc::new(std::sync::atomic::AtomicBool::new(up));
            let (o, u, a) = (objects.clone(), uploads.clone(), up.clone());
            runtime.spawn(async move {
                loop {
                    let (stream, _) = listener.accept().await.unwrap();
                    let (o, u, a) = (o.clone(), u.clone(), a.clone());
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let (o, u, a) = (o.clone(), u.clone(), a.clone());
                            async move {
                                assert!(
                                    req.headers()["authorization"]
                                        .to_str()
                                        .unwrap()
                                        .starts_with("AWS4-HMAC-SHA256 Credential=GK0123/")
                                );
                                let method = req.method().clone();
                                let path = req.uri().path().to_string();
                                let query = req.uri().query().unwrap_or("").to_string();
                                let body = req.into_body().collect().await.unwrap().to_bytes();
                                let mut status = 200;
                                let mut answer = Vec::new();
                                if !a.load(Ordering::SeqCst) {
                                    status = 503;
                                } else if let Some(key) = path.strip_prefix("/media/") {
                                    let key = key.to_string();
                                    let mut objects = lock(&o);
                                    match method.as_str() {
                                        "PUT" => {
                                            lock(&u).push(key.clone());
                                            objects.insert(key, body.to_vec());
                                        }
                                        "GET" | "HEAD" => match objects.get(&key) {
                                            Some(b) => answer = b.clone(),
                                            None => status = 404,
                                        },
                                        "DELETE" => {
                                            objects.remove(&key);
                                            status = 204;
                                        }
                                        _ => status = 405,
                                    }
                                } else {
                                    let prefix = query
                                        .split('&')
                                        .find_map(|p| p.strip_prefix("prefix="))
                                        .unwrap()
                                        .replace("%2F", "/");
                                    let keys: String = lock(&o)
                                        .keys()
                                        .filter(|k| k.starts_with(&prefix))
                                        .map(|k| format!("<Contents><Key>{k}</Key></Contents>"))
                                        .collect();
                                    answer = format!(
                                        "<ListBucketResult><IsTruncated>false</IsTruncated>{keys}</ListBucketResult>"
                                    )
                                    .into_bytes();
                                }
                                let mut response =
                                    hyper::Response::new(Full::new(Bytes::from(answer)));
                                *response.status_mut() =
                                    hyper::StatusCode::from_u16(status).unwrap();
                                Ok::<_, std::convert::Infallible>(response)
                            }
                        },
                    );
                    tokio::spawn(async move {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
            FakeBucket {
                addr,
                objects,
                uploads,
                up,
                _runtime: runtime,
            }
        }

        fn set_up(&self, up: bool) {
            self.up.store(up, std::sync::atomic::Ordering::SeqCst);
        }

        fn object(&self, key: &str) -> Option<Vec<u8>> {
            lock(&self.objects).get(key).cloned()
        }

        fn uploads(&self) -> Vec<String> {
            lock(&self.uploads).clone()
        }

        fn store(&self, spool: &Path) -> S3Store {
            S3Store::new(settings(&format!("http://{}", self.addr)), spool).unwrap()
        }
    }

    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn writes_wait_in_the_spool_while_the_store_is_down_and_go_in_order_once_it_is_back() {
        let root = dir();
        let bucket = FakeBucket::start(false);
        let store = bucket.store(&root.join("spool"));
        let live = root.join("live");
        std::fs::create_dir(&live).unwrap();
        for n in 1..=3 {
            std::fs::write(live.join(format!("v0_{n}.ts")), format!("segment {n}")).unwrap();
            assert_eq!(
                store
                    .keep_file(
                        &live,
                        &format!("v0_{n}.ts"),
                        &format!("replays/s/v0_{n}.ts")
                    )
                    .unwrap(),
                9
            );
            // The live window deletes its own name: the spool keeps its link.
            std::fs::remove_file(live.join(format!("v0_{n}.ts"))).unwrap();
            store
                .put("replays/s/v0.m3u8", format!("playlist {n}").as_bytes())
                .unwrap();
        }
        // Read back from the spool while the store is down.
        assert_eq!(store.get("replays/s/v0_2.ts").unwrap(), b"segment 2");
        assert_eq!(store.get("replays/s/v0.m3u8").unwrap(), b"playlist 3");
        assert!(store.exists("replays/s/v0_1.ts"));
        std::thread::sleep(Duration::from_millis(600));
        assert!(!store.flushed("replays/s"));
        assert!(store.flushed("replays/other"));
        assert_eq!(store.pending(), 4);
        assert!(bucket.uploads().is_empty());

        bucket.set_up(true);
        until("the spool to be uploaded", || store.flushed("replays/s"));
        // The segments (side by side), then the playlist once, its newest version, after
        // the segments it lists.
        let uploads = bucket.uploads();
        assert_eq!(uploads.len(), 4, "{uploads:?}");
        let mut segments = uploads[..3].to_vec();
        segments.sort();
        assert_eq!(
            segments,
            [
                "replays/s/v0_1.ts",
                "replays/s/v0_2.ts",
                "replays/s/v0_3.ts"
            ]
        );
        assert_eq!(uploads[3], "replays/s/v0.m3u8");
        assert_eq!(bucket.object("replays/s/v0.m3u8").unwrap(), b"playlist 3");
        assert_eq!(store.pending(), 0);
        assert!(!root.join("spool/objects/replays/s/v0_1.ts").exists());
        // Now read from the store itself.
        assert_eq!(store.get("replays/s/v0_3.ts").unwrap(), b"segment 3");
        assert!(store.exists("replays/s/v0_3.ts"));
        assert!(!store.exists("replays/s/v0_9.ts"));
        assert_eq!(
            store.get("replays/s/v0_9.ts").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        drop(store);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn segments_go_side_by_side_and_a_playlist_only_after_all_that_came_before() {
        let root = dir();
        let bucket = FakeBucket::start(false);
        let store = bucket.store(&root.join("spool"));
        let mut expected = Vec::new();
        for round in 0..5 {
            let segments: Vec<String> = (0..6)
                .map(|n| format!("replays/p/v0_{}.ts", round * 10 + n))
                .collect();
            for segment in &segments {
                store.put(segment, segment.as_bytes()).unwrap();
            }
            let playlist = format!("replays/p/v{round}.m3u8");
            store.put(&playlist, b"#EXTM3U\n").unwrap();
            expected.push((segments, playlist));
        }
        bucket.set_up(true);
        until("the uploads", || store.flushed("replays/p"));
        let uploads = bucket.uploads();
        let mut at = 0;
        for (segments, playlist) in expected {
            let mut got = uploads[at..at + segments.len()].to_vec();
            got.sort();
            let mut want = segments.clone();
            want.sort();
            assert_eq!(got, want, "{uploads:?}");
            assert_eq!(uploads[at + segments.len()], playlist, "{uploads:?}");
            at += segments.len() + 1;
        }
        assert_eq!(at, uploads.len());
        drop(store);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_restarted_agent_uploads_what_its_spool_holds() {
        let root = dir();
        let bucket = FakeBucket::start(false);
        let store = bucket.store(&root.join("spool"));
        store.put("replays/r/v0_1.ts", b"one").unwrap();
        store.put("replays/r/v0.m3u8", b"list").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        drop(store);
        // A file half written when the agent stopped is not an object.
        std::fs::write(
            root.join("spool/objects/replays/r/v0_2.0123456789ab.tmp"),
            b"x",
        )
        .unwrap();
        bucket.set_up(true);
        let store = bucket.store(&root.join("spool"));
        assert!(!store.flushed("replays/r"));
        until("the earlier run's spool to be uploaded", || {
            store.flushed("replays/r")
        });
        assert_eq!(bucket.uploads(), ["replays/r/v0_1.ts", "replays/r/v0.m3u8"]);
        assert!(
            !root
                .join("spool/objects/replays/r/v0_2.0123456789ab.tmp")
                .exists()
        );
        drop(store);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_deleted_prefix_goes_from_the_spool_and_from_the_store() {
        let root = dir();
        let bucket = FakeBucket::start(true);
        let store = bucket.store(&root.join("spool"));
        store.put("replays/d/v0_1.ts", b"one").unwrap();
        store.put("replays/keep/v0_1.ts", b"kept").unwrap();
        until("the uploads", || store.pending() == 0);
        bucket.set_up(false);
        store.put("replays/d/v0_2.ts", b"two").unwrap();
        store.delete_prefix("replays/d").unwrap();
        // Gone from the spool at once, from the store once it is back.
        assert!(!root.join("spool/objects/replays/d").exists());
        assert!(!store.flushed("replays/d"));
        assert!(root.join("spool/deletions/replays+d").exists());
        bucket.set_up(true);
        until("the deletion", || store.flushed("replays/d"));
        assert!(bucket.object("replays/d/v0_1.ts").is_none());
        assert!(bucket.object("replays/d/v0_2.ts").is_none());
        assert_eq!(bucket.object("replays/keep/v0_1.ts").unwrap(), b"kept");
        assert!(!root.join("spool/deletions/replays+d").exists());
        assert!(!bucket.uploads().contains(&"replays/d/v0_2.ts".to_string()));
        for bad in ["../x", "replays/../etc", "/abs", ""] {
            assert!(store.put(bad, b"x").is_err(), "{bad}");
            assert!(store.get(bad).is_err(), "{bad}");
            assert!(store.delete_prefix(bad).is_err(), "{bad}");
        }
        drop(store);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn temporary_files_are_told_apart() {
        assert!(is_temporary("v0_1.0123456789ab.tmp"));
        assert!(!is_temporary("v0_1.ts"));
        assert!(!is_temporary("a.tmp"));
        assert!(under("replays/a/v0_1.ts", "replays/a"));
        assert!(!under("replays/ab/v0_1.ts", "replays/a"));
    }
}
