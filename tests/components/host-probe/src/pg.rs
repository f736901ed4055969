//! Probes of Spin's PostgreSQL interface. Each takes the address to connect to as its
//! query string (the tests start the server, so the address is only known then).

use serde_json::{Value as Json, json};
use spin_sdk::{pg3, pg4};

fn error_json(e: &pg4::PgError) -> Json {
    match e {
        pg4::PgError::ConnectionFailed(m) => json!({ "connection-failed": m }),
        pg4::PgError::BadParameter(m) => json!({ "bad-parameter": m }),
        pg4::PgError::QueryFailed(pg4::QueryError::Text(m)) => json!({ "query-failed": m }),
        pg4::PgError::QueryFailed(pg4::QueryError::DbError(db)) => json!({
            "query-failed": {
                "code": db.code,
                "severity": db.severity,
                "message": db.message,
                "detail": db.detail,
                "extras": db.extras.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<String, Json>>(),
                "as_text": db.as_text,
            }
        }),
        pg4::PgError::ValueConversionFailed(m) => json!({ "value-conversion-failed": m }),
        pg4::PgError::Other(m) => json!({ "other": m }),
    }
}

fn value_json(v: &pg4::DbValue) -> Json {
    use pg4::DbValue as V;
    match v {
        V::Boolean(b) => json!({ "boolean": b }),
        V::Int8(n) => json!({ "int8": n }),
        V::Int16(n) => json!({ "int16": n }),
        V::Int32(n) => json!({ "int32": n }),
        V::Int64(n) => json!({ "int64": n }),
        V::Floating32(f) => json!({ "floating32": f }),
        V::Floating64(f) => json!({ "floating64": f }),
        V::Str(s) => json!({ "str": s }),
        V::Binary(b) => json!({ "binary": b }),
        V::Date(d) => json!({ "date": [d.0, d.1, d.2] }),
        V::Time(t) => json!({ "time": [t.0, t.1, t.2, t.3] }),
        V::Datetime(t) => json!({ "datetime": [t.0, t.1, t.2, t.3, t.4, t.5, t.6] }),
        V::Timestamp(t) => json!({ "timestamp": t }),
        V::Uuid(u) => json!({ "uuid": u }),
        V::Jsonb(j) => json!({ "jsonb": String::from_utf8_lossy(j) }),
        V::Decimal(d) => json!({ "decimal": d }),
        V::ArrayInt32(a) => json!({ "array-int32": a }),
        V::ArrayInt64(a) => json!({ "array-int64": a }),
        V::ArrayDecimal(a) => json!({ "array-decimal": a }),
        V::ArrayStr(a) => json!({ "array-str": a }),
        V::Interval(i) => json!({ "interval": [i.micros, i.days, i.months] }),
        V::DbNull => json!("null"),
        V::Unsupported(b) => json!({ "unsupported": b }),
        other => json!({ "other": format!("{other:?}") }),
    }
}

/// A data type's variant name (its Debug form is `DbDataType::Int64`).
fn type_name(debug: String) -> String {
    debug.trim_start_matches("DbDataType::").to_string()
}

fn rows_json(r: &pg4::RowSet) -> Json {
    json!({
        "columns": r.columns.iter().map(|c| json!([c.name, type_name(format!("{:?}", c.data_type))])).collect::<Vec<_>>(),
        "rows": r.rows.iter().map(|row| row.iter().map(value_json).collect::<Vec<_>>()).collect::<Vec<_>>(),
    })
}

fn exec(c: &pg4::Connection, sql: &str, params: &[pg4::ParameterValue]) -> Json {
    match c.execute(sql, params) {
        Ok(n) => json!(n),
        Err(e) => json!({ "error": error_json(&e) }),
    }
}

fn query(c: &pg4::Connection, sql: &str, params: &[pg4::ParameterValue]) -> Json {
    match c.query(sql, params) {
        Ok(r) => rows_json(&r),
        Err(e) => json!({ "error": error_json(&e) }),
    }
}

fn count(c: &pg4::Connection, table: &str) -> Json {
    match c.query(&format!("SELECT count(*) FROM {table}"), &[]) {
        Ok(r) => match r.rows.first().and_then(|row| row.first()) {
            Some(pg4::DbValue::Int64(n)) => json!(n),
            other => json!(format!("unexpected {other:?}")),
        },
        Err(e) => json!({ "error": error_json(&e) }),
    }
}

pub fn suite(address: &str) -> Json {
    use pg4::ParameterValue as P;
    let conn = match pg4::Connection::open(address) {
        Ok(c) => c,
        Err(e) => return json!({ "open": error_json(&e) }),
    };
    let other = match pg4::Connection::open(address) {
        Ok(c) => c,
        Err(e) => return json!({ "open_second": error_json(&e) }),
    };
    exec(&conn, "DROP TABLE IF EXISTS probe_values", &[]);
    let create = exec(
        &conn,
        "CREATE TABLE probe_values (id int8 PRIMARY KEY, b bool, i2 int2, i4 int4, i8 int8, \
         f4 float4, f8 float8, t text, v varchar(20), c char(3), by bytea, j jsonb, \
         ts timestamp, d date, tm time, u uuid, n numeric(12, 3), ai int4[], al int8[], \
         at text[], iv interval, nul text)",
        &[],
    );
    let insert = exec(
        &conn,
        "INSERT INTO probe_values VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
         $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)",
        &[
            P::Int64(1),
            P::Boolean(true),
            P::Int16(-2),
            P::Int32(-3),
            P::Int64(-9_007_199_254_740_993),
            P::Floating32(1.5),
            P::Floating64(-0.125),
            P::Str("héllo ✓".into()),
            P::Str("vc".into()),
            P::Str("ab".into()),
            P::Binary(vec![0, 1, 254, 255]),
            P::Jsonb(br#"{"b": [1, 2], "a": "x"}"#.to_vec()),
            P::Datetime((2024, 2, 29, 23, 59, 58, 123_456_000)),
            P::Date((1999, 12, 31)),
            P::Time((12, 34, 56, 789_000_000)),
            P::Uuid("0195c8a4-7b1e-7cc3-9f3c-1f2e3d4c5b6a".into()),
            P::Decimal("-12345.678".into()),
            P::ArrayInt32(vec![Some(1), None, Some(-3)]),
            P::ArrayInt64(vec![Some(i64::MAX)]),
            P::ArrayStr(vec![Some("a".into()), None]),
            P::Interval(pg4::Interval {
                micros: 3_600_000_001,
                days: 2,
                months: 14,
            }),
            P::DbNull,
        ],
    );
    let select = query(&conn, "SELECT * FROM probe_values", &[]);
    let params_echo = query(
        &conn,
        "SELECT $1::text AS t, $2::int8 + 1 AS n, $3::numeric * 2 AS d",
        &[P::Str("x".into()), P::Int64(41), P::Decimal("0.25".into())],
    );
    let empty = query(&conn, "SELECT id FROM probe_values WHERE id < 0", &[]);
    let updated = exec(
        &conn,
        "UPDATE probe_values SET t = 'changed' WHERE id >= 0",
        &[],
    );

    let syntax_error = query(&conn, "SELEKT 1", &[]);
    let duplicate = exec(
        &conn,
        "INSERT INTO probe_values (id) VALUES ($1)",
        &[P::Int64(1)],
    );
    let wrong_type = exec(
        &conn,
        "INSERT INTO probe_values (id) VALUES ($1)",
        &[P::Str("2".into())],
    );
    let bad_uuid = exec(&conn, "SELECT $1::uuid", &[P::Uuid("not-a-uuid".into())]);
    let timestamptz = query(&conn, "SELECT now() AS t", &[]);

    // A transaction spanning several calls on one connection, watched from another.
    exec(&conn, "DROP TABLE IF EXISTS probe_tx", &[]);
    exec(&conn, "CREATE TABLE probe_tx (n int8)", &[]);
    exec(&conn, "BEGIN", &[]);
    exec(&conn, "INSERT INTO probe_tx VALUES (1), (2)", &[]);
    let inside_tx = count(&conn, "probe_tx");
    let outside_tx = count(&other, "probe_tx");
    exec(&conn, "ROLLBACK", &[]);
    let after_rollback = count(&other, "probe_tx");
    exec(&conn, "BEGIN", &[]);
    exec(&conn, "INSERT INTO probe_tx VALUES (3)", &[]);
    exec(&conn, "COMMIT", &[]);
    let after_commit = count(&other, "probe_tx");

    json!({
        "create": create,
        "insert": insert,
        "select": select,
        "params_echo": params_echo,
        "empty": empty,
        "updated": updated,
        "syntax_error": syntax_error,
        "duplicate": duplicate,
        "wrong_type": wrong_type,
        "bad_uuid": bad_uuid,
        "timestamptz": timestamptz,
        "inside_tx": inside_tx,
        "outside_tx": outside_tx,
        "after_rollback": after_rollback,
        "after_commit": after_commit,
    })
}

pub fn suite_v3(address: &str) -> Json {
    use pg3::{DbValue as V, ParameterValue as P};
    let error = |e: &pg3::PgError| match e {
        pg3::PgError::ConnectionFailed(m) => json!({ "connection-failed": m }),
        pg3::PgError::BadParameter(m) => json!({ "bad-parameter": m }),
        pg3::PgError::QueryFailed(m) => json!({ "query-failed": m }),
        pg3::PgError::ValueConversionFailed(m) => json!({ "value-conversion-failed": m }),
        pg3::PgError::Other(m) => json!({ "other": m }),
    };
    let conn = match pg3::Connection::open(address) {
        Ok(c) => c,
        Err(e) => return json!({ "open": error(&e) }),
    };
    let _ = conn.execute("DROP TABLE IF EXISTS probe_v3", &[]);
    let create = conn
        .execute(
            "CREATE TABLE probe_v3 (i int4, t text, ts timestamp, j jsonb)",
            &[],
        )
        .map(|n| json!(n))
        .unwrap_or_else(|e| error(&e));
    let insert = conn
        .execute(
            "INSERT INTO probe_v3 VALUES ($1, $2, $3, '{\"k\": 1}')",
            &[
                P::Int32(7),
                P::Str("seven".into()),
                P::Datetime((2001, 2, 3, 4, 5, 6, 0)),
            ],
        )
        .map(|n| json!(n))
        .unwrap_or_else(|e| error(&e));
    let select = match conn.query("SELECT i, t, ts, j FROM probe_v3", &[]) {
        Ok(r) => json!({
            "columns": r.columns.iter().map(|c| json!([c.name, type_name(format!("{:?}", c.data_type))])).collect::<Vec<_>>(),
            "rows": r.rows.iter().map(|row| row.iter().map(|v| match v {
                V::Int32(n) => json!({ "int32": n }),
                V::Str(s) => json!({ "str": s }),
                V::Datetime(t) => json!({ "datetime": [t.0, t.1, t.2, t.3, t.4, t.5, t.6] }),
                V::Unsupported => json!("unsupported"),
                other => json!(format!("{other:?}")),
            }).collect::<Vec<_>>()).collect::<Vec<_>>(),
        }),
        Err(e) => error(&e),
    };
    let syntax_error = conn
        .query("SELEKT 1", &[])
        .map(|_| json!("ok"))
        .unwrap_or_else(|e| error(&e));
    let empty = conn
        .query("SELECT i FROM probe_v3 WHERE i < 0", &[])
        .map(|r| json!({ "rows": r.rows.len() }))
        .unwrap_or_else(|e| error(&e));
    json!({
        "create": create,
        "insert": insert,
        "select": select,
        "syntax_error": syntax_error,
        "empty": empty,
    })
}

pub fn lock_setup(address: &str) -> Json {
    let conn = match pg4::Connection::open(address) {
        Ok(c) => c,
        Err(e) => return json!({ "open": error_json(&e) }),
    };
    exec(&conn, "DROP TABLE IF EXISTS probe_lock", &[]);
    exec(
        &conn,
        "CREATE TABLE probe_lock (id int8 PRIMARY KEY, n int8 NOT NULL)",
        &[],
    );
    json!({ "insert": exec(&conn, "INSERT INTO probe_lock VALUES (1, 0)", &[]) })
}

/// Leaves a transaction holding the counter's row lock, and session state, then traps.
pub fn lock_trap(address: &str) -> Json {
    let conn = match pg4::Connection::open(address) {
        Ok(c) => c,
        Err(e) => return json!({ "open": error_json(&e) }),
    };
    exec(&conn, "SET application_name = 'left-behind'", &[]);
    exec(&conn, "BEGIN", &[]);
    exec(&conn, "UPDATE probe_lock SET n = n + 1 WHERE id = 1", &[]);
    panic!("host-probe: trap inside a PostgreSQL transaction");
}

/// Leaves a transaction that only read (it has no transaction id), then traps.
pub fn read_trap(address: &str) -> Json {
    let conn = match pg4::Connection::open(address) {
        Ok(c) => c,
        Err(e) => return json!({ "open": error_json(&e) }),
    };
    exec(&conn, "BEGIN", &[]);
    query(&conn, "SELECT n FROM probe_lock WHERE id = 1", &[]);
    panic!("host-probe: trap inside a PostgreSQL transaction that only read");
}

/// Leaves a transaction that wrote and then failed, then traps.
pub fn failed_trap(address: &str) -> Json {
    let conn = match pg4::Connection::open(address) {
        Ok(c) => c,
        Err(e) => return json!({ "open": error_json(&e) }),
    };
    exec(&conn, "BEGIN", &[]);
    exec(&conn, "UPDATE probe_lock SET n = n + 100 WHERE id = 1", &[]);
    query(&conn, "SELECT 1 / 0 AS never", &[]);
    panic!("host-probe: trap inside a failed PostgreSQL transaction");
}

pub fn lock_bump(address: &str) -> Json {
    let conn = match pg4::Connection::open(address) {
        Ok(c) => c,
        Err(e) => return json!({ "open": error_json(&e) }),
    };
    let application_name = query(
        &conn,
        "SELECT current_setting('application_name') AS a",
        &[],
    );
    exec(&conn, "SET lock_timeout = '3s'", &[]);
    let bump = exec(&conn, "UPDATE probe_lock SET n = n + 1 WHERE id = 1", &[]);
    json!({
        "bump": bump,
        "counter": query(&conn, "SELECT n FROM probe_lock WHERE id = 1", &[]),
        "application_name": application_name,
    })
}

/// The counter read through the platform's store, as a request's first statement.
pub fn app_read(address: &str) -> Json {
    let db = match edge::spin::store::connect_postgres(address) {
        Ok(db) => db,
        Err(e) => return json!({ "open": e.detail }),
    };
    db.query("SELECT n::text AS v FROM probe_lock WHERE id = 1", &[])
        .map(|rows| json!({ "counter": rows.first().map(|r| r.text("v")) }))
        .unwrap_or_else(|e| json!({ "error": e.detail }))
}

/// `lock_bump` through the platform's store: opened by `connect_postgres`, which rolls
/// back a transaction an earlier guest left open.
pub fn app_bump(address: &str) -> Json {
    let db = match edge::spin::store::connect_postgres(address) {
        Ok(db) => db,
        Err(e) => return json!({ "open": e.detail }),
    };
    let text = |sql: &str| {
        db.query(sql, &[])
            .map(|rows| json!(rows.first().map(|r| r.text("v"))))
            .unwrap_or_else(|e| json!({ "error": e.detail }))
    };
    let application_name = text("SELECT current_setting('application_name') AS v");
    let bump = db
        .execute("SET lock_timeout = '3s'", &[])
        .and_then(|()| db.execute("UPDATE probe_lock SET n = n + 1 WHERE id = 1", &[]))
        .map(|()| json!("ok"))
        .unwrap_or_else(|e| json!({ "error": e.detail }));
    json!({
        "bump": bump,
        "counter": text("SELECT n::text AS v FROM probe_lock WHERE id = 1"),
        "application_name": application_name,
    })
}
