//! The suites on the real Spin: with `PLATFORM_HOST=spin` and `SPIN_BIN` naming a `spin`
//! binary (3.x or 4.x), [`crate::Platform`] runs the same `spin.toml` with `spin up` on a
//! free loopback port instead of edgehost, on either back end (`PLATFORM_BACKEND`). Spin
//! has none of edgehost's extras: no embedded chat relay or media server, no scheduler (the
//! suites call the jobs as a cron would, and the harness applies the schema through
//! `POST /api/jobs/migrate`), and no way to move the guests' clock, so a test that needs
//! one of those fails saying so. docs/testing.md records which suites pass there.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Whether the suites run on the real Spin (`PLATFORM_HOST=spin`).
pub fn selected() -> bool {
    match std::env::var("PLATFORM_HOST").as_deref() {
        Ok("spin") => true,
        Ok("edgehost") | Ok("") | Err(_) => false,
        Ok(other) => panic!("PLATFORM_HOST={other:?}: use edgehost (the default) or spin"),
    }
}

/// The `spin` binary: `SPIN_BIN`, else `spin` on PATH.
fn spin_binary() -> PathBuf {
    std::env::var_os("SPIN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("spin"))
}

/// The secrets `spin.toml` requires without a default: the harness makes them, as edgehost
/// generates them locally.
const GENERATED: &[&str] = &[
    "jwt_secret",
    "admin_token",
    "relay_secret",
    "music_token_key",
    "music_service_secret",
    "jobs_token",
    "media_secret",
];

/// A running `spin up`.
pub struct SpinProcess {
    child: tokio::process::Child,
    pub addr: SocketAddr,
    /// Every variable the harness set (the rest keep `spin.toml`'s defaults).
    pub variables: HashMap<String, String>,
}

impl SpinProcess {
    /// Runs `manifest` with `spin up`, its state in `state_dir`, `variables` (the back
    /// end's and the test's, later ones winning) on top of generated secrets and open
    /// registration (edgehost's local defaults); returns once it answers HTTP.
    pub async fn start(
        manifest: &Path,
        state_dir: &Path,
        variables: &[(String, String)],
        runtime_config: Option<&Path>,
    ) -> SpinProcess {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        // Kept where edgehost keeps the secrets it generates: the same across a restart on
        // the same state, and there for the tests that read one.
        let kept = state_dir.join("generated-variables.toml");
        let mut values: HashMap<String, String> = std::fs::read_to_string(&kept)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split_once(" = "))
            .map(|(name, value)| (name.to_string(), value.trim_matches('"').to_string()))
            .collect();
        for name in GENERATED {
            values
                .entry(name.to_string())
                .or_insert_with(|| hex::encode(random_bytes()));
        }
        let generated: String = GENERATED
            .iter()
            .map(|name| format!("{name} = {:?}\n", values[*name]))
            .collect();
        std::fs::write(&kept, generated).expect("write the generated secrets");
        values.insert("registration_mode".into(), "open".into());
        for (name, value) in variables {
            values.insert(name.clone(), value.clone());
        }
        let mut command = tokio::process::Command::new(spin_binary());
        command
            .arg("up")
            .arg("--from")
            .arg(manifest)
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--state-dir")
            .arg(state_dir);
        if let Some(file) = runtime_config {
            command.arg("--runtime-config-file").arg(file);
        }
        for (name, value) in &values {
            command.env(
                format!("SPIN_VARIABLE_{}", name.to_ascii_uppercase()),
                value,
            );
        }
        let log = std::fs::File::create(state_dir.join("spin.log")).expect("spin's log file");
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .kill_on_drop(true);
        let mut child = command.spawn().unwrap_or_else(|e| {
            panic!(
                "PLATFORM_HOST=spin: cannot run {} ({e}); set SPIN_BIN to a spin binary",
                spin_binary().display()
            )
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(state_dir.join("spin.log")).unwrap_or_default();
                panic!("spin up exited ({status}):\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "spin up did not listen on {addr} within 120 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        SpinProcess {
            child,
            addr,
            variables: values,
        }
    }

    /// Stops `spin up` (SIGINT, as Ctrl-C; killed if it lingers).
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-INT", &pid.to_string()])
                .status();
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

fn random_bytes() -> [u8; 32] {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("random bytes");
    bytes
}
