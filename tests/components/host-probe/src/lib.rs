//! host-probe: a Spin HTTP component that exercises every host interface edgehost
//! implements and reports what it saw as JSON, so `tests/tests/host_conformance.rs` can
//! assert exact values. Routes (by request path):
//!
//! | path | does |
//! |---|---|
//! | `/hello` | answers `hello` (benchmarks) |
//! | `/routes/...`, `/probe/headers` | echoes the `spin-*` request headers |
//! | `/probe/kv` | key-value get/set/delete/exists/get-keys, undeclared and unknown stores, table-full |
//! | `/probe/kv-set?KEY=VALUE`, `/probe/kv-get?KEY` | state that must survive a restart |
//! | `/probe/kv-binary?STORE` | keys with unusual characters, values of every byte |
//! | `/probe/kv-keys?STORE` | the keys of a store |
//! | `/probe/pg?ADDRESS` | `spin:postgres@4.0.0`: value round trips, errors, transactions across calls |
//! | `/probe/pg3?ADDRESS` | the basics through `spin:postgres@3.0.0` |
//! | `/probe/pg-lock-setup?ADDRESS` | a one-row counter table at 0 |
//! | `/probe/pg-lock-trap?ADDRESS` | takes the counter's row lock in a transaction, then traps |
//! | `/probe/pg-read-trap?ADDRESS` | reads the counter in a transaction, then traps |
//! | `/probe/pg-failed-trap?ADDRESS` | bumps the counter by 100 in a transaction that then fails, then traps |
//! | `/probe/pg-lock-bump?ADDRESS` | increments the counter (waiting at most 3 s for its lock) |
//! | `/probe/pg-app-bump?ADDRESS` | the same, on a connection opened as the platform's components open theirs |
//! | `/probe/pg-app-read?ADDRESS` | reads the counter on a connection opened as the platform's components open theirs |
//! | `/probe/sqlite` | value round trips, SQL error, transactions, undeclared/unknown databases |
//! | `/probe/sqlite3` | the same basics through `spin:sqlite@3.0.0` |
//! | `/probe/migrations` | rows of the fixture migration and of `_edgehost_migrations` |
//! | `/probe/vars` | declared, undeclared and invalid variable names |
//! | `/probe/outbound?URL` | GET to URL; the status and body, or the error |
//! | `/probe/body` | reads the whole request body; answers its length and a checksum |
//! | `/probe/trap` | panics (a trap) |
//! | `/probe/isolation` | reports whether a previous request's writes to static memory are visible, then makes such writes |
//! | `/probe/grow?mib=N` | allocates and touches N MiB (past the memory limit: a trap) |
//! | `/probe/loop` | computes forever (until the host's deadline interrupts it) |
//! | `/probe/sleep?ms=N` | waits N ms, then answers |
//! | `/probe/sql-guard?DIR` | statements guest SQL may not run, with their outcomes |
//! | `/api/jobs/:name` | a scheduled-job route: checks `jobs_token`, counts calls in SQLite |
//! | `/probe/jobs` | the job counters |

use serde_json::{Value as Json, json};
use spin_sdk::http::{IntoResponse, Method, Request, Response};
use spin_sdk::http_component;
use spin_sdk::key_value::{self, Store};
use spin_sdk::sqlite::{self, Connection, Value};
use spin_sdk::{sqlite3, variables};

#[http_component]
async fn handle(req: Request) -> anyhow::Result<impl IntoResponse> {
    // The "restricted" component serves the same probes under /restricted.
    let path = req.path();
    let path = path.strip_prefix("/restricted").unwrap_or(path).to_string();
    let query = req.query().to_string();
    let body = match path.as_str() {
        "/hello" => return Ok(Response::new(200, "hello")),
        p if p.starts_with("/routes") || p == "/probe/headers" => headers(&req),
        "/probe/kv" => kv_suite(),
        "/probe/kv-set" => kv_set(&query),
        "/probe/kv-get" => kv_get(&query),
        "/probe/kv-binary" => kv_binary(&query),
        "/probe/kv-keys" => kv_keys(&query),
        "/probe/pg" => pg::suite(&query),
        "/probe/pg3" => pg::suite_v3(&query),
        "/probe/pg-lock-setup" => pg::lock_setup(&query),
        "/probe/pg-lock-trap" => pg::lock_trap(&query),
        "/probe/pg-read-trap" => pg::read_trap(&query),
        "/probe/pg-failed-trap" => pg::failed_trap(&query),
        "/probe/pg-lock-bump" => pg::lock_bump(&query),
        "/probe/pg-app-bump" => pg::app_bump(&query),
        "/probe/pg-app-read" => pg::app_read(&query),
        "/probe/sqlite" => sqlite_suite(),
        "/probe/sqlite3" => sqlite3_suite(),
        "/probe/migrations" => migrations(),
        "/probe/vars" => vars(),
        "/probe/outbound" => outbound(&query).await,
        "/probe/body" => body_digest(req.body()),
        "/probe/trap" => panic!("host-probe: deliberate trap"),
        "/probe/isolation" => isolation(),
        "/probe/grow" => grow(&query),
        "/probe/loop" => spin_forever(),
        "/probe/sleep" => sleep(&query),
        "/probe/sql-guard" => sql_guard(&query),
        "/probe/jobs" => jobs(),
        p if p.starts_with("/api/jobs/") => {
            let name = p.trim_start_matches("/api/jobs/").to_string();
            return Ok(job(&req, &name));
        }
        _ => return Ok(Response::new(404, "host-probe: no such probe")),
    };
    Ok(Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(body.to_string())
        .build())
}

/// Memory a request writes that the next one must not see: a counter and a 64 KiB
/// zero-initialised buffer, both statics in the instance's linear memory.
static REQUESTS_SEEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
static SCRATCH: std::sync::Mutex<[u8; 1 << 16]> = std::sync::Mutex::new([0; 1 << 16]);
const MARK: u8 = 0xA5;

/// What of an earlier request this instance sees (all zero in a fresh instance), then
/// leaves marks of its own for the next request to look for.
fn isolation() -> Json {
    let earlier_requests = REQUESTS_SEEN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let mut scratch = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
    let static_marks = scratch.iter().filter(|b| **b == MARK).count();
    scratch.fill(MARK);
    json!({
        "earlier_requests": earlier_requests,
        "static_marks": static_marks,
    })
}

/// Every `spin-*` header, plus the method and the path the SDK sees.
fn headers(req: &Request) -> Json {
    let mut spin = serde_json::Map::new();
    for (name, value) in req.headers() {
        if name.starts_with("spin-") {
            spin.insert(
                name.to_string(),
                json!(value.as_str().unwrap_or("<non-utf8>")),
            );
        }
    }
    json!({
        "method": method_name(req.method()),
        "path": req.path(),
        "query": req.query(),
        "headers": spin,
    })
}

fn method_name(m: &Method) -> String {
    match m {
        Method::Get => "GET".into(),
        Method::Post => "POST".into(),
        Method::Put => "PUT".into(),
        Method::Delete => "DELETE".into(),
        Method::Patch => "PATCH".into(),
        Method::Head => "HEAD".into(),
        Method::Options => "OPTIONS".into(),
        Method::Connect => "CONNECT".into(),
        Method::Trace => "TRACE".into(),
        Method::Other(o) => o.clone(),
    }
}

fn kv_error(e: &key_value::Error) -> String {
    match e {
        key_value::Error::StoreTableFull => "store-table-full".into(),
        key_value::Error::NoSuchStore => "no-such-store".into(),
        key_value::Error::AccessDenied => "access-denied".into(),
        key_value::Error::Other(m) => format!("other: {m}"),
    }
}

fn kv_suite() -> Json {
    let store = match Store::open("default") {
        Ok(s) => s,
        Err(e) => return json!({ "open_default": kv_error(&e) }),
    };
    let r = |res: Result<Json, key_value::Error>| {
        res.unwrap_or_else(|e| json!({ "error": kv_error(&e) }))
    };
    let set = r(store.set("probe-a", b"alpha").map(|_| json!("ok")));
    let _ = store.set("probe-b", &[0, 1, 2, 255]);
    let get = r(store
        .get("probe-a")
        .map(|v| json!(v.map(|b| String::from_utf8_lossy(&b).into_owned()))));
    let get_binary = r(store.get("probe-b").map(|v| json!(v)));
    let get_missing = r(store.get("probe-missing").map(|v| json!(v)));
    let overwrite = r(store.set("probe-a", b"beta").map(|_| json!("ok")));
    let after_overwrite = r(store
        .get("probe-a")
        .map(|v| json!(v.map(|b| String::from_utf8_lossy(&b).into_owned()))));
    let exists = r(store.exists("probe-a").map(|v| json!(v)));
    let exists_missing = r(store.exists("probe-missing").map(|v| json!(v)));
    let mut keys = store.get_keys().unwrap_or_default();
    keys.retain(|k| k.starts_with("probe-"));
    keys.sort();
    let delete = r(store.delete("probe-a").map(|_| json!("ok")));
    let exists_after_delete = r(store.exists("probe-a").map(|v| json!(v)));
    let delete_missing = r(store.delete("probe-missing").map(|_| json!("ok")));
    let _ = store.delete("probe-b");

    // Open stores until the host refuses; drop them all afterwards.
    let mut open = Vec::new();
    let table_full = loop {
        match Store::open("default") {
            Ok(s) => open.push(s),
            Err(e) => break json!({ "after": open.len() + 1, "error": kv_error(&e) }),
        }
        if open.len() > 10_000 {
            break json!("no limit");
        }
    };
    drop(open);
    let reopen_after_drop = Store::open("default")
        .map(|_| "ok".to_string())
        .unwrap_or_else(|e| kv_error(&e));

    json!({
        "set": set,
        "get": get,
        "get_binary": get_binary,
        "get_missing": get_missing,
        "overwrite": overwrite,
        "after_overwrite": after_overwrite,
        "exists": exists,
        "exists_missing": exists_missing,
        "keys": keys,
        "delete": delete,
        "exists_after_delete": exists_after_delete,
        "delete_missing": delete_missing,
        "undeclared": Store::open("undeclared").map(|_| "ok".to_string()).unwrap_or_else(|e| kv_error(&e)),
        "declared_unknown": Store::open("unknown").map(|_| "ok".to_string()).unwrap_or_else(|e| kv_error(&e)),
        "table_full": table_full,
        "reopen_after_drop": reopen_after_drop,
    })
}

/// `?key=value`
fn kv_set(query: &str) -> Json {
    let (key, value) = query.split_once('=').unwrap_or((query, ""));
    let res = Store::open("default").and_then(|s| s.set(key, value.as_bytes()));
    match res {
        Ok(()) => json!({ "set": key }),
        Err(e) => json!({ "error": kv_error(&e) }),
    }
}

/// `?key`
fn kv_get(query: &str) -> Json {
    match Store::open("default").and_then(|s| s.get(query)) {
        Ok(v) => json!({ "value": v.map(|b| String::from_utf8_lossy(&b).into_owned()) }),
        Err(e) => json!({ "error": kv_error(&e) }),
    }
}

/// Keys that are awkward to store: spaces, control characters, NUL, non-ASCII.
const AWKWARD_KEYS: [&str; 4] = ["with space", "line\nbreak", "nul\0byte", "ключ 🔑"];

/// Stores every awkward key with a value of all 256 byte values (rotated per key), reads
/// them back and lists them; deletes them afterwards.
fn kv_binary(label: &str) -> Json {
    let store = match Store::open(label) {
        Ok(s) => s,
        Err(e) => return json!({ "open": kv_error(&e) }),
    };
    let value = |i: usize| {
        (0..=255u8)
            .map(|b| b.wrapping_add(i as u8))
            .collect::<Vec<u8>>()
    };
    let mut read_back = Vec::new();
    for (i, key) in AWKWARD_KEYS.iter().enumerate() {
        if let Err(e) = store.set(key, &value(i)) {
            return json!({ "set": kv_error(&e) });
        }
    }
    for key in AWKWARD_KEYS {
        read_back.push(match store.get(key) {
            Ok(v) => json!(v),
            Err(e) => json!({ "error": kv_error(&e) }),
        });
    }
    let mut keys = store.get_keys().unwrap_or_default();
    keys.retain(|k| AWKWARD_KEYS.contains(&k.as_str()));
    keys.sort();
    let exists = AWKWARD_KEYS
        .iter()
        .all(|k| store.exists(k).unwrap_or(false));
    for key in AWKWARD_KEYS {
        let _ = store.delete(key);
    }
    json!({ "keys": keys, "values": read_back, "exists": exists })
}

/// `?label`: the sorted keys of that store.
fn kv_keys(label: &str) -> Json {
    match Store::open(label).and_then(|s| s.get_keys()) {
        Ok(mut keys) => {
            keys.sort();
            json!({ "keys": keys })
        }
        Err(e) => json!({ "error": kv_error(&e) }),
    }
}

fn sql_error(e: &sqlite::Error) -> String {
    match e {
        sqlite::Error::NoSuchDatabase => "no-such-database".into(),
        sqlite::Error::AccessDenied => "access-denied".into(),
        sqlite::Error::InvalidConnection => "invalid-connection".into(),
        sqlite::Error::DatabaseFull => "database-full".into(),
        sqlite::Error::Io(m) => format!("io: {m}"),
    }
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::Integer(n) => json!({ "integer": n }),
        Value::Real(f) => json!({ "real": f }),
        Value::Text(t) => json!({ "text": t }),
        Value::Blob(b) => json!({ "blob": b }),
        Value::Null => json!("null"),
    }
}

fn rows_json(res: &sqlite::QueryResult) -> Json {
    json!({
        "columns": res.columns,
        "rows": res.rows.iter().map(|r| r.values.iter().map(value_json).collect::<Vec<_>>()).collect::<Vec<_>>(),
    })
}

fn sqlite_suite() -> Json {
    let conn = match Connection::open("default") {
        Ok(c) => c,
        Err(e) => return json!({ "open_default": sql_error(&e) }),
    };
    let q = |sql: &str, params: &[Value]| match conn.execute(sql, params) {
        Ok(res) => rows_json(&res),
        Err(e) => json!({ "error": sql_error(&e) }),
    };
    q("DROP TABLE IF EXISTS probe_values", &[]);
    let create = q(
        "CREATE TABLE probe_values (i INTEGER, r REAL, t TEXT, b BLOB, n TEXT)",
        &[],
    );
    let insert = q(
        "INSERT INTO probe_values VALUES (?, ?, ?, ?, ?)",
        &[
            Value::Integer(-9_007_199_254_740_993),
            Value::Real(2.5),
            Value::Text("héllo ✓".into()),
            Value::Blob(vec![0, 1, 254, 255]),
            Value::Null,
        ],
    );
    let select = q("SELECT i, r, t, b, n FROM probe_values", &[]);
    let params_echo = q(
        "SELECT ? AS i, ? AS r, ? AS t, ? AS b, ? AS n",
        &[
            Value::Integer(42),
            Value::Real(-0.125),
            Value::Text("x".into()),
            Value::Blob(vec![]),
            Value::Null,
        ],
    );
    let typed = q(
        "SELECT typeof(i), typeof(r), typeof(t), typeof(b), typeof(n) FROM probe_values",
        &[],
    );
    let syntax_error = q("SELEKT nonsense", &[]);
    let missing_table = q("SELECT * FROM no_such_table", &[]);

    // A transaction spanning several execute calls on one connection.
    q("BEGIN", &[]);
    q("INSERT INTO probe_values (i) VALUES (1), (2)", &[]);
    let inside_tx = q("SELECT count(*) FROM probe_values", &[]);
    q("ROLLBACK", &[]);
    let after_rollback = q("SELECT count(*) FROM probe_values", &[]);
    q("BEGIN", &[]);
    q("INSERT INTO probe_values (i) VALUES (3)", &[]);
    q("COMMIT", &[]);
    let after_commit = q("SELECT count(*) FROM probe_values", &[]);

    json!({
        "create": create,
        "insert": insert,
        "select": select,
        "params_echo": params_echo,
        "typed": typed,
        "sql_error": syntax_error,
        "missing_table": missing_table,
        "inside_tx": inside_tx,
        "after_rollback": after_rollback,
        "after_commit": after_commit,
        "undeclared": Connection::open("undeclared").map(|_| "ok".to_string()).unwrap_or_else(|e| sql_error(&e)),
        "declared_unknown": Connection::open("unknown").map(|_| "ok".to_string()).unwrap_or_else(|e| sql_error(&e)),
    })
}

fn sqlite3_suite() -> Json {
    use sqlite3::{Connection, Value};
    let conn = match Connection::open("default") {
        Ok(c) => c,
        Err(e) => return json!({ "open_default": format!("{e:?}") }),
    };
    let exec =
        |sql: &str, params: &[Value]| conn.execute(sql, params).map_err(|e| format!("{e:?}"));
    let _ = exec(
        "CREATE TABLE IF NOT EXISTS probe_v3 (id INTEGER PRIMARY KEY, t TEXT)",
        &[],
    );
    let insert = exec(
        "INSERT INTO probe_v3 (t) VALUES (?), (?)",
        &[Value::Text("a".into()), Value::Text("b".into())],
    );
    let changes = conn.changes();
    let rowid = conn.last_insert_rowid();
    let max = exec("SELECT max(id) FROM probe_v3", &[]).map(|r| {
        match r.rows.first().and_then(|row| row.values.first()) {
            Some(Value::Integer(n)) => *n,
            _ => -1,
        }
    });
    json!({
        "insert": insert.map(|_| "ok".to_string()).unwrap_or_else(|e| e),
        "changes": changes,
        "rowid_is_max": max.map(|m| json!(m == rowid)).unwrap_or_else(|e| json!(e)),
        "undeclared": Connection::open("undeclared").map(|_| "ok".to_string()).unwrap_or_else(|e| format!("{e:?}")),
    })
}

fn migrations() -> Json {
    let conn = match Connection::open("default") {
        Ok(c) => c,
        Err(e) => return json!({ "open_default": sql_error(&e) }),
    };
    let q = |sql: &str| match conn.execute(sql, &[]) {
        Ok(res) => rows_json(&res),
        Err(e) => json!({ "error": sql_error(&e) }),
    };
    json!({
        "seeded": q("SELECT name FROM probe_seed ORDER BY name"),
        "applied": q("SELECT name FROM _edgehost_migrations ORDER BY name"),
    })
}

mod pg;

fn var_error(e: &variables::Error) -> String {
    match e {
        variables::Error::InvalidName(m) => format!("invalid-name: {m}"),
        variables::Error::Undefined(m) => format!("undefined: {m}"),
        variables::Error::Provider(m) => format!("provider: {m}"),
        variables::Error::Other(m) => format!("other: {m}"),
    }
}

fn vars() -> Json {
    let get = |name: &str| match variables::get(name) {
        Ok(v) => json!({ "value": v }),
        Err(e) => json!({ "error": var_error(&e) }),
    };
    json!({
        "greeting": get("greeting"),
        "mixed": get("mixed"),
        "secret": get("secret"),
        "from_env": get("from_env"),
        "undeclared": get("not_declared"),
        "invalid": get("Bad-Name"),
    })
}

/// `?<url>`: a GET to the URL (percent-decoding not needed: the tests pass plain URLs).
async fn outbound(query: &str) -> Json {
    let req = Request::builder().method(Method::Get).uri(query).build();
    match spin_sdk::http::send::<_, Response>(req).await {
        Ok(resp) => json!({
            "status": resp.status(),
            "body": String::from_utf8_lossy(resp.body()),
        }),
        Err(e) => json!({ "error": format!("{e:?}") }),
    }
}

fn body_digest(body: &[u8]) -> Json {
    // FNV-1a: enough to check the bytes arrived intact and in order.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in body {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    json!({ "len": body.len(), "fnv1a": format!("{h:016x}") })
}

/// `?mib=N`: allocates and touches N MiB (the memory limit makes a large N trap).
fn grow(query: &str) -> Json {
    let mib: usize = query_param(query, "mib")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut buffer = vec![0u8; mib << 20];
    // Touch every page so the memory is really used.
    for i in (0..buffer.len()).step_by(4096) {
        buffer[i] = 1;
    }
    json!({ "grown_mib": mib, "touched": buffer.iter().filter(|b| **b == 1).count() })
}

/// Computes forever; only the host's deadline ends it.
fn spin_forever() -> Json {
    let mut x: u64 = 1;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// `?ms=N`: waits N ms (a host-side wait, not computation), then answers.
fn sleep(query: &str) -> Json {
    let ms: u64 = query_param(query, "ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    std::thread::sleep(std::time::Duration::from_millis(ms));
    json!({ "slept_ms": ms })
}

fn query_param<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

/// `?<dir>`: statements guest SQL must not run, each with its outcome, and what they
/// would have changed (files in `dir`, the user_version pragma, the journal mode).
fn sql_guard(dir: &str) -> Json {
    let conn = match Connection::open("default") {
        Ok(c) => c,
        Err(e) => return json!({ "open_default": sql_error(&e) }),
    };
    let run = |sql: &str| match conn.execute(sql, &[]) {
        Ok(res) => json!({ "ok": rows_json(&res) }),
        Err(e) => json!({ "error": sql_error(&e) }),
    };
    let refused = [
        format!("ATTACH DATABASE '{dir}/attached.db' AS other"),
        "DETACH DATABASE main".to_string(),
        format!("VACUUM INTO '{dir}/copy.db'"),
        "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libsqlite3.so.0')".to_string(),
        "PRAGMA user_version = 42".to_string(),
        "PRAGMA journal_mode = DELETE".to_string(),
        "PRAGMA writable_schema = ON".to_string(),
    ];
    let outcomes: serde_json::Map<String, Json> =
        refused.iter().map(|sql| (sql.clone(), run(sql))).collect();
    json!({
        "refused": outcomes,
        "user_version": run("PRAGMA user_version"),
        "journal_mode": run("PRAGMA journal_mode"),
        "table_info": run("PRAGMA table_info(probe_seed)"),
    })
}

/// `POST /api/jobs/:name`, as the platform's job routes answer it: Bearer `jobs_token`
/// (or `?token=`) required. Each call is counted in SQLite with how many calls of the
/// same job overlapped. Names starting with `drain` begin with 10 units of work and do
/// one per call; `slow...` takes 300 ms; `missing` answers 404 (after counting);
/// `flaky...` answers 500 on its first two calls.
fn job(req: &Request, name: &str) -> Response {
    let token = variables::get("jobs_token").unwrap_or_default();
    let bearer = req
        .header("authorization")
        .and_then(|v| v.as_str())
        .and_then(|v| v.strip_prefix("Bearer "));
    let query_token = query_param(req.query(), "token");
    if token.is_empty() || (bearer != Some(token.as_str()) && query_token != Some(token.as_str())) {
        return Response::new(401, "bad jobs token");
    }
    let outcome = count_job_call(name);
    let body = match outcome {
        Ok(_) if name.starts_with("flaky") && job_calls(name) <= 2 => {
            return Response::new(500, "not yet");
        }
        Ok((done, remaining)) if name != "missing" => {
            json!({ "job": name, "done": done, "remaining": remaining })
        }
        Ok(_) => return Response::new(404, "no such job"),
        Err(e) => return Response::new(500, e),
    };
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(body.to_string())
        .build()
}

fn count_job_call(name: &str) -> Result<(i64, i64), String> {
    let conn = Connection::open("default").map_err(|e| sql_error(&e))?;
    let exec = |sql: &str, params: &[Value]| conn.execute(sql, params).map_err(|e| sql_error(&e));
    exec(
        "CREATE TABLE IF NOT EXISTS probe_jobs (name TEXT PRIMARY KEY, calls INTEGER NOT NULL, \
         remaining INTEGER NOT NULL, inflight INTEGER NOT NULL, max_inflight INTEGER NOT NULL)",
        &[],
    )?;
    let initial = if name.starts_with("drain") { 10 } else { 0 };
    let name_v = Value::Text(name.to_string());
    exec(
        "INSERT OR IGNORE INTO probe_jobs VALUES (?, 0, ?, 0, 0)",
        &[name_v.clone(), Value::Integer(initial)],
    )?;
    exec(
        "UPDATE probe_jobs SET calls = calls + 1, inflight = inflight + 1, \
         max_inflight = max(max_inflight, inflight + 1) WHERE name = ?",
        std::slice::from_ref(&name_v),
    )?;
    if name.starts_with("slow") {
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let done = i64::from(initial > 0);
    exec(
        "UPDATE probe_jobs SET inflight = inflight - 1, remaining = max(remaining - ?, 0) \
         WHERE name = ?",
        &[Value::Integer(done), name_v.clone()],
    )?;
    let res = exec("SELECT remaining FROM probe_jobs WHERE name = ?", &[name_v])?;
    let remaining = match res.rows.first().and_then(|r| r.values.first()) {
        Some(Value::Integer(n)) => *n,
        _ => 0,
    };
    Ok((done, remaining))
}

/// Calls of job `name` counted so far.
fn job_calls(name: &str) -> i64 {
    jobs()[name]["calls"].as_i64().unwrap_or(0)
}

/// Every job's counters.
fn jobs() -> Json {
    let conn = match Connection::open("default") {
        Ok(c) => c,
        Err(e) => return json!({ "open_default": sql_error(&e) }),
    };
    let res = conn.execute(
        "SELECT name, calls, remaining, max_inflight FROM probe_jobs ORDER BY name",
        &[],
    );
    let mut out = serde_json::Map::new();
    if let Ok(res) = res {
        for row in &res.rows {
            if let [
                Value::Text(name),
                Value::Integer(calls),
                Value::Integer(remaining),
                Value::Integer(max),
            ] = row.values.as_slice()
            {
                out.insert(
                    name.clone(),
                    json!({ "calls": calls, "remaining": remaining, "max_inflight": max }),
                );
            }
        }
    }
    Json::Object(out)
}
