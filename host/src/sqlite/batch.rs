//! Batches of guest transactions on a database's writer.
//!
//! Guests' transactions that follow one another on the writer share one SQLite
//! transaction, each in a savepoint of its own. A page that they all change (the rightmost
//! leaf of a time-ordered index, a counter's row) then reaches the WAL once per batch
//! rather than once per transaction, and a batch is one commit to number and sync.
//!
//! - A guest's `COMMIT` releases its savepoint into the batch. It is answered once the
//!   batch has committed and a sync made that commit durable (`group_commit.rs`), never
//!   before: an acknowledged transaction is on disk, as without batches.
//! - A guest's `ROLLBACK`, or its going away mid-transaction, rolls back its own savepoint
//!   only. An error that makes SQLite roll back the whole transaction fails the batch:
//!   every member still waiting hears the error, none was acknowledged.
//! - The batch commits when its writer is released with nobody waiting for it, or once it
//!   holds [`MAX_MEMBERS`] transactions, or is [`MAX_AGE`] old. A member that waits longer
//!   than [`PATIENCE`] for that (the guest next in line gave up its turn) takes the
//!   writer's turn itself and commits the batch.
//!
//! Inside its transaction a guest sees the batch's earlier members, which come before it
//! in the commit order, as it would see them committed.

use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::watch;

use super::group_commit::GroupCommit;

/// Most transactions in one batch.
const MAX_MEMBERS: usize = 32;
/// A batch older than this commits when its writer is next released.
const MAX_AGE: Duration = Duration::from_millis(2);
/// How long a member waits for its batch to commit before committing it itself.
pub(super) const PATIENCE: Duration = Duration::from_millis(50);

/// The savepoint a guest's transaction runs in.
const SAVEPOINT: &str = "edgehost_guest_transaction";

/// How a batch ended: its commit's number in the group commit, or why it failed.
pub(super) type Outcome = Result<u64, String>;

/// The database's writer connection and the batch it holds open, if any.
pub struct Writer {
    pub(super) conn: Connection,
    batch: Option<Open>,
}

/// An open batch.
struct Open {
    opened: Instant,
    members: usize,
    outcome: watch::Sender<Option<Outcome>>,
}

/// A committed member's place in its batch: resolves when the batch ends.
pub(super) struct Membership(watch::Receiver<Option<Outcome>>);

impl Writer {
    pub fn new(conn: Connection) -> Writer {
        Writer { conn, batch: None }
    }

    /// Whether a batch is open (the connection is inside its transaction).
    pub(super) fn in_batch(&self) -> bool {
        self.batch.is_some()
    }

    /// Starts a guest's transaction: a savepoint in the open batch, or in a new one.
    pub(super) fn begin(&mut self) -> rusqlite::Result<()> {
        if self.batch.is_none() {
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
            self.batch = Some(Open {
                opened: Instant::now(),
                members: 0,
                outcome: watch::Sender::new(None),
            });
        }
        self.conn.execute_batch(&format!("SAVEPOINT {SAVEPOINT}"))
    }

    /// Ends a guest's transaction as committed: its savepoint joins the batch. A
    /// transaction that wrote answers its membership, to wait on; one that only read has
    /// nothing to wait for.
    pub(super) fn commit(&mut self, wrote: bool) -> rusqlite::Result<Option<Membership>> {
        self.conn.execute_batch(&format!("RELEASE {SAVEPOINT}"))?;
        let Some(open) = self.batch.as_mut() else {
            return Ok(None);
        };
        if !wrote {
            return Ok(None);
        }
        open.members += 1;
        Ok(Some(Membership(open.outcome.subscribe())))
    }

    /// Undoes a guest's transaction: its savepoint rolled back and released.
    pub(super) fn rollback(&mut self) -> rusqlite::Result<()> {
        self.conn
            .execute_batch(&format!("ROLLBACK TO {SAVEPOINT}; RELEASE {SAVEPOINT}"))
    }

    /// After a statement of a batched transaction: when SQLite rolled the whole
    /// transaction back (some errors do), the batch is over and its members fail.
    /// Answers whether that happened.
    pub(super) fn lost_batch(&mut self) -> bool {
        if self.batch.is_none() || !self.conn.is_autocommit() {
            return false;
        }
        if let Some(open) = self.batch.take() {
            open.outcome.send_replace(Some(Err(
                "the transaction was rolled back by an error of another one committed with it"
                    .into(),
            )));
        }
        true
    }

    /// Whether the open batch should commit as its writer is released, with `waiting`
    /// guests queued for the writer.
    pub(super) fn should_close(&self, waiting: usize) -> bool {
        self.batch
            .as_ref()
            .is_some_and(|open| batch_is_due(waiting, open.members, open.opened.elapsed()))
    }

    /// Commits the open batch, if any, numbering its commit in `group`'s order, and tells
    /// its members how it went.
    pub(super) fn close(&mut self, group: &GroupCommit) {
        let Some(open) = self.batch.take() else {
            return;
        };
        let outcome = match self.conn.execute_batch("COMMIT") {
            Ok(()) => Ok(group.committed_together(open.members as u64)),
            Err(e) => {
                if !self.conn.is_autocommit() {
                    let _ = self.conn.execute_batch("ROLLBACK");
                }
                Err(e.to_string())
            }
        };
        open.outcome.send_replace(Some(outcome));
    }
}

impl Membership {
    /// The batch's outcome once it has one; a batch that nobody commits within
    /// [`PATIENCE`] is committed through `close` (which takes the writer's turn).
    pub(super) async fn outcome<F, Fut>(mut self, close: F) -> Outcome
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        loop {
            if let Some(outcome) = self.0.borrow_and_update().clone() {
                return outcome;
            }
            match tokio::time::timeout(PATIENCE, self.0.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err("the database closed before the commit".into()),
                Err(_) => close().await,
            }
        }
    }
}

/// A batch commits once nobody is waiting to join it, or once it is full or old enough
/// that its first member should not wait longer.
fn batch_is_due(waiting: usize, members: usize, age: Duration) -> bool {
    waiting == 0 || members >= MAX_MEMBERS || age >= MAX_AGE
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn writer() -> (Writer, Arc<GroupCommit>) {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (n INTEGER)").unwrap();
        let group = Arc::new(GroupCommit::new(
            std::path::Path::new("/nonexistent/batch-test.db"),
            Arc::new(tokio::sync::Mutex::new(Writer::new(
                Connection::open_in_memory().unwrap(),
            ))),
        ));
        (Writer::new(conn), group)
    }

    fn rows(w: &Writer) -> Vec<i64> {
        let mut stmt = w.conn.prepare("SELECT n FROM t ORDER BY n").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[tokio::test]
    async fn members_commit_together_and_a_rollback_undoes_only_its_own() {
        let (mut w, group) = writer();
        w.begin().unwrap();
        w.conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
        let first = w.commit(true).unwrap().unwrap();
        w.begin().unwrap();
        w.conn.execute("INSERT INTO t VALUES (2)", []).unwrap();
        w.rollback().unwrap();
        w.begin().unwrap();
        // A member sees the earlier ones.
        assert_eq!(rows(&w), [1]);
        w.conn.execute("INSERT INTO t VALUES (3)", []).unwrap();
        let third = w.commit(true).unwrap().unwrap();
        // A transaction that only read waits for nothing.
        w.begin().unwrap();
        assert!(w.commit(false).unwrap().is_none());
        assert!(w.in_batch());
        assert!(w.should_close(0), "nobody waits to join it");
        w.close(&group);
        assert!(!w.in_batch() && w.conn.is_autocommit());
        let never = || async { unreachable!("the batch is closed") };
        let (a, b) = (first.outcome(never).await, third.outcome(never).await);
        assert_eq!(a, Ok(1));
        assert_eq!(b, Ok(1), "one commit for the batch");
        assert_eq!(rows(&w), [1, 3]);
    }

    #[test]
    fn a_batch_stays_open_for_those_waiting_until_it_is_full_or_old() {
        let young = Duration::ZERO;
        assert!(!batch_is_due(1, 3, young));
        assert!(batch_is_due(0, 3, young));
        assert!(batch_is_due(1, MAX_MEMBERS, young));
        assert!(batch_is_due(5, 3, MAX_AGE));
    }

    #[tokio::test]
    async fn a_batch_rolled_back_by_sqlite_fails_its_members() {
        let (mut w, _group) = writer();
        w.begin().unwrap();
        w.conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
        let member = w.commit(true).unwrap().unwrap();
        w.begin().unwrap();
        // As SQLite does after some errors: the whole transaction is gone.
        w.conn.execute_batch("ROLLBACK").unwrap();
        assert!(w.lost_batch());
        assert!(!w.in_batch());
        let outcome = member.outcome(|| async {}).await;
        assert!(outcome.unwrap_err().contains("rolled back"));
        assert_eq!(rows(&w), Vec::<i64>::new());
    }

    #[tokio::test]
    async fn a_member_whose_batch_nobody_commits_commits_it() {
        let (mut w, group) = writer();
        w.begin().unwrap();
        w.conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
        let member = w.commit(true).unwrap().unwrap();
        let shared = Arc::new(std::sync::Mutex::new(w));
        let closer = shared.clone();
        let started = Instant::now();
        let outcome = member
            .outcome(move || {
                let (closer, group) = (closer.clone(), group.clone());
                async move { closer.lock().unwrap().close(&group) }
            })
            .await;
        assert_eq!(outcome, Ok(1));
        assert!(started.elapsed() >= PATIENCE);
        assert_eq!(rows(&shared.lock().unwrap()), [1]);
    }
}
