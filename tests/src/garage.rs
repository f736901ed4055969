//! A Garage server (the S3-compatible object store, `garage` 2.x from crates.io) of a
//! test's own, as its own process on free loopback ports: one node
//! (`replication_factor = 1`), SQLite metadata and data in a temporary directory, its
//! layout applied, a bucket and a key allowed on it, all with the `garage` CLI against the
//! running server. A test may kill it and start it again on the same ports and data (the
//! store going down under the media server).
//!
//! The binary: `$GARAGE_BIN`, else `target/tools/garage/bin/garage`, which `scripts/test`
//! builds once (`cargo install garage --locked`, skipped when it is there).

use media_agent::media_store::s3::{Client, S3Settings};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The version `scripts/test` installs.
pub const VERSION: &str = "2.5.0";

/// The bucket the media server writes.
pub const BUCKET: &str = "media";

/// Where the tests find `garage`.
pub fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("GARAGE_BIN") {
        return PathBuf::from(bin);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let bin = workspace.join("target/tools/garage/bin/garage");
    assert!(
        bin.is_file(),
        "the object store tests need Garage: scripts/test builds it \
         (cargo install garage --version {VERSION} --locked --root target/tools/garage), \
         or set GARAGE_BIN"
    );
    bin
}

pub struct Garage {
    bin: PathBuf,
    dir: tempfile::TempDir,
    config: PathBuf,
    s3_port: u16,
    child: Option<Child>,
    key_id: String,
    secret: String,
}

/// 32 random bytes in hex (Garage's `rpc_secret`).
fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .expect("read /dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

impl Garage {
    /// A running Garage with its bucket and key (blocking: a few seconds).
    pub async fn start() -> Garage {
        tokio::task::spawn_blocking(Garage::start_blocking)
            .await
            .expect("the Garage start-up task")
    }

    fn start_blocking() -> Garage {
        let bin = binary();
        let dir = tempfile::Builder::new()
            .prefix("garage-")
            .tempdir()
            .expect("a temporary directory");
        let (rpc, s3, admin) = (free_port(), free_port(), free_port());
        let secret = random_hex();
        let config = dir.path().join("garage.toml");
        std::fs::write(
            &config,
            format!(
                r#"metadata_dir = "{dir}/meta"
data_dir = "{dir}/data"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:{rpc}"
rpc_public_addr = "127.0.0.1:{rpc}"
rpc_secret = "{secret}"

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:{s3}"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:{admin}"
"#,
                dir = dir.path().display()
            ),
        )
        .expect("write garage.toml");
        let mut garage = Garage {
            bin,
            dir,
            config,
            s3_port: s3,
            child: None,
            key_id: String::new(),
            secret: String::new(),
        };
        garage.run();
        // The CLI speaks to the running node over RPC: retried until it answers.
        let node = garage.cli_until_ok(&["node", "id", "-q"]);
        let node = node
            .lines()
            .find_map(|l| l.split_once('@').map(|(id, _)| id.trim().to_string()))
            .unwrap_or_else(|| panic!("garage node id: {node}"));
        garage.cli(&["layout", "assign", "-z", "dc1", "-c", "1G", &node]);
        garage.cli(&["layout", "apply", "--version", "1"]);
        garage.cli(&["bucket", "create", BUCKET]);
        let key = garage.cli(&["key", "create", "media-agent"]);
        let field = |name: &str| {
            key.lines()
                .find_map(|l| l.trim().strip_prefix(name).map(|v| v.trim().to_string()))
                .unwrap_or_else(|| panic!("{name} in garage key create: {key}"))
        };
        garage.key_id = field("Key ID:");
        garage.secret = field("Secret key:");
        garage.cli(&[
            "bucket",
            "allow",
            "--read",
            "--write",
            "--owner",
            BUCKET,
            "--key",
            "media-agent",
        ]);
        garage
    }

    fn run(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("log"))
            .expect("garage's log");
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(&self.config)
            .arg("server")
            .env("RUST_LOG", "garage=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.bin.display()));
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.s3_port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "Garage did not listen: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    fn command(&self, args: &[&str]) -> std::process::Output {
        Command::new(&self.bin)
            .arg("-c")
            .arg(&self.config)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run the garage CLI")
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = self.command(args);
        assert!(
            out.status.success(),
            "garage {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    fn cli_until_ok(&self, args: &[&str]) -> String {
        let started = Instant::now();
        loop {
            let out = self.command(args);
            if out.status.success() {
                return String::from_utf8_lossy(&out.stdout).to_string();
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "garage {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `http://127.0.0.1:<port>`, the S3 API.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// What the media agent needs to write to the bucket.
    pub fn settings(&self) -> S3Settings {
        S3Settings {
            endpoint: self.endpoint(),
            bucket: BUCKET.into(),
            region: "garage".into(),
            access_key_id: self.key_id.clone(),
            secret_access_key: self.secret.clone(),
        }
    }

    /// An S3 client of the bucket (the media agent's own, signed with the key).
    pub fn client(&self) -> Client {
        Client::new(self.settings()).expect("the S3 client")
    }

    /// Every object under `prefix` in the bucket.
    pub async fn list(&self, prefix: &str) -> Vec<String> {
        self.client().list(prefix).await.expect("list the bucket")
    }

    /// Stops the server at once (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again, on the same ports and data; returns once it listens.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "Garage runs");
        self.run();
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        self.kill();
    }
}
