//! The API contract, fuzzed: schemathesis (PyPI; `scripts/test` installs it into
//! `target/schemathesis`) reads `GET /api/openapi.json` from the real application in
//! edgehost and runs every operation with positive and negative data, stateful sequences
//! through the document's links, and its authorization checks (`ignored_auth`, and
//! `object_level_authorization` between two users of one tenant). Fixtures: a registered
//! client, two signed-in users, a live broadcast; the signed server tier through a hook
//! that signs each request (`tests/schemathesis/platform_hooks.py`).
//!
//! The bar: no 5xx, every response conforms to the document, bad input answers 4xx, no
//! operation ignores its credentials. The seed and example count are printed so that a
//! failure replays: `CONTRACT_SEED=<seed> cargo test -p platform-tests --test platform api_contract::`.

use crate::support::browser;

use browser::Browser;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use platform_tests::{Exchange, Method, Platform, env_or, workspace_root};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::process::Command;
use std::time::Duration;

/// Every check of schemathesis runs but this one: a schema-valid body can still break a
/// rule no schema states (a time in the past, a user who does not exist), so a refusal of
/// generated "positive" data is not a contract violation. The bar: no 5xx; status, content
/// type, headers and body as documented; bad input refused; credentials enforced; one
/// user's objects not served to another; the method checks.
const NOT_CHECKED: &str = "positive_data_acceptance";
/// Stateful scenarios per `--max-examples`, and the most calls one scenario makes.
const STATEFUL_EXAMPLES_PER_EXAMPLE: u32 = 10;
const STATEFUL_MAX_STEPS: u32 = 10;

/// Reads of what the tenant's users share by design: a public broadcast (and its session,
/// co-host grid and chat), a public playlist, a public scheduled event, a creator's
/// subscription plans and supporters are every signed-in user's to see (a private one is
/// refused: the attacks suite holds that).
const SHARED_BY_DESIGN: [&str; 9] = [
    "GET /api/broadcasts/{id}",
    "GET /api/broadcasts/{id}/chat",
    "GET /api/streams/{id}/chat",
    "GET /api/playlists/{id}",
    "GET /api/streaming/sessions/{id}",
    "GET /api/streaming/sessions/{id}/multihost",
    "GET /api/events/{id}",
    "GET /api/users/{id}/subscription-plans",
    "GET /api/users/{id}/supporters",
];

const SFU_KEY: &str = "contract-sfu-key";
const SFU_SECRET: &str = "contract-sfu-secret-0123456789abcdef";

fn schemathesis() -> std::path::PathBuf {
    let st = workspace_root().join("target/schemathesis/bin/st");
    assert!(
        st.exists(),
        "schemathesis is missing: scripts/test installs it into target/schemathesis"
    );
    st
}

/// The external parties on loopback: the music platform (its token, refresh, search and
/// account routes; anything else is echoed, as the proxy forwards it) and the SFU's API
/// (answers every call; Egress starts and stops as LiveKit answers them).
async fn external_parties() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the fake external parties");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service_fn(answer))
                    .await;
            });
        }
    });
    url
}

async fn answer(req: hyper::Request<Incoming>) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let _ = body.collect().await;
    let segments: Vec<&str> = parts
        .uri
        .path()
        .trim_start_matches('/')
        .split('/')
        .collect();
    let account =
        json!({"id": "m-1", "email": "fan@music.example", "nickname": "fan", "activated": true});
    let body = match (parts.method.as_str(), segments.as_slice()) {
        ("POST", ["auth", "platform"]) => json!({"token": "mtok-1", "user": account}),
        ("POST", ["auth", "refresh"]) => json!({"token": "mtok-2"}),
        ("GET", ["users", "search"]) => json!([account]),
        // The account asked for (the platform answers the id it was asked).
        ("GET", ["users", id]) => {
            let id = percent_encoding::percent_decode_str(id).decode_utf8_lossy();
            json!({"id": id, "email": "fan@music.example", "nickname": "fan", "activated": true})
        }
        ("POST", ["gettoken", ..]) => json!({"token": "mtok-3"}),
        // LiveKit Egress (Twirp): each start is a new egress, starting.
        ("POST", ["twirp", "livekit.Egress", "StartRoomCompositeEgress"]) => {
            static EGRESSES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = EGRESSES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            json!({"egress_id": format!("EG_contract_{n}"), "status": "EGRESS_STARTING"})
        }
        ("POST", ["twirp", "livekit.Egress", "StopEgress"]) => {
            json!({"egress_id": "EG_contract", "status": "EGRESS_ENDING"})
        }
        _ => json!({"echo": parts.method.as_str(), "path": parts.uri.path()}),
    };
    Ok(hyper::Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a response"))
}

/// Registers an SDK client with the admin token (registration is the operator's here).
async fn register(platform: &Platform, admin: &str, name: &str) -> platform_tests::Tenant {
    let (status, registered) = platform
        .request(Method::POST, "/api/admin/sdk-clients")
        .bearer_auth(admin)
        .send_json(&json!({
            "name": name,
            "contactEmail": "dev@example.com",
            "agreeTerms": true,
            "agreeDataProcessing": true,
        }))
        .await;
    assert_eq!(status, 200, "{registered}");
    platform_tests::Tenant {
        api_key: registered["apiKey"].as_str().expect("apiKey").to_string(),
        secret_key: registered["secretKey"]
            .as_str()
            .expect("secretKey")
            .to_string(),
        client_id: registered["clientId"]
            .as_str()
            .expect("clientId")
            .to_string(),
    }
}

fn header(name: &str, value: &str) -> Value {
    json!({"name": name, "value": value})
}

#[tokio::test(flavor = "multi_thread")]
async fn the_application_holds_to_its_openapi_document_under_fuzzing() {
    let st = schemathesis();
    let parties = external_parties().await;
    let platform = Platform::start_with(&[
        ("sfu_api_key", SFU_KEY),
        ("sfu_api_secret", SFU_SECRET),
        ("sfu_api_url", &parties),
        ("music_url", &parties),
        ("registration_mode", "admin"),
    ])
    .await;
    let admin = platform.variable("admin_token").expect("admin_token");
    let jobs = platform.variable("jobs_token").expect("jobs_token");
    let media = platform.variable("media_secret").expect("media_secret");
    let tenant = register(&platform, &admin, "Contract").await;
    let other = register(&platform, &admin, "Other").await;
    let alice = platform.signup(&tenant, "alice").await;
    let bob = platform.signup(&tenant, "bob").await;
    let (status, broadcast) = platform
        .as_user(&alice, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Fixture", "visibility": "public"}))
        .await;
    assert_eq!(status, 200, "{broadcast}");
    let broadcast_id = broadcast["id"].as_str().expect("broadcast id").to_string();
    let status = platform
        .as_user(
            &alice,
            Method::POST,
            &format!("/api/broadcasts/{broadcast_id}/status"),
        )
        .json(&json!({"status": "active"}))
        .status()
        .await;
    assert_eq!(status, 200, "the fixture broadcast goes live");

    let work = tempfile::tempdir().expect("a work directory");
    let bearer = |t: &str| format!("Bearer {t}");
    // The peers of the object-level check; the hook exchanges a user's credential for the
    // server's, the admin's, the scheduler's, the SFU's or the media server's on those
    // tiers' operations.
    let wfc = json!({
        "schemaVersion": "0.2.0",
        "auth": [
            {"name": "alice", "fixedHeaders": [header("X-API-Key", &tenant.api_key), header("Authorization", &bearer(&alice.token))]},
            {"name": "bob", "fixedHeaders": [header("X-API-Key", &tenant.api_key), header("Authorization", &bearer(&bob.token))]}
        ]
    });
    let wfc_path = work.path().join("auth.json");
    std::fs::write(&wfc_path, wfc.to_string()).expect("write the WFC auth file");
    let seed: u64 = env_or(
        "CONTRACT_SEED",
        u64::from(std::process::id()) * 7919 % 1_000_000,
    );
    let examples: u32 = env_or("CONTRACT_EXAMPLES", 15);
    // The stateful phase draws its scenarios from the document's links (and those it
    // infers); a scenario is one example, so it gets more of them than one operation does.
    let scenarios: u32 = env_or(
        "CONTRACT_SCENARIOS",
        examples * STATEFUL_EXAMPLES_PER_EXAMPLE,
    );
    let mut config = format!(
        "[auth.wfc]\npath = {path:?}\npeers = [\"alice\", \"bob\"]\n\n[checks]\n{NOT_CHECKED}.enabled = false\n\n[phases.stateful]\nmax-steps = {STATEFUL_MAX_STEPS}\ngeneration.max-examples = {scenarios}\n",
        path = wfc_path.display().to_string()
    );
    // A file is private unless made public: its public address is a 404 right after an
    // upload, which schemathesis's inferred link from `POST /api/files` cannot know.
    config.push_str(
        "\n[[operations]]\ninclude-name = \"GET /api/files/{id}/public\"\nchecks.ensure_resource_availability.enabled = false\n",
    );
    // A CORS preflight answers for the route, whatever the id: 204 for a deleted file too
    // (it reveals nothing; the GET that follows is the 404).
    config.push_str(
        "\n[[operations]]\ninclude-name = \"OPTIONS /api/files/{id}/public\"\nchecks.use_after_free.enabled = false\nchecks.ensure_resource_availability.enabled = false\n",
    );
    // A broadcast that is not public is not found by anyone who may not watch it: when the
    // stateful phase follows a create with the other peer's credentials, a 404 on the
    // broadcast's routes is the rule, not a resource gone missing.
    config.push_str(
        "\n[[operations]]\ninclude-path-regex = \"^/api/broadcasts/\\\\{id\\\\}\"\nchecks.ensure_resource_availability.enabled = false\n",
    );
    for name in SHARED_BY_DESIGN {
        config.push_str(&format!(
            "\n[[operations]]\ninclude-name = {name:?}\nchecks.object_level_authorization.enabled = false\n"
        ));
    }
    let config_path = work.path().join("schemathesis.toml");
    std::fs::write(&config_path, config).expect("write the schemathesis config");
    println!(
        "schemathesis: seed {seed}, {examples} examples per operation, {scenarios} stateful scenarios"
    );
    // `CONTRACT_HAR=<file>` keeps every exchange (to see which operations answered 2xx).
    let har: Vec<String> = match std::env::var("CONTRACT_HAR") {
        Ok(path) if !path.is_empty() => {
            vec![
                "--report".into(),
                "har".into(),
                "--report-har-path".into(),
                path,
            ]
        }
        _ => Vec::new(),
    };
    let output = tokio::task::block_in_place(|| {
        Command::new(&st)
            .arg("--config-file")
            .arg(&config_path)
            .arg("run")
            .arg(platform.url("/api/openapi.json"))
            .args(["--url", &platform.base])
            .args(["--seed", &seed.to_string()])
            .args(["--max-examples", &examples.to_string()])
            // One worker: hypothesis's example cache is not thread-safe (a rare internal
            // KeyError under two workers).
            .args(["--workers", "1"])
            .args(["--no-color", "--output-truncate", "false"])
            .args(["--generation-database", "none"])
            .arg("--report-dir")
            .arg(work.path().join("report"))
            .args(&har)
            .env("PYTHONPATH", workspace_root().join("tests/schemathesis"))
            .env("SCHEMATHESIS_HOOKS", "platform_hooks")
            .env("PLATFORM_BASE", &platform.base)
            .env("PLATFORM_API_KEY", &tenant.api_key)
            .env("PLATFORM_SECRET_KEY", &tenant.secret_key)
            .env("PLATFORM_OTHER_API_KEY", &other.api_key)
            .env("PLATFORM_OTHER_SECRET_KEY", &other.secret_key)
            .env("PLATFORM_ALICE_TOKEN", &alice.token)
            .env("PLATFORM_BOB_TOKEN", &bob.token)
            .env("PLATFORM_ADMIN_TOKEN", &admin)
            .env("PLATFORM_JOBS_TOKEN", &jobs)
            .env("PLATFORM_MEDIA_SECRET", &media)
            .env("PLATFORM_SFU_KEY", SFU_KEY)
            .env("PLATFORM_SFU_SECRET", SFU_SECRET)
            .env("PLATFORM_BROADCAST_ID", &broadcast_id)
            .current_dir(work.path())
            .output()
            .expect("schemathesis runs")
    });
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "schemathesis found failures (seed {seed}, {examples} examples): see above"
    );
}

/// The reference page in headless Chromium: the vendored viewer loads the document from
/// this origin, lists every path of it, "try it" on `GET /api/openapi.json` gets the
/// document from the same origin, and nothing logs an error or breaks the page's CSP.
#[tokio::test(flavor = "multi_thread")]
async fn the_reference_page_lists_every_route_and_tries_one() {
    let platform = Platform::start().await;
    let (status, doc) = platform
        .request(Method::GET, "/api/openapi.json")
        .answer()
        .await;
    assert_eq!(status, 200);
    let paths: Vec<String> = doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .cloned()
        .collect();
    let mut browser = Browser::launch(&[]).await;
    let tab = browser.open(&platform.url("/docs"), 1280, 900).await;
    let rendered = format!(
        "(function() {{
            var doc = document.getElementById('reference');
            var root = doc && doc.shadowRoot;
            if (!root) return null;
            var text = root.textContent;
            var paths = {paths};
            var missing = paths.filter(function(p) {{ return text.indexOf(p) < 0; }});
            return missing.length === 0 ? paths.length : null;
        }})()",
        paths = serde_json::to_string(&paths).expect("paths as JSON")
    );
    let listed = browser
        .wait_for(&tab, &rendered, Duration::from_secs(60))
        .await;
    assert_eq!(listed, json!(paths.len()), "every path is listed");
    // Try it: the operation's TRY button sends the request from the page (the viewer's
    // request panel renders in its own shadow roots, so the search goes through them).
    const FIND_OPERATION: &str = "function deep(node, out) {
            out.push(node);
            Array.from(node.querySelectorAll('*')).forEach(function(e) {
                out.push(e);
                if (e.shadowRoot) deep(e.shadowRoot, out);
            });
            return out;
        }
        var root = document.getElementById('reference').shadowRoot;
        var op = root.getElementById('get-/api/openapi.json');";
    let tried = browser
        .eval(
            &tab,
            &format!(
                "(function() {{ {FIND_OPERATION}
                if (!op) return 'no operation element';
                var button = deep(op, []).find(function(b) {{
                    return b.tagName === 'BUTTON' && b.textContent.trim().toUpperCase() === 'TRY';
                }});
                if (!button) return 'no TRY button';
                button.click();
                return 'clicked';
            }})()"
            ),
        )
        .await;
    assert_eq!(tried, json!("clicked"));
    browser
        .wait_for(
            &tab,
            &format!(
                "(function() {{ {FIND_OPERATION}
                var text = deep(op, []).map(function(e) {{
                    return e.nodeType === 1 ? (e.value || '') + ' ' + (e.shadowRoot ? '' : e.textContent) : '';
                }}).join(' ');
                return text.indexOf('3.1.0') >= 0 && text.indexOf('200') >= 0;
            }})()"
            ),
            Duration::from_secs(20),
        )
        .await;
    browser.assert_clean(&tab).await;
    browser.close().await;
}

/// The API reference (`/docs`, RapiDoc on `/api/openapi.json`): each operation in the
/// navigation under its declared summary, its method written out whole and not clipped.
#[tokio::test(flavor = "multi_thread")]
async fn the_api_reference_shows_whole_methods_and_declared_summaries() {
    let p = Platform::start().await;
    let (status, doc) = p.request(Method::GET, "/api/openapi.json").answer().await;
    assert_eq!(status, 200);
    let mut declared = Vec::new();
    for item in doc["paths"].as_object().expect("paths").values() {
        for (method, op) in item.as_object().expect("a path item") {
            if let Some(summary) = op["summary"].as_str() {
                declared.push(format!("{} {summary}", method.to_uppercase()));
            }
        }
    }
    declared.sort();

    let mut browser = Browser::launch(&[]).await;
    let tab = browser.open(&p.url("/docs"), 1280, 900).await;
    let count = declared.len();
    browser
        .wait_for(
            &tab,
            &format!(
                "(function(){{var r = document.querySelector('rapi-doc').shadowRoot;\
                  return r && r.querySelectorAll('.nav-bar-path').length >= {count};}})()"
            ),
            Duration::from_secs(20),
        )
        .await;
    let nav = browser
        .eval(
            &tab,
            "Array.from(document.querySelector('rapi-doc').shadowRoot.querySelectorAll('.nav-bar-path'))\
               .map(function (item) {\
                 var method = item.querySelector('.nav-method');\
                 var box = method.getBoundingClientRect(), row = item.getBoundingClientRect();\
                 var label = item.textContent.replace(method.textContent, '').replace(/\\s+/g, ' ').trim();\
                 return { method: method.textContent.trim(), label: label,\
                          clipped: method.scrollWidth > Math.ceil(box.width) || box.right > row.right + 0.5 };\
               })",
        )
        .await;
    let items = nav.as_array().expect("navigation items");
    let clipped: Vec<&Value> = items.iter().filter(|i| i["clipped"] == true).collect();
    assert!(clipped.is_empty(), "clipped method badges: {clipped:?}");
    let mut shown: Vec<String> = items
        .iter()
        .map(|i| {
            format!(
                "{} {}",
                i["method"].as_str().unwrap(),
                i["label"].as_str().unwrap()
            )
        })
        .collect();
    shown.sort();
    assert_eq!(
        shown, declared,
        "the navigation lists every operation by its summary"
    );
    // The pages are named for what they are, not after their routes.
    for page in [
        "GET API reference (this page)",
        "GET SFU test page (only with `SPIN_VARIABLE_ENABLE_DEV_PAGES=true`, else 404)",
    ] {
        assert!(shown.iter().any(|s| s == page), "{page} in {shown:?}");
    }
    browser
        .screenshot(
            &tab,
            &workspace_root().join("target/page-screenshots/api-reference.png"),
        )
        .await;
    browser.assert_clean(&tab).await;
    browser.close().await;
}
