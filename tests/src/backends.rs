//! The data back ends the end-to-end suites run the platform on: SQLite (edgehost's
//! state directory, the default) or PostgreSQL plus Redis, chosen by `PLATFORM_BACKEND`
//! (`sqlite` or `postgres`).
//!
//! For PostgreSQL the harness starts, once per test process, a throwaway cluster of
//! Debian's `postgresql` (`initdb` and `postgres` from `/usr/lib/postgresql/<version>/bin`,
//! or `$POSTGRES_BIN_DIR`) in a temporary directory, listening on a free loopback port,
//! with a random password; and a throwaway `redis-server`. Each platform gets a fresh
//! database (owned by the unprivileged role `platform`) and a fresh Redis database number.
//! Both servers run under a small shell supervisor that stops them and deletes their
//! directory when the test process ends, however it ends (its end of a pipe closes).
//! Run as root, the cluster runs as `nobody`, since PostgreSQL refuses to run as root.
//! The cluster trades durability for speed (`fsync=off`): it is thrown away anyway.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The role the platform connects as.
pub const APP_ROLE: &str = "platform";
/// How long a server may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Redis databases per server (one per platform of a test process).
const REDIS_DATABASES: usize = 4096;

/// Which data back end the suites run the platform on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite files in edgehost's state directory (key-value store and database).
    Sqlite,
    /// PostgreSQL for the database, Redis for the key-value store.
    Postgres,
}

impl Backend {
    /// `PLATFORM_BACKEND`: unset or `sqlite`, or `postgres`; anything else stops the tests.
    pub fn selected() -> Backend {
        match std::env::var("PLATFORM_BACKEND").as_deref() {
            Err(_) | Ok("") | Ok("sqlite") => Backend::Sqlite,
            Ok("postgres") => Backend::Postgres,
            Ok(other) => panic!("PLATFORM_BACKEND={other:?}: expected `sqlite` or `postgres`"),
        }
    }
}

/// What one platform uses on the PostgreSQL back end.
#[derive(Debug, Clone)]
pub struct ServerBackends {
    /// The platform's own database: `postgres://platform:...@127.0.0.1:PORT/NAME`.
    pub postgres_url: String,
    /// `127.0.0.1:PORT`, for `allowed_outbound_hosts = ["postgres://{{ postgres_host }}"]`.
    pub postgres_host: String,
    pub database: String,
    /// The platform's own Redis database: `redis://127.0.0.1:PORT/N`.
    pub redis_url: String,
}

impl ServerBackends {
    /// A fresh PostgreSQL database and Redis database (servers started on first use).
    pub async fn fresh() -> ServerBackends {
        let cluster = PostgresCluster::shared().await;
        let database = cluster.create_database().await;
        ServerBackends {
            postgres_url: cluster.url(APP_ROLE, &database),
            postgres_host: cluster.host(),
            database,
            redis_url: RedisServer::shared().await.fresh_database(),
        }
    }

    /// The application variables that point the platform at these back ends.
    pub fn variables(&self) -> Vec<(String, String)> {
        vec![
            ("database".into(), "postgres".into()),
            ("postgres_url".into(), self.postgres_url.clone()),
            ("postgres_host".into(), self.postgres_host.clone()),
        ]
    }

    /// The same back ends reached at the addresses `route` gives their URLs (a benchmark
    /// puts a counting proxy in between).
    pub fn routed(mut self, route: impl Fn(&str) -> String) -> ServerBackends {
        self.postgres_url = route(&self.postgres_url);
        self.redis_url = route(&self.redis_url);
        let after_user = self
            .postgres_url
            .rsplit_once('@')
            .map_or("", |(_, rest)| rest);
        self.postgres_host = after_user
            .split(['/', '?'])
            .next()
            .unwrap_or("")
            .to_string();
        self
    }

    /// Drops the platform's database (the cluster itself goes when the process ends).
    pub async fn discard(self) {
        if let Some(cluster) = POSTGRES.get() {
            cluster.drop_database(&self.database).await;
        }
    }
}

/// Spin runtime config putting the key-value store `default` in the Redis at `url`.
pub fn kv_on_redis(url: &str) -> String {
    format!("[key_value_store.default]\ntype = \"redis\"\nurl = \"{url}\"\n")
}

static POSTGRES: OnceLock<PostgresCluster> = OnceLock::new();
static REDIS: OnceLock<RedisServer> = OnceLock::new();

/// A throwaway PostgreSQL cluster on a loopback port.
pub struct PostgresCluster {
    port: u16,
    password: String,
    databases: AtomicUsize,
    bin: PathBuf,
    base: PathBuf,
    owner: Option<(u32, u32)>,
    _supervisor: Supervisor,
}

/// The server's settings: loopback only, no durability (throwaway data), many clients,
/// and TLS with a certificate of the cluster's own CA ([`PostgresCluster::ca_file`]), for
/// clients that ask for it (the suites' URLs say `sslmode=disable`). `PLATFORM_PG_OPTIONS`
/// adds to them (e.g. `-c log_statement=all`, to see what a benchmark sends).
fn server_options(base: &Path, port: u16) -> String {
    let extra = std::env::var("PLATFORM_PG_OPTIONS").unwrap_or_default();
    format!(
        "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={dir} \
         -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=500 \
         -c ssl=on -c ssl_cert_file={dir}/server.crt -c ssl_key_file={dir}/server.key {extra}",
        dir = base.display()
    )
}

/// Writes the cluster's TLS files into `base`: its CA (`ca.pem`) and the server's
/// certificate for 127.0.0.1 and its key (readable by the server's user only).
fn write_tls_files(base: &Path, owner: Option<(u32, u32)>) {
    use std::os::unix::fs::PermissionsExt;
    let ca = crate::tls::TestCa::new("test PostgreSQL CA", &["127.0.0.1", "localhost"]);
    for (name, text, mode) in [
        ("ca.pem", &ca.ca_pem, 0o644),
        ("server.crt", &ca.cert_pem, 0o644),
        ("server.key", &ca.key_pem, 0o600),
    ] {
        let path = base.join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {name}: {e}"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("chmod {name}: {e}"));
        chown(&path, owner);
    }
}

impl PostgresCluster {
    /// The cluster of this test process, started on first use.
    pub async fn shared() -> &'static PostgresCluster {
        if let Some(c) = POSTGRES.get() {
            return c;
        }
        tokio::task::spawn_blocking(|| POSTGRES.get_or_init(PostgresCluster::start))
            .await
            .expect("PostgreSQL start-up task")
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The CA that signed the server's certificate (PEM): what a client verifying the
    /// server over TLS trusts.
    pub fn ca_file(&self) -> PathBuf {
        self.base.join("ca.pem")
    }

    /// A URL for `role` (`postgres`, the superuser, or `platform`) and `database`.
    pub fn url(&self, role: &str, database: &str) -> String {
        format!(
            "postgres://{role}:{}@127.0.0.1:{}/{database}?sslmode=disable",
            self.password, self.port
        )
    }

    /// A connection as the superuser (its connection task runs on the caller's runtime).
    pub async fn admin(&self) -> tokio_postgres::Client {
        let (client, connection) =
            tokio_postgres::connect(&self.url("postgres", "postgres"), tokio_postgres::NoTls)
                .await
                .expect("connect to the test cluster as postgres");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    /// A connection as the superuser to `database`.
    pub async fn admin_of(&self, database: &str) -> tokio_postgres::Client {
        let (client, connection) =
            tokio_postgres::connect(&self.url("postgres", database), tokio_postgres::NoTls)
                .await
                .expect("connect to the test cluster as postgres");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    /// A new empty database owned by the `platform` role.
    pub async fn create_database(&self) -> String {
        let name = format!(
            "platform_{}",
            self.databases.fetch_add(1, Ordering::Relaxed)
        );
        self.admin()
            .await
            .batch_execute(&format!("CREATE DATABASE {name} OWNER {APP_ROLE}"))
            .await
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        name
    }

    pub async fn drop_database(&self, name: &str) {
        if let Ok((client, connection)) =
            tokio_postgres::connect(&self.url("postgres", "postgres"), tokio_postgres::NoTls).await
        {
            tokio::spawn(connection);
            let _ = client
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
        }
    }

    /// Stops the server as an operator's restart does (`pg_ctl stop -m fast`: sessions are
    /// terminated, new connections refused), keeps it down for `down`, and starts it again
    /// (the faults suite). Answers once it takes connections again.
    pub async fn outage(&'static self, down: Duration) {
        let pg_ctl = |args: Vec<String>| {
            let out = as_owner(Command::new(self.bin.join("pg_ctl")), self.owner)
                .current_dir(&self.base)
                .arg("-D")
                .arg(self.base.join("data"))
                .args(args)
                .output()
                .expect("run pg_ctl");
            assert!(
                out.status.success(),
                "pg_ctl failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let stop = vec!["-m".into(), "fast".into(), "-w".into(), "stop".into()];
        tokio::task::block_in_place(|| pg_ctl(stop));
        tokio::time::sleep(down).await;
        let log = self.base.join("log").display().to_string();
        let options = server_options(&self.base, self.port);
        let start = vec![
            "-l".into(),
            log,
            "-o".into(),
            options,
            "-w".into(),
            "start".into(),
        ];
        tokio::task::block_in_place(|| pg_ctl(start));
    }

    fn start() -> PostgresCluster {
        let bin = postgres_bin_dir();
        let password = random_hex();
        let owner = unprivileged_owner();
        let base = private_dir("platform-pg", owner);
        let data = base.join("data");
        let pwfile = base.join("pwfile");
        std::fs::write(&pwfile, &password).expect("write the password file");
        chown(&pwfile, owner);
        let out = as_owner(Command::new(bin.join("initdb")), owner)
            .current_dir(&base)
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "-A", "scram-sha-256", "-E", "UTF8"])
            .args(["--locale=C", "--no-sync", "--no-instructions"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_file(&pwfile);
        write_tls_files(&base, owner);

        let port = free_port();
        let options = server_options(&base, port);
        // pg_ctl, so that the faults suite can stop and start the server under load.
        let script = r#"
            "$1/pg_ctl" -D "$2/data" -l "$2/log" -o "$3" -w -t 60 start >/dev/null 2>&1
            cat >/dev/null
            "$1/pg_ctl" -D "$2/data" -m fast -w stop >/dev/null 2>&1
            rm -rf "$2"
        "#;
        let supervisor = Supervisor::spawn(
            as_owner(Command::new("sh"), owner)
                .current_dir(&base)
                .args(["-c", script, "sh"])
                .arg(&bin)
                .arg(&base)
                .arg(&options),
        );
        let ready = wait_until(|| {
            Command::new(bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
                .status()
                .is_ok_and(|s| s.success())
        });
        if !ready {
            let log = std::fs::read_to_string(base.join("log")).unwrap_or_default();
            panic!("PostgreSQL did not start on port {port}:\n{log}");
        }
        let cluster = PostgresCluster {
            port,
            password,
            databases: AtomicUsize::new(0),
            bin,
            base,
            owner,
            _supervisor: supervisor,
        };
        let create_role = Command::new(cluster.bin.join("psql"))
            .arg(cluster.url("postgres", "postgres"))
            .args(["-q", "-v", "ON_ERROR_STOP=1", "-c"])
            .arg(format!(
                "CREATE ROLE {APP_ROLE} LOGIN PASSWORD '{}'",
                cluster.password
            ))
            .output()
            .expect("run psql");
        assert!(
            create_role.status.success(),
            "creating the role failed: {}",
            String::from_utf8_lossy(&create_role.stderr)
        );
        cluster
    }
}

/// A throwaway `redis-server` on a loopback port, without persistence.
pub struct RedisServer {
    port: u16,
    databases: AtomicUsize,
    _supervisor: Supervisor,
}

impl RedisServer {
    /// The server of this test process, started on first use.
    pub async fn shared() -> &'static RedisServer {
        if let Some(r) = REDIS.get() {
            return r;
        }
        tokio::task::spawn_blocking(|| REDIS.get_or_init(RedisServer::start))
            .await
            .expect("Redis start-up task")
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The URL of a database number no platform has used yet.
    pub fn fresh_database(&self) -> String {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        assert!(n < REDIS_DATABASES, "out of Redis databases");
        format!("redis://127.0.0.1:{}/{n}", self.port)
    }

    fn start() -> RedisServer {
        let base = private_dir("platform-redis", None);
        let port = free_port();
        let script = r#"
            redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no \
                --databases "$3" --dir "$1" </dev/null >"$1/log" 2>&1 &
            server=$!
            cat >/dev/null
            kill "$server" 2>/dev/null
            wait "$server"
            rm -rf "$1"
        "#;
        let supervisor = Supervisor::spawn(
            Command::new("sh")
                .args(["-c", script, "sh"])
                .arg(&base)
                .arg(port.to_string())
                .arg(REDIS_DATABASES.to_string()),
        );
        let ready = wait_until(|| redis_answers_ping(port));
        if !ready {
            let log = std::fs::read_to_string(base.join("log")).unwrap_or_default();
            panic!("redis-server did not start on port {port} (is it installed?):\n{log}");
        }
        RedisServer {
            port,
            databases: AtomicUsize::new(0),
            _supervisor: supervisor,
        }
    }
}

/// A Redis reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Resp {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Resp>),
}

impl RedisServer {
    /// Runs one command in the database a `redis://127.0.0.1:PORT/N` URL names, with a
    /// plain RESP exchange (so the tests see what really is in Redis).
    pub fn command(url: &str, args: &[&[u8]]) -> Resp {
        use std::io::BufReader;
        let rest = url.strip_prefix("redis://").expect("a redis:// URL");
        let (addr, db) = rest.split_once('/').expect("a database number in the URL");
        let mut stream = std::net::TcpStream::connect(addr).expect("connect to redis-server");
        let mut request = Vec::new();
        for args in [&[&b"SELECT"[..], db.as_bytes()][..], args] {
            request.extend(format!("*{}\r\n", args.len()).into_bytes());
            for a in args {
                request.extend(format!("${}\r\n", a.len()).into_bytes());
                request.extend(*a);
                request.extend(b"\r\n");
            }
        }
        stream.write_all(&request).expect("send to redis-server");
        let mut reader = BufReader::new(stream);
        let selected = read_resp(&mut reader);
        assert_eq!(selected, Resp::Status("OK".into()), "SELECT {db}");
        read_resp(&mut reader)
    }

    /// The value of `key`, if there is one.
    pub fn get(url: &str, key: &[u8]) -> Option<Vec<u8>> {
        match Self::command(url, &[b"GET", key]) {
            Resp::Bulk(value) => value,
            other => panic!("unexpected GET reply {other:?}"),
        }
    }
}

fn read_resp(reader: &mut impl std::io::BufRead) -> Resp {
    let mut line = String::new();
    reader.read_line(&mut line).expect("a Redis reply");
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(1.min(line.len()));
    let number = || -> i64 {
        rest.parse()
            .unwrap_or_else(|_| panic!("bad Redis reply {line:?}"))
    };
    match kind {
        "+" => Resp::Status(rest.to_string()),
        "-" => Resp::Error(rest.to_string()),
        ":" => Resp::Int(number()),
        "$" => match usize::try_from(number()) {
            Err(_) => Resp::Bulk(None),
            Ok(len) => {
                let mut value = vec![0; len + 2];
                reader.read_exact(&mut value).expect("a bulk string");
                value.truncate(len);
                Resp::Bulk(Some(value))
            }
        },
        "*" => {
            let n = usize::try_from(number()).unwrap_or(0);
            Resp::Array((0..n).map(|_| read_resp(reader)).collect())
        }
        _ => panic!("unexpected Redis reply {line:?}"),
    }
}

fn redis_answers_ping(port: u16) -> bool {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut reply = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

/// A shell script that owns a server: it holds the read end of a pipe whose write end
/// lives in this process, and cleans up when that end closes (at exit, even on a crash).
struct Supervisor {
    _pipe: ChildStdin,
}

impl Supervisor {
    fn spawn(command: &mut Command) -> Supervisor {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the supervisor shell");
        let pipe = child.stdin.take().expect("piped stdin");
        // Reaped by init once this process is gone; never waited for here.
        drop(child);
        Supervisor { _pipe: pipe }
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` (or `$POSTGRES_BIN_DIR`).
fn postgres_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("POSTGRES_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version);
    match newest {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL is not installed: no /usr/lib/postgresql/<version>/bin/initdb \
             (scripts/test installs Debian's postgresql; or set POSTGRES_BIN_DIR)"
        ),
    }
}

/// (uid, gid) of `nobody` when this process runs as root (PostgreSQL refuses root).
fn unprivileged_owner() -> Option<(u32, u32)> {
    if geteuid() != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
    let entry = passwd
        .lines()
        .find(|l| l.starts_with("nobody:"))
        .expect("a `nobody` user to run PostgreSQL as");
    let fields: Vec<&str> = entry.split(':').collect();
    let id = |i: usize| fields.get(i).and_then(|f| f.parse().ok());
    Some((id(2).expect("nobody's uid"), id(3).expect("nobody's gid")))
}

unsafe extern "C" {
    /// The C library's `geteuid` (no preconditions, cannot fail).
    safe fn geteuid() -> u32;
}

fn as_owner(mut command: Command, owner: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    if let Some((uid, gid)) = owner {
        // Dropping from root also drops root's supplementary groups (std does that).
        command.uid(uid).gid(gid);
    }
    command
}

fn chown(path: &Path, owner: Option<(u32, u32)>) {
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(path, Some(uid), Some(gid))
            .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    }
}

/// A new directory only `owner` (or this process's user) may enter.
fn private_dir(prefix: &str, owner: Option<(u32, u32)>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir =
        std::env::temp_dir().join(format!("{prefix}-{}-{}", std::process::id(), random_hex()));
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .expect("make the directory private");
    chown(&dir, owner);
    dir
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .expect("read /dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn wait_until(mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A `redis-server` of a test's own on a free port, without persistence, that the test
/// can stop and start again on the same port (Redis going away under the relays or the
/// key-value store).
pub struct OwnRedis {
    port: u16,
    child: Option<std::process::Child>,
    /// Where a durable server keeps its append-only file.
    durable: Option<tempfile::TempDir>,
}

impl OwnRedis {
    pub async fn start() -> OwnRedis {
        let mut r = OwnRedis {
            port: free_port(),
            child: None,
            durable: None,
        };
        r.launch().await;
        r
    }

    /// One that keeps what it acknowledged across a kill, as a production Redis holding
    /// data does (an append-only file written through on every write).
    pub async fn start_durable() -> OwnRedis {
        let mut r = OwnRedis {
            port: free_port(),
            child: None,
            durable: Some(tempfile::tempdir().expect("a directory for Redis's data")),
        };
        r.launch().await;
        r
    }

    /// Starts it (again), and returns once it answers.
    pub async fn launch(&mut self) {
        let mut command = Command::new("redis-server");
        command.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"]);
        match &self.durable {
            Some(dir) => command
                .args([
                    "--save",
                    "",
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                ])
                .arg("--dir")
                .arg(dir.path()),
            None => command.args(["--save", "", "--appendonly", "no"]),
        };
        let child = command
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/test installs it)");
        self.child = Some(child);
        let port = self.port;
        let ready = tokio::task::spawn_blocking(move || wait_until(|| redis_answers_ping(port)))
            .await
            .expect("the wait for redis-server");
        assert!(ready, "redis-server did not start on port {port}");
    }

    /// Kills it (its data goes with it).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
    }
}
