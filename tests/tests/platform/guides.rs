//! The guides as tests: every example request in the README and `docs/*.md` runs, in the
//! order a reader meets them, against a platform started as `edgehost up` starts it, and
//! each answer is checked against what the guide shows after `# ->` (see
//! `platform_tests::guide` for how a guide's answers are read).
//!
//! The guides read as one story: the README registers a tenant and signs users up
//! (`B`, `KEY`, `SECRET`, `TOKEN`), the broadcasts guide creates the broadcast (`ID`) that
//! the analytics and media guides use, and so on. The suite adapts to the guides, not the
//! other way round:
//! - the addresses the guides name (`127.0.0.1:3000`, the RTMP and HLS ports, the
//!   example receiver of webhooks) become the running platform's;
//! - the files a reader would have (`film.mp4`, `intro.mp3`, `notes.pdf`, `cover.png`) are
//!   in the working directory;
//! - commands that start the platform (`spin up`, `cargo edgehost up`) are not run: it is
//!   running; `ffmpeg` publishing a test pattern runs for a few seconds and must still be
//!   publishing when stopped; `wscat -c URL` opens that socket;
//! - the Python examples run with the values a reader's code would have (a delivery the
//!   receiver got, the bearer the music platform got).
//!
//! Every request must answer 2xx unless the guide shows another status.

use platform_tests::guide::{self, Block, ExpectedBody, Kept, Pattern, Shell, Step};
use platform_tests::webhook_receiver::Receiver;
use platform_tests::{Platform, workspace_root};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// The guides in the order a reader goes through them (each builds on the ones before).
const STORY: &[&str] = &[
    "README.md",
    "docs/trust-model.md",
    "docs/broadcasts.md",
    "docs/analytics.md",
    "docs/media.md",
    "docs/replays.md",
    "docs/player.md",
    "docs/chat.md",
    "docs/files.md",
    "docs/music.md",
    "docs/webhooks.md",
    "docs/data.md",
    "docs/deploy.md",
];

/// How long one step may take (a 20 MiB upload in parts is the longest).
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// How long `ffmpeg` publishes a guide's test pattern before it is stopped.
const PUBLISH_FOR: &str = "8";

fn documents() -> Vec<(String, String)> {
    let root = workspace_root();
    let mut paths = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.ends_with(".md").then(|| format!("docs/{name}"))
        })
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root.join(&p)).expect("read a guide");
            (p, text)
        })
        .collect()
}

/// Whether a block holds example requests the suite runs.
fn is_example(block: &Block) -> bool {
    match block.lang.as_str() {
        "sh" | "bash" | "shell" => {
            let text = block.text();
            text.contains("curl ") || text.contains("wscat ")
        }
        "python" => true,
        _ => false,
    }
}

#[test]
fn every_guide_with_an_example_is_in_the_story() {
    let missing: Vec<String> = documents()
        .into_iter()
        .filter(|(path, text)| {
            !STORY.contains(&path.as_str()) && guide::blocks(path, text).iter().any(is_example)
        })
        .map(|(path, _)| path)
        .collect();
    assert!(
        missing.is_empty(),
        "guides with example requests that the guide suite does not run (add them to STORY \
         where a reader would meet them): {missing:?}"
    );
}

/// A 1x1 PNG (a poster is recognised by its bytes).
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

/// The files a reader of the files guide has at hand.
fn reader_files(dir: &Path) {
    let film: Vec<u8> = (0..20u32 * 1024 * 1024)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(dir.join("film.mp4"), film).expect("film.mp4");
    let mut mp3 = b"ID3\x04\x00\x00\x00\x00\x00\x00".to_vec();
    mp3.extend(std::iter::repeat_n(0xffu8, 64 * 1024));
    std::fs::write(dir.join("intro.mp3"), mp3).expect("intro.mp3");
    std::fs::write(dir.join("notes.pdf"), b"%PDF-1.4\n% notes\n%%EOF\n").expect("notes.pdf");
    std::fs::write(dir.join("cover.png"), PNG).expect("cover.png");
}

/// A guide run in progress: the shell, what the reader kept, the last answer.
struct Reader {
    shell: Shell,
    kept: Kept,
    /// The documented addresses and what they are on the running platform.
    addresses: Vec<(String, String)>,
    /// The last request's step, its answer and the statuses not yet checked.
    last: Option<LastAnswer>,
    platform: Platform,
    receiver: Receiver,
    music: MusicStandIn,
    dir: tempfile::TempDir,
}

struct LastAnswer {
    at: String,
    body: String,
    statuses: Vec<u16>,
    /// The pattern the guide showed for it, once checked (for `NAME=...` lines).
    pattern: Option<Pattern>,
    json: Option<Value>,
}

impl Reader {
    fn localize(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (documented, actual) in &self.addresses {
            text = text.replace(documented.as_str(), actual);
        }
        text
    }

    /// Replaces the `<name>` values the reader kept.
    fn fill_in(&self, at: &str, text: &str) -> String {
        let mut filled = text.to_string();
        for placeholder in guide::placeholder_names(text) {
            let name = &placeholder[1..placeholder.len() - 1];
            match self.kept.get(name) {
                Some(value) => filled = filled.replace(placeholder, value),
                None => panic!(
                    "{at}: the guide uses {placeholder}, which no answer before showed \
                     (show it in a `# ->` answer)"
                ),
            }
        }
        filled
    }

    /// Checks that the last request's statuses were 2xx (when the guide showed none).
    fn settle(&mut self) {
        if let Some(last) = self.last.as_mut() {
            let statuses = std::mem::take(&mut last.statuses);
            if let Some(bad) = statuses.iter().find(|s| !(200..300).contains(*s)) {
                panic!(
                    "{}: answered {bad} (the guide shows no status, so 2xx): {}",
                    last.at, last.body
                );
            }
        }
    }

    async fn command(&mut self, at: &str, text: &str) {
        self.settle();
        let text = self.fill_in(at, &self.localize(text));
        let first_word = text
            .split_whitespace()
            .find(|w| !w.contains('=') && *w != "\\")
            .unwrap_or_default();
        if matches!(first_word, "spin" | "cargo" | "scripts/up" | "scripts/test") {
            println!("{at}: not run (the platform is running): {first_word}");
            return;
        }
        if first_word == "wscat" {
            return self.open_socket(at, &text).await;
        }
        let publishing = first_word == "ffmpeg";
        let text = if publishing {
            format!("timeout -s INT {PUBLISH_FOR} {text}")
        } else {
            text
        };
        let ran = self.shell.run(&text, STEP_LIMIT).await;
        if publishing {
            assert_eq!(
                ran.exit, 124,
                "{at}: ffmpeg stopped publishing before it was stopped: {}",
                ran.stderr
            );
            let speed = ran
                .stderr
                .rsplit("speed=")
                .next()
                .and_then(|s| s.split('x').next())
                .unwrap_or("?")
                .trim();
            println!("{at}: ffmpeg published for {PUBLISH_FOR} s at {speed}x real time");
            self.last = None;
            return;
        }
        assert_eq!(
            ran.exit, 0,
            "{at}: the command failed: {}{}",
            ran.stderr, ran.stdout
        );
        let json = serde_json::from_str(&ran.stdout).ok();
        println!("{at}: {:?}", ran.statuses);
        self.last = Some(LastAnswer {
            at: at.to_string(),
            body: ran.stdout,
            statuses: ran.statuses,
            pattern: None,
            json,
        });
    }

    async fn expect(&mut self, at: &str, text: &str) {
        let mut text = self.localize(text);
        // `$B` and the like in an answer are the reader's variables.
        for name in shell_variables(&text.clone()) {
            let value = self.shell.get(&name).await;
            text = text.replace(&format!("${name}"), &value);
        }
        let expectation = guide::expectation(&text).unwrap_or_else(|e| panic!("{at}: {e}"));
        let last = self
            .last
            .as_mut()
            .unwrap_or_else(|| panic!("{at}: an answer shown after no request"));
        let statuses = std::mem::take(&mut last.statuses);
        if let Some(status) = expectation.status {
            assert!(
                statuses.last() == Some(&status),
                "{at}: the guide shows {status}, the answer was {statuses:?}: {}",
                last.body
            );
        } else if let Some(bad) = statuses.iter().find(|s| !(200..300).contains(*s)) {
            panic!("{at}: answered {bad}: {}", last.body);
        }
        match expectation.body {
            ExpectedBody::Nothing => {}
            ExpectedBody::Fields(fields) => {
                let json = last
                    .json
                    .as_ref()
                    .unwrap_or_else(|| panic!("{at}: the answer is not JSON: {}", last.body));
                for field in fields {
                    assert!(
                        json.get(&field).is_some(),
                        "{at}: the guide lists `{field}`, the answer lacks it: {json}"
                    );
                }
            }
            ExpectedBody::Json(pattern) => {
                let json = last
                    .json
                    .as_ref()
                    .unwrap_or_else(|| panic!("{at}: the answer is not JSON: {}", last.body));
                if let Err(e) = guide::check(&pattern, json, "", &mut self.kept) {
                    panic!("{at}: {e}\n(the whole answer: {json})");
                }
                last.pattern = Some(pattern);
            }
        }
    }

    async fn bind(&mut self, at: &str, name: &str, placeholder: &str) {
        let placeholder = self.localize(placeholder);
        let last = self
            .last
            .as_ref()
            .unwrap_or_else(|| panic!("{at}: {name}= copies from no answer"));
        let (Some(pattern), Some(json)) = (&last.pattern, &last.json) else {
            panic!("{at}: {name}={placeholder} copies from an answer the guide does not show");
        };
        let value = guide::bound_value(pattern, json, &placeholder)
            .unwrap_or_else(|e| panic!("{at}: {name}={placeholder}: {e}"));
        let value = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        self.shell.set(name, &value).await;
    }

    /// `wscat -c URL`: the socket opens.
    async fn open_socket(&mut self, at: &str, text: &str) {
        let url_arg = text
            .split_whitespace()
            .skip_while(|w| *w != "-c")
            .nth(1)
            .unwrap_or_else(|| panic!("{at}: wscat without -c URL"));
        let url = self
            .shell
            .run(&format!("printf '%s' {url_arg}"), STEP_LIMIT)
            .await
            .stdout;
        // The sockets are on the platform's own port (a guide naming another sends its
        // reader nowhere).
        let sockets = self.platform.base.replace("http://", "ws://");
        assert!(
            url.starts_with(&format!("{sockets}/ws/")),
            "{at}: {url} is not where the platform serves sockets ({sockets}/ws/...)"
        );
        let (mut socket, response) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .unwrap_or_else(|e| panic!("{at}: the socket did not open: {e}"));
        assert_eq!(response.status(), 101, "{at}");
        let first = platform_tests::ws::next_text_frame(&mut socket, Duration::from_secs(10)).await;
        println!("{at}: the socket opened; its first frame: {first}");
        self.last = None;
    }

    async fn run_block(&mut self, block: &Block) {
        for step in guide::steps(block) {
            match step {
                Step::Command { line, text } => {
                    self.command(&format!("{}:{line}", block.path), &text).await
                }
                Step::Expect { line, text } => {
                    self.expect(&format!("{}:{line}", block.path), &text).await
                }
                Step::Bind {
                    line,
                    name,
                    placeholder,
                } => {
                    self.bind(&format!("{}:{line}", block.path), &name, &placeholder)
                        .await
                }
            }
        }
        self.settle();
        self.last = None;
    }

    async fn run_python(&mut self, block: &Block) {
        let code = block.text();
        if code.contains("standardwebhooks") || code.contains("def verify") {
            return self.verify_a_delivery(block, &code).await;
        }
        if code.contains("import jwt") {
            return self.check_a_service_token(block, &code).await;
        }
        panic!(
            "{}: a Python example the guide suite does not know how to run",
            block.at()
        );
    }

    /// Runs a webhook verifier on the delivery the receiver got, and on a forged copy.
    async fn verify_a_delivery(&mut self, block: &Block, code: &str) {
        let mut delivered = self.receiver.received();
        for _ in 0..10 {
            if !delivered.is_empty() {
                break;
            }
            self.platform.run_job("deliver-webhooks").await;
            delivered = self.receiver.wait_for(1, Duration::from_secs(2)).await;
        }
        let delivery = delivered
            .first()
            .unwrap_or_else(|| panic!("{}: no webhook was delivered", block.at()));
        let headers: serde_json::Map<String, Value> = delivery
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let secret = self.shell.get("WEBHOOK_SECRET").await;
        assert!(
            secret.starts_with("whsec_"),
            "{}: WEBHOOK_SECRET",
            block.at()
        );
        let input = serde_json::json!({
            "secret": secret,
            "headers": headers,
            "body": String::from_utf8_lossy(&delivery.body),
        });
        let check = if code.contains("def verify") {
            "assert verify(secret, headers, body), 'the delivery did not verify'\n\
             assert not verify(secret, headers, body + b' '), 'a forged body verified'\n"
        } else {
            "assert event['type'] and event['id'], event\n\
             try:\n    Webhook(secret).verify(body + b' ', headers)\n    raise SystemExit('a forged body verified')\n\
             except SystemExit:\n    raise\nexcept Exception:\n    pass\n"
        };
        let program = format!(
            "import json, sys\n\
             given = json.load(open(sys.argv[1]))\n\
             secret = given['secret']\n\
             headers = request_headers = given['headers']\n\
             body = request_body_bytes = given['body'].encode()\n\
             {code}\n{check}"
        );
        self.python(block, &program, &input).await;
        println!(
            "{}: the Python verifier accepted the delivery and refused a forged one",
            block.at()
        );
    }
}

impl Reader {
    /// Runs the music platform's check of a service token on the one the stand-in got
    /// with the authenticate call, and on a token signed with another secret.
    async fn check_a_service_token(&mut self, block: &Block, code: &str) {
        let log = std::fs::read_to_string(&self.music.log).expect("the stand-in's log");
        let bearer = log
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|request| request["path"] == "/auth/platform")
            .and_then(|request| {
                let headers = request["headers"].as_object()?;
                let (_, value) = headers
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))?;
                Some(value.as_str()?.strip_prefix("Bearer ")?.to_string())
            })
            .unwrap_or_else(|| panic!("{}: the music platform got no service token", block.at()));
        let ada = self.shell.get("ADA").await;
        let input =
            serde_json::json!({"bearer": bearer, "secret": MUSIC_SERVICE_SECRET, "ada": ada});
        let check = "assert user_id == given['ada'], (user_id, given['ada'])\n\
                     assert tenant_id, claims\n\
                     try:\n    jwt.decode(bearer, 'another secret' * 4, algorithms=['HS256'], audience='music-platform')\n    \
                     raise SystemExit('a token signed with another secret was accepted')\n\
                     except jwt.InvalidSignatureError:\n    pass\n";
        let program = format!(
            "import json, sys\n\
             given = json.load(open(sys.argv[1]))\n\
             bearer, MUSIC_SERVICE_SECRET = given['bearer'], given['secret']\n\
             {code}\n{check}"
        );
        self.python(block, &program, &input).await;
        println!(
            "{}: PyJWT accepted the service token the platform sent, naming ada",
            block.at()
        );
    }

    /// Runs a Python example (with the suites' Python tools) on `input`.
    async fn python(&self, block: &Block, program: &str, input: &Value) {
        let input_path = self.dir.path().join("~python-input.json");
        std::fs::write(&input_path, input.to_string()).expect("write the example's input");
        let python = workspace_root().join("target/webhook-verifier/bin/python");
        let output = tokio::process::Command::new(&python)
            .arg("-c")
            .arg(program)
            .arg(&input_path)
            .output()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {} ({e}; scripts/test installs it)",
                    block.at(),
                    python.display()
                )
            });
        assert!(
            output.status.success(),
            "{}: {}{}",
            block.at(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The music platform's stand-in (`scripts/music-stand-in`), as a reader runs it.
struct MusicStandIn {
    url: String,
    log: std::path::PathBuf,
    _process: tokio::process::Child,
}

/// The secret the platform and the stand-in share (`music_service_secret`).
const MUSIC_SERVICE_SECRET: &str = "the guides' music service secret, shared with the stand-in";

impl MusicStandIn {
    async fn start(dir: &Path) -> MusicStandIn {
        let listen = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port");
        let log = dir.join("~music-requests.jsonl");
        let process = tokio::process::Command::new(workspace_root().join("scripts/music-stand-in"))
            .args(["--quiet", "--listen", &listen.to_string(), "--log"])
            .arg(&log)
            .env("MUSIC_SERVICE_SECRET", MUSIC_SERVICE_SECRET)
            .kill_on_drop(true)
            .spawn()
            .expect("scripts/music-stand-in starts");
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(listen).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        MusicStandIn {
            url: format!("http://{listen}"),
            log,
            _process: process,
        }
    }
}

/// The `$NAME` variables in `text`.
fn shell_variables(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        let name: String = rest[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        rest = &rest[at + 1..];
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    // Longest first, so that `$BOB_ID` is replaced before `$B`.
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn the_guides_run_as_written() {
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().expect("a working directory");
    let music = MusicStandIn::start(dir.path()).await;
    // As the guides run it locally: with the local LiveKit's keys (docs/broadcasts.md),
    // webhooks to a receiver on this machine (docs/webhooks.md), and the music platform's
    // stand-in (docs/music.md).
    let platform = Platform::start_as_documented(&[
        ("sfu_api_key", "devkey"),
        ("sfu_api_secret", "secret"),
        ("webhook_allow_http", "true"),
        ("music_url", &music.url),
        ("music_service_secret", MUSIC_SERVICE_SECRET),
    ])
    .await;
    reader_files(dir.path());
    let mut shell = Shell::start(dir.path()).await;
    // What a deployer sets: the jobs token (the deploy and data guides call jobs).
    let jobs_token = platform.variable("jobs_token").expect("jobs_token");
    shell.set("JOBS_TOKEN", &jobs_token).await;
    let variable = |name: &str| platform.variable(name).expect(name);
    let addresses = vec![
        ("http://127.0.0.1:3000".to_string(), platform.base.clone()),
        (
            "https://live.example.com".to_string(),
            platform.base.clone(),
        ),
        (
            "ws://127.0.0.1:3000".to_string(),
            platform.base.replace("http://", "ws://"),
        ),
        (
            "rtmp://127.0.0.1:1935/live".to_string(),
            variable("rtmp_ingest_base"),
        ),
        (
            "http://127.0.0.1:8080/hls".to_string(),
            variable("playback_hls_base"),
        ),
        ("http://127.0.0.1:8090".to_string(), music.url.clone()),
        ("https://backend.acme.example".to_string(), receiver.url("")),
    ];
    let mut reader = Reader {
        shell,
        kept: Kept::new(),
        addresses,
        last: None,
        platform,
        receiver,
        music,
        dir,
    };
    let documents = documents();
    for path in STORY {
        let (_, text) = documents
            .iter()
            .find(|(p, _)| p == path)
            .unwrap_or_else(|| panic!("{path} is in the story but not in the repository"));
        // A guide's `<name>`s are its own (`<streamId>` is another broadcast's in the next).
        reader.kept.clear();
        for block in guide::blocks(path, text).iter().filter(|b| is_example(b)) {
            println!("== {}", block.at());
            if block.lang == "python" {
                reader.run_python(block).await;
            } else {
                reader.run_block(block).await;
            }
        }
    }
}

// --- What the guides say beside their examples -------------------------------------------

/// Every guide a reader meets: the README, `docs/*.md` and the deployment guides.
fn every_guide() -> Vec<(String, String)> {
    let root = workspace_root();
    let mut guides = documents();
    for dir in ["deploy/fermyon-wasm-functions", "deploy/kubernetes"] {
        let path = format!("{dir}/README.md");
        let text = std::fs::read_to_string(root.join(&path)).expect("a deployment guide");
        guides.push((path, text));
    }
    guides
}

/// `spin.toml`'s variables and their defaults.
fn manifest_variables() -> std::collections::BTreeMap<String, Option<String>> {
    let text = std::fs::read_to_string(workspace_root().join("spin.toml")).expect("spin.toml");
    let doc: toml::Table = text.parse().expect("spin.toml is TOML");
    doc["variables"]
        .as_table()
        .expect("[variables]")
        .iter()
        .map(|(name, v)| {
            let default = v.get("default").and_then(|d| d.as_str()).map(String::from);
            (name.clone(), default)
        })
        .collect()
}

/// `scheme://host:port` of each loopback address in `line` (127.0.0.1, localhost, [::1]).
fn loopback_origins(line: &str) -> Vec<String> {
    let mut origins = Vec::new();
    for host in ["127.0.0.1:", "localhost:", "[::1]:"] {
        let mut rest = line;
        while let Some(at) = rest.find(&format!("://{host}")) {
            let scheme: String = rest[..at]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '+')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let after = &rest[at + 3 + host.len()..];
            let port: String = after.chars().take_while(char::is_ascii_digit).collect();
            // `http://127.0.0.1:PORT` stands for any port.
            if !port.is_empty() {
                origins.push(format!("{scheme}://{host}{port}"));
            }
            rest = after;
        }
    }
    origins
}

/// The addresses the guides may name on the reader's machine are the ones the platform
/// serves locally: what `spin.toml` defaults its addresses to (the app and its sockets on
/// edgehost's port, the media server, the relay's internal endpoint, the music
/// stand-in, a local LiveKit) and Redis's own port. A guide naming another (a socket on
/// the standalone relay's port, say) sends its reader where nothing answers.
#[test]
fn the_local_addresses_in_the_guides_are_where_the_platform_serves() {
    let variables = manifest_variables();
    let mut served: Vec<String> = variables
        .values()
        .flatten()
        .flat_map(|default| loopback_origins(default))
        .collect();
    // edgehost serves the chat sockets on the app's own port.
    let app = variables["base_url"]
        .clone()
        .expect("base_url has a default");
    let app_origin = loopback_origins(&app).pop().expect("base_url is local");
    assert_eq!(
        app_origin,
        format!("http://{}", edgehost::Options::default().listen),
        "base_url's default is where edgehost listens by default"
    );
    served.push(app_origin.replace("http://", "ws://"));
    served.push("redis://127.0.0.1:6379".into());
    let mut problems = Vec::new();
    for (path, text) in every_guide() {
        for (index, line) in text.lines().enumerate() {
            for origin in loopback_origins(line) {
                if !served.contains(&origin) {
                    problems.push(format!("{path}:{}: {origin}", index + 1));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "local addresses where the platform serves nothing (it serves {served:?}): {problems:#?}"
    );
}

/// The variables the guides name are `spin.toml`'s, and a switch a guide turns on is shown
/// as a reader sets it, in the environment of `edgehost up` or `spin up`:
/// `SPIN_VARIABLE_<NAME>=true`, not `name=true` (which no shell, manifest or runtime
/// config of theirs would take as it is written).
#[test]
fn the_guides_name_real_variables_and_set_switches_as_the_environment_does() {
    let variables = manifest_variables();
    let switches: Vec<&String> = variables
        .iter()
        .filter(|(_, default)| matches!(default.as_deref(), Some("false" | "true")))
        .map(|(name, _)| name)
        .collect();
    assert!(!switches.is_empty(), "spin.toml declares switches");
    let mut problems = Vec::new();
    for (path, text) in every_guide() {
        let mut fence: Option<String> = None;
        for (index, line) in text.lines().enumerate() {
            let at = format!("{path}:{}", index + 1);
            if let Some(lang) = line.trim_start().strip_prefix("```") {
                fence = match fence {
                    Some(_) => None,
                    None => Some(lang.trim().to_string()),
                };
                continue;
            }
            let mut rest = line;
            while let Some(found) = rest.find("SPIN_VARIABLE_") {
                let name: String = rest[found + 14..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !name.is_empty() && !variables.contains_key(&name.to_ascii_lowercase()) {
                    problems.push(format!(
                        "{at}: SPIN_VARIABLE_{name}: spin.toml has no {}",
                        name.to_ascii_lowercase()
                    ));
                }
                rest = &rest[found + 14..];
            }
            // Configuration files (a runtime config's `[variables]`, a manifest) set
            // variables their own way.
            if fence
                .as_deref()
                .is_some_and(|lang| !matches!(lang, "sh" | "bash" | "shell" | ""))
            {
                continue;
            }
            for name in &switches {
                let given = [
                    format!("`{name}=true`"),
                    format!("`{name} = \"true\"`"),
                    format!("`{name} = true`"),
                    format!("`{name}` is true"),
                    format!("`{name}` is `true`"),
                    format!("`{name}` set to"),
                ];
                let bare = fence.is_some()
                    && line
                        .split_whitespace()
                        .any(|w| w.starts_with(&format!("{name}=")));
                if bare || given.iter().any(|g| line.contains(g.as_str())) {
                    problems.push(format!(
                        "{at}: `{name}` is given a value; show it as it is set: \
                         SPIN_VARIABLE_{}=true",
                        name.to_ascii_uppercase()
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The command that publishes a test pattern is the media guide's wherever a guide shows
/// it: its encoder settings are what keeps it at real time (`-tune zerolatency`: without
/// it x264 buffers frames and fell behind, 0.85x, on a busy machine).
#[test]
fn every_guide_publishes_with_the_media_guides_encoder_settings() {
    let publish_commands = |path: &str, text: &str| -> Vec<(String, String)> {
        guide::blocks(path, text)
            .into_iter()
            .flat_map(|block| {
                let at = block.at();
                let joined = block.text().replace("\\\n", " ");
                joined
                    .lines()
                    .filter(|l| l.trim_start().starts_with("ffmpeg ") && l.contains("-f flv"))
                    .map(|l| {
                        (
                            at.clone(),
                            l.split_whitespace().collect::<Vec<_>>().join(" "),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let guides = every_guide();
    let (_, media) = guides
        .iter()
        .find(|(p, _)| p == "docs/media.md")
        .expect("docs/media.md");
    let reference = publish_commands("docs/media.md", media);
    let (_, reference) = reference
        .first()
        .expect("the media guide publishes with ffmpeg");
    assert!(reference.contains("-tune zerolatency"), "{reference}");
    let mut problems = Vec::new();
    for (path, text) in &guides {
        for (at, command) in publish_commands(path, text) {
            if &command != reference {
                problems.push(format!("{at}: {command}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "publish as docs/media.md does ({reference}): {problems:#?}"
    );
}

/// A path of the route table with its parameters filled in (ids that name nothing).
fn route_example(pattern: &str) -> String {
    pattern
        .split('/')
        .map(|segment| match segment {
            "{*path}" => "x".to_string(),
            "{file}" => "nothing.css".to_string(),
            s if s.starts_with('{') => "0190a8b0-0000-7000-8000-000000000001".to_string(),
            s => s.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The README's route table against what each route answers a caller without credentials:
/// a route of any tier but `public` refuses them (401) whatever the request holds; a
/// public route does not, and one without parameters serves (no 404), unless its row says
/// which variable it needs, which is then checked both ways.
#[tokio::test(flavor = "multi_thread")]
async fn the_route_table_says_what_each_route_answers_without_credentials() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README");
    let rows = edge::routing::documented_routes(&readme);
    assert!(rows.len() > 100, "the route table is read");
    // The notes a row carries in its summary: `... (only with `SPIN_VARIABLE_X=true`, ...)`.
    let note_of = |path: &str| -> Option<String> {
        let line = readme
            .lines()
            .find(|l| l.contains(&format!("| `{path}` |")))?;
        let note = line.split_once(" (")?.1;
        let name = note.split("SPIN_VARIABLE_").nth(1)?;
        let name: String = name
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        Some(name.to_ascii_lowercase())
    };
    let variables = manifest_variables();
    // Registration closed, as deployed (local mode opens the admin route to everyone),
    // and the SFU configured (its webhook routes answer 503 without it).
    let platform = Platform::start_with(&[
        ("registration_mode", "admin"),
        ("sfu_api_key", "devkey"),
        ("sfu_api_secret", "secret"),
    ])
    .await;
    let mut problems = Vec::new();
    let mut needs: Vec<(String, String, String)> = Vec::new();
    for row in &rows {
        let method = if row.method == "ANY" {
            "GET"
        } else {
            row.method.as_str()
        };
        let path = route_example(&row.path);
        let response = platform
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                &path,
            )
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("an answer");
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        let what = format!("{method} {} ({}): {status} {body:.120}", row.path, row.tier);
        if row.tier != "public" {
            if status != 401 {
                problems.push(format!("{what}: not refused for want of credentials"));
            }
            continue;
        }
        // (A public health check may answer 503: what it checks is down.)
        if matches!(status, 401 | 403 | 500) {
            problems.push(format!("{what}: a public route refused or failed"));
        } else if let Some(variable) = note_of(&row.path) {
            assert!(
                variables.contains_key(&variable),
                "{what}: no variable {variable}"
            );
            if status != 404 {
                problems.push(format!("{what}: answers without {variable}"));
            }
            needs.push((variable, method.to_string(), path));
        } else if status == 404 && !row.path.contains('{') {
            problems.push(format!(
                "{what}: a public route without parameters is not there"
            ));
        }
    }
    platform.stop().await;
    for (variable, method, path) in needs {
        let platform = Platform::start_with(&[(&variable, "true")]).await;
        let status = platform
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                &path,
            )
            .send()
            .await
            .expect("an answer")
            .status();
        if !status.is_success() {
            problems.push(format!("{method} {path} with {variable}=true: {status}"));
        }
        platform.stop().await;
    }
    assert!(
        problems.is_empty(),
        "the README's route table: {problems:#?}"
    );
}

/// A service token for the music platform, as the music component signs it (HS256 with
/// `music_service_secret`, audience `music-platform`).
fn music_service_token(secret: &str, email: &str) -> String {
    use base64::Engine as _;
    use hmac::Mac as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 300;
    let head = b64(br#"{"alg":"HS256","typ":"JWT"}"#);
    let body = b64(
        serde_json::json!({"aud": "music-platform", "exp": exp, "email": email, "sub": "u-1", "tid": "c-1"})
            .to_string()
            .as_bytes(),
    );
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{head}.{body}").as_bytes());
    format!("{head}.{body}.{}", b64(&mac.finalize().into_bytes()))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_music_stand_in_reads_the_secrets_of_the_state_dir_it_is_given() {
    // edgehost up --state-dir <dir> generated the secrets there; the stand-in is started
    // from elsewhere, without MUSIC_SERVICE_SECRET.
    let state = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let secret = "a secret edgehost generated";
    std::fs::write(
        state.path().join("generated-variables.toml"),
        format!("media_secret = \"other\"\nmusic_service_secret = \"{secret}\"\n"),
    )
    .unwrap();
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let mut process = tokio::process::Command::new(workspace_root().join("scripts/music-stand-in"))
        .args(["--quiet", "--listen", &listen.to_string(), "--state-dir"])
        .arg(state.path())
        .current_dir(elsewhere.path())
        .env_remove("MUSIC_SERVICE_SECRET")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("scripts/music-stand-in starts");
    let mut up = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(listen).await.is_ok() {
            up = true;
            break;
        }
        if let Some(status) = process.try_wait().unwrap() {
            let output = process.wait_with_output().await.unwrap();
            panic!(
                "the stand-in exited ({status}): {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "the stand-in listens");
    let authenticate = |token: String| {
        reqwest::Client::new()
            .post(format!("http://{listen}/auth/platform"))
            .bearer_auth(token)
            .send()
    };
    let answer = authenticate(music_service_token(secret, "ada@example.com"))
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        200,
        "a token signed with the state dir's secret"
    );
    let answer = authenticate(music_service_token("another secret", "ada@example.com"))
        .await
        .unwrap();
    assert_eq!(answer.status(), 401, "a token signed with another secret");
}
