//! A small driver for headless Chromium over the Chrome DevTools Protocol: launch with a
//! fresh profile, open a tab at a given viewport size, evaluate JavaScript, wait for a
//! condition, collect console output and CSP violations, take screenshots.
//!
//! The browser is Debian's `chromium` (`.ci/run` installs it); `CHROMIUM` names another
//! binary. A missing browser fails the test with a message saying so.

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Injected before any page script: records Content-Security-Policy violations.
const CSP_PROBE: &str = "window.__cspViolations = [];\
    document.addEventListener('securitypolicyviolation', function (e) {\
      window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI);\
    });";

pub struct Browser {
    child: tokio::process::Child,
    _profile: tempfile::TempDir,
    socket: Socket,
    next_id: u64,
    /// `(session, level, text)` of console calls and uncaught exceptions.
    pub console: Vec<(String, String, String)>,
}

/// One tab.
pub struct Tab {
    pub session: String,
}

fn chromium_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(path);
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "headless Chromium is required for the browser tests and was not found on PATH \
         (install it with `apt-get install -y chromium`, or set CHROMIUM to its path)"
    );
}

impl Browser {
    /// Starts Chromium with a fresh profile and connects to its DevTools endpoint.
    pub async fn launch(extra_flags: &[&str]) -> Browser {
        let profile = tempfile::tempdir().expect("profile directory");
        let mut command = tokio::process::Command::new(chromium_binary());
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--mute-audio",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra_flags)
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let child = command.spawn().expect("Chromium starts");
        let endpoint = devtools_endpoint(profile.path()).await;
        let (socket, _) = tokio_tungstenite::connect_async(endpoint.as_str())
            .await
            .expect("DevTools WebSocket connects");
        Browser {
            child,
            _profile: profile,
            socket,
            next_id: 0,
            console: Vec::new(),
        }
    }

    /// Sends one command and answers its result; events met meanwhile are recorded.
    pub async fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = session.into();
        }
        self.socket
            .send(Message::text(message.to_string()))
            .await
            .expect("DevTools command is sent");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = tokio::time::timeout(left, self.socket.next())
                .await
                .unwrap_or_else(|_| panic!("DevTools did not answer {method}"))
                .expect("DevTools connection open")
                .expect("DevTools frame");
            let Message::Text(text) = frame else {
                continue;
            };
            let value: Value = serde_json::from_str(&text).expect("DevTools JSON");
            if value["id"] == id {
                if let Some(error) = value.get("error") {
                    panic!("{method} failed: {error}");
                }
                return value["result"].clone();
            }
            self.record_event(&value);
        }
    }

    fn record_event(&mut self, event: &Value) {
        let session = event["sessionId"].as_str().unwrap_or("").to_string();
        let params = &event["params"];
        match event["method"].as_str() {
            Some("Runtime.consoleAPICalled") => {
                let text = params["args"]
                    .as_array()
                    .map(|args| {
                        args.iter()
                            .map(|a| match &a["value"] {
                                Value::String(s) => s.clone(),
                                Value::Null => a["description"].as_str().unwrap_or("").to_string(),
                                v => v.to_string(),
                            })
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                let level = params["type"].as_str().unwrap_or("log").to_string();
                self.console.push((session, level, text));
            }
            Some("Runtime.exceptionThrown") => {
                let details = &params["exceptionDetails"];
                let text = details["exception"]["description"]
                    .as_str()
                    .or(details["text"].as_str())
                    .unwrap_or("exception")
                    .to_string();
                self.console.push((session, "exception".into(), text));
            }
            _ => {}
        }
    }

    /// Opens a tab with a `width` x `height` viewport (device scale 1) at `url`.
    pub async fn open(&mut self, url: &str, width: u32, height: u32) -> Tab {
        let target = self
            .call(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attached = self
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        let tab = Tab {
            session: attached["sessionId"].as_str().expect("session").to_string(),
        };
        let s = Some(tab.session.as_str());
        self.call(s, "Runtime.enable", json!({})).await;
        self.call(s, "Page.enable", json!({})).await;
        self.call(
            s,
            "Page.addScriptToEvaluateOnNewDocument",
            json!({"source": CSP_PROBE}),
        )
        .await;
        self.resize(&tab, width, height).await;
        self.navigate(&tab, url).await;
        tab
    }

    pub async fn resize(&mut self, tab: &Tab, width: u32, height: u32) {
        self.call(
            Some(&tab.session),
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await;
    }

    /// Loads `url` and waits until the document has loaded.
    pub async fn navigate(&mut self, tab: &Tab, url: &str) {
        let answer = self
            .call(Some(&tab.session), "Page.navigate", json!({"url": url}))
            .await;
        assert!(
            answer.get("errorText").is_none(),
            "navigating to {url}: {answer}"
        );
        self.wait_for(
            tab,
            "document.readyState === 'complete'",
            Duration::from_secs(20),
        )
        .await;
    }

    /// Evaluates `expression` (promises awaited) and answers its value.
    pub async fn eval(&mut self, tab: &Tab, expression: &str) -> Value {
        let answer = self
            .call(
                Some(&tab.session),
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        if let Some(details) = answer.get("exceptionDetails") {
            panic!("evaluating `{expression}` threw: {details}");
        }
        answer["result"]["value"].clone()
    }

    /// Polls `expression` until it is truthy and answers its value; panics after `limit`.
    pub async fn wait_for(&mut self, tab: &Tab, expression: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let value = self.eval(tab, expression).await;
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!(0)
                && value != json!("");
            if truthy {
                return value;
            }
            if Instant::now() > deadline {
                panic!(
                    "waited {limit:?} for `{expression}`; console: {:?}",
                    self.console_of(tab)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A real mouse click at (`x`, `y`): a user gesture for the page.
    pub async fn click(&mut self, tab: &Tab, x: u32, y: u32) {
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                Some(&tab.session),
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            )
            .await;
        }
    }

    /// Writes a PNG of the tab's viewport to `path`.
    pub async fn screenshot(&mut self, tab: &Tab, path: &Path) {
        let shot = self
            .call(
                Some(&tab.session),
                "Page.captureScreenshot",
                json!({"format": "png"}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("screenshot base64");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("screenshot directory");
        }
        std::fs::write(path, png).expect("screenshot written");
    }

    /// Console lines and exceptions of `tab` so far, as `level: text`.
    pub fn console_of(&self, tab: &Tab) -> Vec<String> {
        self.console
            .iter()
            .filter(|(s, _, _)| *s == tab.session)
            .map(|(_, level, text)| format!("{level}: {text}"))
            .collect()
    }

    /// Fails when the tab threw, logged an error or violated its CSP.
    pub async fn assert_clean(&mut self, tab: &Tab) {
        let violations = self.eval(tab, "window.__cspViolations").await;
        assert_eq!(violations, json!([]), "CSP violations");
        let problems: Vec<String> = self
            .console_of(tab)
            .into_iter()
            .filter(|line| line.starts_with("error:") || line.starts_with("exception:"))
            .collect();
        assert!(problems.is_empty(), "errors in the page: {problems:?}");
    }

    pub async fn close(mut self) {
        let _ = self.socket.close(None).await;
        let _ = self.child.kill().await;
    }
}

/// Chromium writes its DevTools port and browser path to `DevToolsActivePort`.
async fn devtools_endpoint(profile: &Path) -> String {
    let file = profile.join("DevToolsActivePort");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(&file) {
            let mut lines = text.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                return format!("ws://127.0.0.1:{port}{path}");
            }
        }
        assert!(
            Instant::now() < deadline,
            "Chromium did not open its DevTools port within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
