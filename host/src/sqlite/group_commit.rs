//! Group commit for a database's writer.
//!
//! The writer runs with `synchronous = NORMAL` (WAL mode), so a `COMMIT` appends its frames
//! to the WAL file without waiting for the disk. edgehost then syncs the WAL itself, and a
//! guest hears that its commit succeeded only after a sync that began once its frames
//! were written: as durable as SQLite's `FULL`, but the writer serves the next
//! transaction while the disk works, and one sync covers every commit that piled up
//! meanwhile.
//!
//! Commits are numbered while the writer is held, so the numbers follow the order of the
//! frames in the WAL; a sync that starts when commit N is the latest makes 1..=N durable.
//!
//! Checkpoints (copying the WAL back into the database file, with syncs of their own) are
//! off the writer too: SQLite's automatic checkpoint is switched off on guest connections,
//! and every [`CHECKPOINT_EVERY`] commits a passive checkpoint runs on a connection of its
//! own, beside the writer and the readers.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::watch;

use super::batch::Writer;

/// Transactions between checkpoints: for small transactions, about the 1000 WAL pages
/// after which SQLite would checkpoint on its own (a batch of them is one commit, see
/// `batch.rs`, and counts as the transactions it holds).
const CHECKPOINT_EVERY: u64 = 256;
/// A WAL larger than this is truncated by the next checkpoint.
const WAL_TRUNCATE_ABOVE: u64 = 16 << 20;
/// How long a truncating checkpoint waits for the writer and the readers.
const TRUNCATE_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

pub struct GroupCommit {
    database: PathBuf,
    wal: PathBuf,
    /// The number of the latest commit (taken with the writer held).
    committed: AtomicU64,
    /// Guest transactions committed (a batch commits several at once).
    transactions: AtomicU64,
    /// Whether a sync is under way (its caller leads; the others wait for it).
    syncing: AtomicBool,
    /// (latest commit known durable, syncs finished): every finished sync, good or not,
    /// wakes the waiters.
    synced: watch::Sender<(u64, u64)>,
    /// The latest commit when the last checkpoint was started, and whether one runs.
    checkpointed: AtomicU64,
    checkpointing: AtomicBool,
    checkpoints: AtomicU64,
    checkpointer: Mutex<Option<Connection>>,
    /// The database's writer, held by a truncating checkpoint (see [`Self::checkpoint`]).
    writer: Arc<tokio::sync::Mutex<Writer>>,
}

impl GroupCommit {
    /// For the database file at `database` (in WAL mode), written through `writer`.
    pub fn new(database: &Path, writer: Arc<tokio::sync::Mutex<Writer>>) -> GroupCommit {
        let mut wal = database.as_os_str().to_owned();
        wal.push("-wal");
        GroupCommit {
            database: database.to_path_buf(),
            wal: wal.into(),
            committed: AtomicU64::new(0),
            transactions: AtomicU64::new(0),
            syncing: AtomicBool::new(false),
            synced: watch::Sender::new((0, 0)),
            checkpointed: AtomicU64::new(0),
            checkpointing: AtomicBool::new(false),
            checkpoints: AtomicU64::new(0),
            checkpointer: Mutex::new(None),
            writer,
        }
    }

    /// Numbers a commit (of one transaction) that has just been written to the WAL. Call
    /// it with the writer still held.
    pub fn committed(&self) -> u64 {
        self.committed_together(1)
    }

    /// Numbers a commit of `transactions` batched transactions (see [`Self::committed`]).
    pub fn committed_together(&self, transactions: u64) -> u64 {
        self.transactions.fetch_add(transactions, Ordering::SeqCst);
        self.committed.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Waits until commit `ticket` is on disk: joins a sync under way, or leads the next.
    pub async fn durable(self: &Arc<Self>, ticket: u64) -> Result<(), String> {
        let mut finished = self.synced.subscribe();
        loop {
            if finished.borrow_and_update().0 >= ticket {
                return Ok(());
            }
            if self
                .syncing
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                let target = self.committed.load(Ordering::SeqCst);
                let transactions = self.transactions.load(Ordering::SeqCst);
                let result = self.sync_wal().await;
                // Clear the flag before waking anyone, so that a waiter this sync did not
                // cover can lead the next one.
                self.syncing.store(false, Ordering::SeqCst);
                self.synced.send_modify(|(durable, syncs)| {
                    if result.is_ok() {
                        *durable = (*durable).max(target);
                    }
                    *syncs += 1;
                });
                result?;
                self.checkpoint_when_due(transactions);
                continue;
            }
            if finished.changed().await.is_err() {
                return Err("the database is closing".into());
            }
        }
    }

    /// The number of the latest commit.
    #[cfg(test)]
    pub fn latest(&self) -> u64 {
        self.committed.load(Ordering::SeqCst)
    }

    /// (commits known durable, syncs run, checkpoints run) so far.
    #[cfg(test)]
    pub fn counts(&self) -> (u64, u64, u64) {
        let (durable, syncs) = *self.synced.borrow();
        (durable, syncs, self.checkpoints.load(Ordering::SeqCst))
    }

    /// Syncs the WAL now, on the calling thread (start-up work such as migrations).
    pub fn sync_blocking(&self) -> Result<(), String> {
        sync_file(&self.wal)
    }

    /// Starts a passive checkpoint in the background once [`CHECKPOINT_EVERY`]
    /// transactions have gone by since the last one (and none is running).
    fn checkpoint_when_due(self: &Arc<Self>, latest: u64) {
        let since = latest.saturating_sub(self.checkpointed.load(Ordering::SeqCst));
        // Large transactions fill the WAL long before CHECKPOINT_EVERY of them.
        let due = since >= CHECKPOINT_EVERY
            || (since >= CHECKPOINT_EVERY / 8 && self.wal_bytes() > WAL_TRUNCATE_ABOVE);
        if !due || self.checkpointing.swap(true, Ordering::SeqCst) {
            return;
        }
        self.checkpointed.store(latest, Ordering::SeqCst);
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = me.checkpoint() {
                crate::warn(format_args!("SQLite checkpoint failed: {e}"));
            }
            me.checkpointing.store(false, Ordering::SeqCst);
        });
    }

    /// Copies what it can of the WAL into the database file, without waiting for the
    /// writer or the readers. A passive checkpoint never moves the WAL back to its start
    /// while some reader still reads from it, and under steady load one always does, so
    /// the file would grow without bound (SQLite's "checkpoint starvation", until the disk
    /// is full). Past [`WAL_TRUNCATE_ABOVE`] bytes the checkpoint takes the writer's turn
    /// (no guest writes meanwhile; a lock SQLite's busy handler would rarely catch free
    /// between back-to-back transactions), waits up to [`TRUNCATE_WAIT`] for the readers
    /// of older snapshots, and truncates the WAL.
    fn checkpoint(&self) -> rusqlite::Result<()> {
        let mut slot = self
            .checkpointer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let conn = match slot.as_mut() {
            Some(conn) => conn,
            None => {
                let conn = Connection::open(&self.database)?;
                conn.busy_timeout(TRUNCATE_WAIT)?;
                slot.insert(conn)
            }
        };
        if self.wal_bytes() > WAL_TRUNCATE_ABOVE {
            // The guests' connection, its batch committed (an open write transaction would
            // keep the WAL from being reset); the checkpoint runs on a connection of its own.
            let mut writers_turn = self.writer.blocking_lock();
            writers_turn.close(self);
            // Busy (a reader outlasted the wait) is not an error: the next one tries again.
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        } else {
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        }
        self.checkpoints.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn wal_bytes(&self) -> u64 {
        std::fs::metadata(&self.wal).map_or(0, |m| m.len())
    }

    async fn sync_wal(&self) -> Result<(), String> {
        let wal = self.wal.clone();
        tokio::task::spawn_blocking(move || sync_file(&wal))
            .await
            .map_err(|e| format!("sync task failed: {e}"))?
    }
}

fn sync_file(path: &std::path::Path) -> Result<(), String> {
    match std::fs::File::open(path) {
        Ok(file) => file
            .sync_data()
            .map_err(|e| format!("disk I/O error: cannot sync the WAL: {e}")),
        // No WAL: every commit is in the database file, which SQLite syncs when it
        // checkpoints.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("disk I/O error: cannot open the WAL: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The group commit of `database`, with a writer connection of its own.
    fn group_of(database: &Path) -> Arc<GroupCommit> {
        let writer = Connection::open(database)
            .or_else(|_| Connection::open_in_memory())
            .unwrap();
        Arc::new(GroupCommit::new(
            database,
            Arc::new(tokio::sync::Mutex::new(Writer::new(writer))),
        ))
    }

    /// A fresh directory of this test's own.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("edgehost-gc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_commit_is_answered_after_a_sync_that_covers_it() {
        let dir = scratch("covers");
        std::fs::write(dir.join("db-wal"), b"frames").unwrap();
        let group = group_of(&dir.join("db"));
        let waiters: Vec<_> = (0..64)
            .map(|_| {
                let group = group.clone();
                tokio::spawn(async move {
                    let ticket = group.committed();
                    group.durable(ticket).await.map(|()| ticket)
                })
            })
            .collect();
        for waiter in waiters {
            let ticket = waiter.await.unwrap().unwrap();
            assert!(group.synced.borrow().0 >= ticket);
        }
        let (durable, syncs) = *group.synced.borrow();
        assert_eq!(durable, 64);
        assert!((1..=64).contains(&syncs), "{syncs} syncs");
    }

    #[tokio::test]
    async fn a_sync_that_fails_fails_its_commits_and_the_next_one_retries() {
        // The WAL's path runs through a plain file, so it cannot be opened.
        let blocker = scratch("fails").join("file");
        std::fs::write(&blocker, b"").unwrap();
        let group = group_of(&blocker.join("db"));
        let ticket = group.committed();
        let err = group.durable(ticket).await.unwrap_err();
        assert!(err.contains("disk I/O error"), "{err}");
        assert_eq!(group.synced.borrow().0, 0);
        assert!(!group.syncing.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_missing_wal_means_nothing_is_left_to_sync() {
        let group = group_of(&scratch("missing").join("db"));
        let ticket = group.committed();
        group.durable(ticket).await.unwrap();
    }

    #[test]
    fn a_wal_past_the_limit_is_truncated() {
        let database = scratch("truncate").join("db");
        let group = group_of(&database);
        {
            let writer = group.writer.blocking_lock();
            let writer = &writer.conn;
            writer.pragma_update(None, "journal_mode", "WAL").unwrap();
            writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
            writer.execute("CREATE TABLE t (b BLOB)", []).unwrap();
            for _ in 0..17 {
                writer
                    .execute("INSERT INTO t VALUES (zeroblob(1048576))", [])
                    .unwrap();
            }
        }
        let wal = |group: &GroupCommit| std::fs::metadata(&group.wal).unwrap().len();
        assert!(wal(&group) > WAL_TRUNCATE_ABOVE);
        group.checkpoint().unwrap();
        assert_eq!(wal(&group), 0, "the WAL was truncated");
        // Below the limit a checkpoint is passive and leaves the file's size alone.
        group
            .writer
            .blocking_lock()
            .conn
            .execute("INSERT INTO t VALUES (zeroblob(4096))", [])
            .unwrap();
        let before = wal(&group);
        group.checkpoint().unwrap();
        assert_eq!(wal(&group), before);
    }
}
