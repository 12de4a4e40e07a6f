//! Opening a SQLite file that several processes share, and its numbered schema
//! migrations (feature `sqlite`).
//!
//! The ledger, the job store and the learned-model store may all live in one file
//! (`[state] url = "sqlite:PATH"`), and several gateways may open it at once. Each of
//! them keeps its tables under a *component* name and its migrations in
//! `schema_migrations(component, version, name, applied_ms)`. [`migrate`] applies the
//! pending ones inside one `BEGIN IMMEDIATE` transaction, which takes the database's write
//! lock before it reads what is applied: two processes that start together apply each
//! migration exactly once, the second seeing the first's work. A step that adds a column
//! checks for it first, so a file made before migrations were recorded (its tables and
//! columns already there) is brought up to date without a `duplicate column` error.

use rusqlite::{params, Connection, TransactionBehavior};
use std::path::Path;
use std::time::{Duration, Instant};

/// One step of a migration.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// SQL run as a batch (write it idempotent: `IF NOT EXISTS`, since files older than
    /// the migration table may hold the tables already).
    Sql(&'static str),
    /// `ALTER TABLE table ADD COLUMN column decl`, unless the column is there.
    AddColumn {
        /// The table.
        table: &'static str,
        /// The new column.
        column: &'static str,
        /// Its type and constraints.
        decl: &'static str,
    },
}

/// A numbered migration of one component.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its number (strictly increasing within the component).
    pub version: i64,
    /// What it does.
    pub name: &'static str,
    /// Its steps, in order.
    pub steps: &'static [Step],
}

/// How long a connection waits for another process's write lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens `path` (`:memory:` for a private in-memory database) for use beside other
/// processes: a busy timeout of [`BUSY_TIMEOUT`], WAL journal mode, `synchronous =
/// NORMAL` (durable against a process's death).
pub fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    wal(&conn)?;
    conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
    Ok(conn)
}

/// Switches to WAL. Switching needs the file to itself for an instant, and SQLite answers
/// `SQLITE_BUSY` at once, without its busy handler, when another process opens the file
/// in that instant: retried here until the busy timeout.
// Synchronous (a blocking retry with `std::thread::sleep`): SQLite's busy timeout is wall time.
#[allow(clippy::disallowed_methods)]
fn wal(conn: &Connection) -> rusqlite::Result<()> {
    let until = Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(e) if is_busy(&e) && Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e),
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// Applies `component`'s pending migrations in one `BEGIN IMMEDIATE` transaction;
/// returns the version the file is at afterwards.
pub fn migrate(conn: &mut Connection, component: &str, migrations: &[Migration]) -> rusqlite::Result<i64> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            component TEXT NOT NULL, version INTEGER NOT NULL, name TEXT NOT NULL, applied_ms INTEGER NOT NULL,
            PRIMARY KEY (component, version))",
    )?;
    let applied: i64 =
        tx.query_row("SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = ?1", [component], |r| r.get(0))?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let mut at = applied;
    for m in migrations.iter().filter(|m| m.version > applied) {
        for step in m.steps {
            match *step {
                Step::Sql(sql) => tx.execute_batch(sql)?,
                Step::AddColumn { table, column, decl } => {
                    let has: bool = tx.prepare(&format!("SELECT 1 FROM pragma_table_info('{table}') WHERE name = ?1"))?.exists([column])?;
                    if !has {
                        tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
                    }
                }
            }
        }
        tx.execute(
            "INSERT INTO schema_migrations (component, version, name, applied_ms) VALUES (?1, ?2, ?3, ?4)",
            params![component, m.version, m.name, now],
        )?;
        at = m.version;
    }
    tx.commit()?;
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &[Migration] = &[
        Migration { version: 1, name: "t", steps: &[Step::Sql("CREATE TABLE IF NOT EXISTS t (a INTEGER)")] },
        Migration { version: 2, name: "t.b", steps: &[Step::AddColumn { table: "t", column: "b", decl: "TEXT" }] },
    ];

    #[test]
    fn migrations_apply_once_and_bring_an_unrecorded_file_up_to_date() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        {
            // A file from before the migration table: the column is already there.
            let c = Connection::open(&path).unwrap();
            c.execute_batch("CREATE TABLE t (a INTEGER, b TEXT)").unwrap();
        }
        let mut c = open(&path).unwrap();
        assert_eq!(migrate(&mut c, "x", M).unwrap(), 2);
        assert_eq!(migrate(&mut c, "x", M).unwrap(), 2);
        let n: i64 = c.query_row("SELECT COUNT(*) FROM schema_migrations WHERE component = 'x'", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 2);
        // Another component's numbering is its own.
        assert_eq!(migrate(&mut c, "y", &M[..1]).unwrap(), 1);
    }
}
