//! Statement text: placeholders for each dialect, and splitting a file into statements.

use super::Dialect;

/// The statement as `dialect` takes it: for PostgreSQL each `?` becomes `$1`, `$2`, ... in
/// order and `?N` becomes `$N`; text in quotes and comments is left alone.
pub fn for_dialect(sql: &str, dialect: Dialect) -> String {
    match dialect {
        Dialect::Sqlite => sql.to_string(),
        Dialect::Postgres => numbered(sql),
    }
}

fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut next = 1;
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
                    out.push_str(&digits);
                }
            }
            _ => out.push(c),
        }
    }
    out
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
