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
            println!("{at}: ffmpeg published for {PUBLISH_FOR} s");
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
            "ws://127.0.0.1:3001".to_string(),
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
