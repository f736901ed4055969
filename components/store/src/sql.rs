//! Statement text: placeholders for each dialect, and splitting a file into statements.

use super::{Dialect, Statement};

/// The statement as `dialect` takes it: for PostgreSQL each `?` becomes `$1`, `$2`, ... in
/// order and `?N` becomes `$N`; text in quotes and comments is left alone.
pub fn for_dialect(sql: &str, dialect: Dialect) -> String {
    match dialect {
        Dialect::Sqlite => sql.to_string(),
        Dialect::Postgres => numbered(sql),
    }
}

fn numbered(sql: &str) -> String {
    numbered_after(sql, 0)
}

/// Whether `sql` is an `INSERT` that answers no rows and holds no `WITH`: one that can be a
/// part of a [`together`] statement.
pub fn is_plain_insert(sql: &str) -> bool {
    let upper = sql.trim_start().to_ascii_uppercase();
    upper.starts_with("INSERT ") && !upper.contains(" RETURNING ") && !upper.contains("WITH ")
}

/// PostgreSQL statements (plain inserts, see [`is_plain_insert`], with `?` placeholders)
/// as one: each but the last a data-modifying `WITH` of the last, their placeholders
/// numbered on, and their parameters in order. PostgreSQL runs every part, once, whatever
/// the outer statement reads.
pub fn together(statements: &[Statement]) -> Statement {
    let Some(((last, last_params), held)) = statements.split_last() else {
        return (String::new(), Vec::new());
    };
    if held.is_empty() {
        return (numbered(last), last_params.clone());
    }
    let (list, mut params) = held_list(held);
    let statement = carrying(&list, &numbered_after(last, params.len()));
    params.extend(last_params.iter().cloned());
    (statement, params)
}

/// Held inserts (see [`is_plain_insert`], with `?` placeholders) as a list of
/// data-modifying `WITH`s for a later statement to carry (`"~held0" AS (INSERT ...), ...`),
/// numbered from `$1`, and their parameters in order.
pub fn held_list(statements: &[Statement]) -> Statement {
    let mut params = Vec::new();
    let mut parts = Vec::with_capacity(statements.len());
    for (i, (sql, values)) in statements.iter().enumerate() {
        let part = numbered_after(sql, params.len());
        parts.push(format!("\"~held{i}\" AS ({part})"));
        params.extend(values.iter().cloned());
    }
    (parts.join(", "), params)
}

/// `statement` (a `SELECT`, `INSERT`, `UPDATE` or `DELETE` without a `WITH` of its own)
/// with a [`held_list`] as its `WITH`.
pub fn carrying(held: &str, statement: &str) -> String {
    format!("WITH {held} {statement}")
}

/// Whether `sql` may carry the held inserts `held` ([`carrying`]), in one round trip
/// instead of two: a `SELECT`, `INSERT`, `UPDATE` or `DELETE` without a `WITH` of its own,
/// that names none of the tables they insert into. A statement and the `WITH`s it carries
/// read the same snapshot, so a statement that read those tables would not see the held
/// rows: such a statement waits for them to be sent on their own. (The schema has no
/// triggers, views or foreign keys through which a statement could read a table it does
/// not name.)
pub fn can_carry(sql: &str, held: &[Statement]) -> bool {
    let head = sql.trim_start();
    let verb = head
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase();
    if !matches!(verb.as_str(), "SELECT" | "INSERT" | "UPDATE" | "DELETE") {
        return false;
    }
    let named: std::collections::HashSet<String> = identifiers(sql).collect();
    held.iter().all(|(insert, _)| {
        inserted_table(insert).is_some_and(|table| !named.contains(&table.to_ascii_lowercase()))
    })
}

/// The table a plain insert writes (`INSERT INTO name ...`).
fn inserted_table(insert: &str) -> Option<&str> {
    let mut words = insert.split_whitespace();
    let (Some(verb), Some(into), Some(table)) = (words.next(), words.next(), words.next()) else {
        return None;
    };
    // `name(columns)`, or a qualified `schema.name`: the name is what a reader names.
    let table = table.split('(').next().unwrap_or(table);
    let table = table.rsplit('.').next().unwrap_or(table).trim_matches('"');
    (verb.eq_ignore_ascii_case("INSERT") && into.eq_ignore_ascii_case("INTO") && !table.is_empty())
        .then_some(table)
}

/// Every word of `sql` that could name a table, lowercased (quoted text included, so
/// that a quoted name counts as named too).
fn identifiers(sql: &str) -> impl Iterator<Item = String> + '_ {
    sql.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
        .map(str::to_ascii_lowercase)
}

/// [`numbered`], with `offset` added to every number.
pub fn numbered_after(sql: &str, offset: usize) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut next = offset + 1;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == '\n' {
                        break;
                    }
                }
            }
            '?' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                out.push('$');
                if digits.is_empty() {
                    out.push_str(&next.to_string());
                    next += 1;
                } else {
                    let n: usize = digits.parse().unwrap_or(0);
                    out.push_str(&(n + offset).to_string());
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// The name of the column [`never_empty`] leads each row with.
pub const SENTINEL: &str = "~sentinel";

/// A PostgreSQL statement that answers rows (a `SELECT`, or a write with `RETURNING`),
/// rewritten to answer at least one: its own rows, each led by a `false` sentinel column,
/// then one row of a `true` sentinel and NULLs. Spin 4.0.0 to 4.0.2 never answer a
/// `query` that returns no rows (spinframework/spin#3671), so the components send every
/// query this way and drop the sentinel column and row ([`without_sentinel`]). The
/// statement runs once (a CTE referenced twice is materialized) and its rows keep their
/// order. It must not itself begin with `WITH` (a data-modifying `WITH` must stay at the
/// top level) or end with `;`: the store writes none that way (a test checks it).
pub fn never_empty(statement: &str) -> String {
    never_empty_carrying("", statement)
}

/// [`never_empty`], with a [`held_list`] (or nothing) at the top of its `WITH`.
pub fn never_empty_carrying(held: &str, statement: &str) -> String {
    never_empty_with(held, statement, "true")
}

/// [`never_empty`] for a read-only `SELECT` on a connection just taken from a pool, whose
/// sentinel row also tells whether the statement ran inside a transaction that has
/// written or locked something: its sentinel is `false` then (and `true` otherwise), since
/// a read-only statement of its own never gets a transaction id. One round trip checks
/// the connection and reads.
pub fn never_empty_checking(statement: &str) -> String {
    never_empty_with("", statement, "(pg_current_xact_id_if_assigned() IS NULL)")
}

fn never_empty_with(held: &str, statement: &str, sentinel: &str) -> String {
    let held = if held.is_empty() {
        String::new()
    } else {
        format!("{held}, ")
    };
    format!(
        "WITH {held}\"~rows\" AS ({statement}) \
         SELECT false AS \"{SENTINEL}\", \"~rows\".* FROM \"~rows\" \
         UNION ALL SELECT {sentinel}, \"~rows\".* FROM (VALUES (0)) AS \"~one\"(\"~x\") LEFT JOIN \"~rows\" ON false"
    )
}

/// Whether `statement` only reads: a plain `SELECT` (no `WITH`, which may write).
pub fn only_reads(statement: &str) -> bool {
    statement
        .split_whitespace()
        .next()
        .is_some_and(|word| word.eq_ignore_ascii_case("SELECT"))
}

/// The rows of a [`never_empty`] answer: the sentinel row and column dropped. `None` when
/// the answer is not one (no sentinel column first, or no sentinel row last).
pub fn without_sentinel<T>(
    mut columns: Vec<String>,
    mut rows: Vec<Vec<T>>,
    is_true: impl Fn(&T) -> bool,
) -> Option<(Vec<String>, Vec<Vec<T>>)> {
    if columns.first().map(String::as_str) != Some(SENTINEL) {
        return None;
    }
    let last = rows.pop()?;
    if !last.first().is_some_and(&is_true) {
        return None;
    }
    columns.remove(0);
    for row in &mut rows {
        if row.is_empty() {
            return None;
        }
        row.remove(0);
    }
    Some((columns, rows))
}

/// The statements of a migration file, split on `;` outside quotes and comments, without
/// comments or blank statements.
pub fn statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                current.push(c);
                for inner in chars.by_ref() {
                    current.push(inner);
                    if inner == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                for inner in chars.by_ref() {
                    if inner == '\n' {
                        current.push('\n');
                        break;
                    }
                }
            }
            ';' => {
                let statement = current.trim();
                if !statement.is_empty() {
                    out.push(statement.to_string());
                }
                current.clear();
            }
            _ => current.push(c),
        }
    }
    let statement = current.trim();
    if !statement.is_empty() {
        out.push(statement.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_never_empty_answer_gives_back_the_rows() {
        let wrapped = never_empty("SELECT id FROM t WHERE x = $1");
        assert!(wrapped.starts_with("WITH \"~rows\" AS (SELECT id FROM t WHERE x = $1)"));
        let columns = vec![SENTINEL.to_string(), "id".into()];
        // No rows of its own: only the sentinel row.
        let (cols, rows) =
            without_sentinel(columns.clone(), vec![vec![1, 0]], |v| *v == 1).unwrap();
        assert_eq!(
            (cols, rows),
            (vec!["id".to_string()], Vec::<Vec<i32>>::new())
        );
        let (_, rows) = without_sentinel(
            columns.clone(),
            vec![vec![0, 7], vec![0, 8], vec![1, 0]],
            |v| *v == 1,
        )
        .unwrap();
        assert_eq!(rows, [[7], [8]]);
        // Not such an answer.
        assert!(without_sentinel(vec!["id".into()], vec![vec![1]], |v| *v == 1).is_none());
        assert!(without_sentinel(columns, vec![vec![0, 7]], |v| *v == 1).is_none());
    }

    /// Every statement the store sends through `query` can be wrapped by `never_empty`:
    /// none begins with `WITH` or ends with `;`. (A statement sent through `execute`, which
    /// answers no rows and is never wrapped, may begin with `WITH`.)
    #[test]
    fn no_store_statement_begins_with_with() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                continue; // `app/`: the application rules, which send no statement
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let pieces: Vec<&str> = text.split('"').collect();
            for (n, literal) in pieces.iter().enumerate().skip(1).step_by(2) {
                let head = literal.trim_start().to_ascii_uppercase();
                let executed = pieces[n - 1].trim_end().ends_with(".execute(");
                assert!(
                    !head.starts_with("WITH ") || executed || path.ends_with("sql.rs"),
                    "{}: {literal}",
                    path.display()
                );
                if head.starts_with("SELECT ") || head.contains(" RETURNING ") {
                    assert!(
                        !literal.trim_end().ends_with(';'),
                        "{}: {literal}",
                        path.display()
                    );
                }
            }
        }
    }

    #[test]
    fn a_statement_carries_held_inserts_only_when_it_names_none_of_their_tables() {
        let held = |tables: &[&str]| -> Vec<Statement> {
            tables
                .iter()
                .map(|t| (format!("INSERT INTO {t}(x) VALUES (?)"), vec![]))
                .collect()
        };
        let ledger = held(&["ledger_pending", "ledger_transfers"]);
        assert!(can_carry(
            "SELECT combo FROM gifts_sent WHERE id = ?",
            &ledger
        ));
        assert!(can_carry(" update accounts SET n = 1", &ledger));
        assert!(can_carry(
            "INSERT INTO keys (k) VALUES (?) RETURNING k",
            &ledger
        ));
        // A word that merely starts like a held table is not that table.
        assert!(can_carry("SELECT ledger_pending_total FROM t", &ledger));
        // Named anywhere, in any case, quoted or in a subquery: sent before it instead.
        for reads in [
            "SELECT SUM(amount) FROM Ledger_Pending WHERE account_id = ?",
            "DELETE FROM t WHERE id IN (SELECT id FROM ledger_transfers)",
            "SELECT * FROM \"ledger_pending\"",
        ] {
            assert!(!can_carry(reads, &ledger), "{reads}");
        }
        // Only a statement that can have a `WITH` of its own, and has none.
        for other in [
            "COMMIT",
            "SAVEPOINT nested_1",
            "WITH x AS (SELECT 1) SELECT * FROM x",
        ] {
            assert!(!can_carry(other, &ledger), "{other}");
        }
        // A qualified or quoted table is the same table.
        let qualified = vec![(
            "INSERT INTO public.\"outbox_events\" (x) VALUES (?)".into(),
            vec![],
        )];
        assert!(!can_carry("SELECT * FROM outbox_events", &qualified));
        assert!(can_carry("SELECT * FROM outbox_sequences", &qualified));
        // A held statement whose table cannot be told is never carried.
        assert!(!can_carry("SELECT 1", &[("INSERT".into(), vec![])]));
    }

    #[test]
    fn placeholders_are_numbered_for_postgres() {
        let sql = "SELECT * FROM t WHERE a = ? AND b = '?' AND c = ? -- what?\nAND d = ?";
        assert_eq!(
            for_dialect(sql, Dialect::Postgres),
            "SELECT * FROM t WHERE a = $1 AND b = '?' AND c = $2 -- what?\nAND d = $3"
        );
        assert_eq!(for_dialect(sql, Dialect::Sqlite), sql);
        assert_eq!(
            for_dialect(
                "UPDATE t SET a = ?1, b = ?1 WHERE id = ?2",
                Dialect::Postgres
            ),
            "UPDATE t SET a = $1, b = $1 WHERE id = $2"
        );
    }

    #[test]
    fn files_split_into_statements() {
        let text = "-- a comment; with a semicolon\nCREATE TABLE a (x TEXT DEFAULT ';');\n\n\
                    INSERT INTO a VALUES ('it''s');\n-- trailing\n";
        assert_eq!(
            statements(text),
            vec![
                "CREATE TABLE a (x TEXT DEFAULT ';')".to_string(),
                "INSERT INTO a VALUES ('it''s')".to_string(),
            ]
        );
    }
}
