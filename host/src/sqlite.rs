//! `fermyon:spin/sqlite@2.0.0` and `spin:sqlite/sqlite@3.0.0` over embedded SQLite files,
//! plus the start-up migrations of `sql/`.
//!
//! Each database has one writer connection and a pool of reader connections (WAL mode, so
//! readers never wait for the writer):
//!
//! - A statement outside a transaction that only reads (SQLite's `sqlite3_stmt_readonly`)
//!   runs on a reader. Any other statement waits its turn for the writer (a FIFO queue, not
//!   SQLite's busy-wait loop) and runs there, in its own implicit transaction.
//! - A guest's `BEGIN` (deferred, as guests send it) takes the writer for the whole
//!   transaction; every statement of the transaction runs on the writer until it ends
//!   (`COMMIT`, `ROLLBACK`, or an error that rolls it back). So writers never fail with
//!   `SQLITE_BUSY` against each other, and nobody holds the write lock across a guest's
//!   awaits except inside that guest's own transaction.
//! - Transactions that follow one another on the writer are committed in batches, each in
//!   a savepoint of its own (`sqlite/batch.rs`): pages they share reach the WAL once.
//! - A guest that goes away mid-transaction (a trap, a dropped connection) has its
//!   transaction rolled back before the writer passes on.
//! - A transaction that wrote is answered once the WAL is on disk: the writer runs with
//!   `synchronous = NORMAL` and edgehost syncs the WAL for many commits at once and runs
//!   the checkpoints beside the writer (`sqlite/group_commit.rs`), so the writer never
//!   waits for the disk.
//! - Statements run in place on the async worker that runs the guest (reads and writes of
//!   the local file are short), not on the blocking pool.
//!
//! `last_insert_rowid` and `changes` are kept per guest connection, as if it had its own.
//! Connection-level state (a `PRAGMA` setting, a `TEMP` table) persists only within a
//! transaction: outside one, consecutive statements may run on different connections.

mod batch;
mod group_commit;
mod guest;
mod migrations;
mod pool;
mod statements;

pub use guest::{OpenConnections, SqliteView, add_to_linker, open_connections};
pub use migrations::apply_migrations;
pub use pool::{Databases, LeaseTiming, WriterRecord, WriterTimings};
