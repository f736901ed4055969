//! edgehost against the real Spin, and the real Spin on its two back ends: the same
//! `spin.toml` served by three targets in one run, loaded one at a time by
//! `wrk -t2 -c32 -d5s --latency`:
//! - `edgehost`: edgehost on SQLite (in this process, on its multi-threaded runtime, as
//!   `edgehost up` runs it);
//! - `spin-sqlite`: `spin up` (`SPIN_BIN`, a child process) on SQLite in its state
//!   directory;
//! - `spin-postgres`: `spin up` on a throwaway PostgreSQL database, its key-value store on a
//!   throwaway Redis (a runtime config file, as a deployment writes one).
//!
//! Rows: `layout.js` with gzip first (the yardstick, below); a user's profile read
//! (`GET /api/users/profile/full` with the tenant's API key and the user's Bearer token);
//! broadcast creates (`POST /api/broadcasts`, the same credentials); an API-key read
//! (`GET /api/streaming/providers`: the key looked up, a small JSON answer); and two
//! embedded static assets, `layout.js` (6 KB) and the hls.js vendor file (389 KB), each to
//! a browser (`Accept-Encoding: gzip`) and to a client without it (the component
//! decompresses or keeps an uncompressed copy). Before anything is timed every row is
//! checked once on every target (status, body).
//!
//! Each round prints, per row and target, requests/s, p50, p99 and the row's rate over the
//! same target's `layout.js, gzip` rate in the same round (`/asset`): a host's store-bound
//! rows measured against its own cheapest request, so that rounds and machines under
//! different load compare. Within a row the targets run one after the other, their order
//! rotating from round to round (none always meets another's leftovers: a busy database,
//! a warm cache). After the rounds: each row's medians per target (req/s, p99, `/asset`),
//! then edgehost over spin-sqlite (the same `spin.toml` on SQLite on both hosts), and
//! edgehost's split of an asset request's time.
//!
//! Run: `SPIN_BIN=/work/spin-real/spin cargo bench -p platform-tests --bench hosts
//! --profile host` (needs `wrk`; the PostgreSQL target needs `postgresql` and
//! `redis-server`, as the suites do). Environment:
//! - `SPIN_BIN`: the `spin` binary (3.x or 4.x). Without it only edgehost runs (said on
//!   the first line); a `TARGETS` naming a Spin target without it stops the bench.
//! - `TARGETS=a,b`: the targets, from `edgehost,spin-sqlite,spin-postgres` (default all
//!   three, with `SPIN_BIN`).
//! - `ROUNDS=n`: rounds (default 3); other work on the machine moves single rows by a
//!   factor of two, the medians less.
//! - `ROWS=a,b`: only the rows whose names contain one of the words (`ROWS=profile`,
//!   `ROWS=create,read`), with the yardstick row whenever any row runs. `ROWS=asset` runs
//!   only the split of an asset request's time, which follows the tables when `ROWS` is
//!   unset.
//!
//! `wrk`, the hosts and their guests share the machine: compare the ratios of one run, not
//! absolute figures.

use platform_tests::backends::Backend;
use platform_tests::{Method, Platform, env_or};
use sha2::{Digest, Sha256};

/// A host and the back end it runs the application on.
struct Kind {
    name: &'static str,
    on_spin: bool,
    backend: Backend,
    /// The back end, for the first line.
    store: &'static str,
}

/// Every target, in the tables' order.
const KINDS: [Kind; 3] = [
    Kind {
        name: "edgehost",
        on_spin: false,
        backend: Backend::Sqlite,
        store: "SQLite",
    },
    Kind {
        name: "spin-sqlite",
        on_spin: true,
        backend: Backend::Sqlite,
        store: "SQLite",
    },
    Kind {
        name: "spin-postgres",
        on_spin: true,
        backend: Backend::Postgres,
        store: "PostgreSQL, key-value on Redis",
    },
];

/// What one target needs to be loaded: its address and the credentials and URLs of the
/// rows.
struct Target {
    kind: &'static Kind,
    platform: Platform,
    api_key: String,
    token: String,
    user_id: String,
    username: String,
    layout: String,
    hls: String,
    /// The POST of the create rows (a wrk Lua script).
    create_script: std::path::PathBuf,
}

impl Target {
    fn name(&self) -> &'static str {
        self.kind.name
    }

    /// wrk's options for the tenant's API key, then `path`'s URL.
    fn with_key(&self, path: &str) -> Vec<String> {
        vec![
            "-H".into(),
            format!("X-API-Key: {}", self.api_key),
            self.platform.url(path),
        ]
    }

    /// wrk's options for the tenant's API key and the user's token, then `path`'s URL.
    fn as_user(&self, path: &str) -> Vec<String> {
        let mut args = vec!["-H".into(), format!("Authorization: Bearer {}", self.token)];
        args.extend(self.with_key(path));
        args
    }

    /// wrk's options for a browser's gzip, then `path`'s URL.
    fn gzip(&self, path: &str) -> Vec<String> {
        vec![
            "-H".into(),
            "Accept-Encoding: gzip".into(),
            self.platform.url(path),
        ]
    }
}

/// One row of the table: its name and wrk's arguments for a target (options, then the
/// URL).
struct Row {
    name: &'static str,
    args: fn(&Target) -> Vec<String>,
}

/// The row every other is measured against, per target and round: the cheapest request
/// a host serves (an embedded asset, no store), so first in each round.
const YARDSTICK: &str = "layout.js, gzip";

const ROWS: [Row; 7] = [
    Row {
        name: YARDSTICK,
        args: |t| t.gzip(&t.layout),
    },
    Row {
        name: "user's profile read",
        args: |t| t.as_user("/api/users/profile/full"),
    },
    Row {
        name: "broadcast create (POST)",
        args: |t| {
            vec![
                "-s".into(),
                t.create_script.display().to_string(),
                t.platform.url("/api/broadcasts"),
            ]
        },
    },
    Row {
        name: "API-key read (providers)",
        args: |t| t.with_key("/api/streaming/providers"),
    },
    Row {
        name: "layout.js, identity",
        args: |t| vec![t.platform.url(&t.layout)],
    },
    Row {
        name: "hls.js 389 KB, gzip",
        args: |t| t.gzip(&t.hls),
    },
    Row {
        name: "hls.js 389 KB, identity",
        args: |t| vec![t.platform.url(&t.hls)],
    },
];

/// One `wrk` run's figures.
struct Figures {
    rate: f64,
    p50: String,
    p99: String,
    non_2xx: u64,
    errors: String,
    /// The 1-minute load average just after the run.
    load: String,
}

/// One row on one target in one round.
struct Sample {
    rate: f64,
    /// p99 in microseconds.
    p99: f64,
    /// The rate over the same target's yardstick rate in the same round.
    per_asset: f64,
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(run());
}

async fn run() {
    let rounds: usize = env_or("ROUNDS", 3);
    let only: String = env_or("ROWS", String::new());
    let rows = selected_rows(&only);
    let work = tempfile::tempdir().expect("a scratch directory");
    let hls_path = format!("vendor/{}", hashed("vendor/hls.light.min.js"));
    let mut targets = Vec::new();
    for kind in selected_kinds() {
        let platform = Platform::start_on_spin(kind.on_spin, kind.backend, &[]).await;
        targets.push(prepare(kind, platform, &hls_path, work.path()).await);
    }
    let on: Vec<String> = targets
        .iter()
        .map(|t| format!("{} {} ({})", t.name(), t.platform.base, t.kind.store))
        .collect();
    println!(
        "{}; the same spin.toml, wrk -t2 -c32 -d5s, the targets' order rotating by round",
        on.join(", ")
    );
    for t in &targets {
        check_assets(t).await;
        check_api(t).await;
    }
    // Per row, per target: the samples of the rounds.
    let mut measured: Vec<Vec<Vec<Sample>>> = rows
        .iter()
        .map(|_| targets.iter().map(|_| Vec::new()).collect())
        .collect();
    if !rows.is_empty() {
        for round in 1..=rounds {
            println!("\nround {round}/{rounds}");
            run_round(round, &rows, &targets, &mut measured);
        }
        print_medians(rounds, &rows, &targets, &measured);
        print_pair(rounds, &rows, &targets, &measured);
    }
    if picked(&only, "asset") {
        match targets.iter().find(|t| t.name() == "edgehost") {
            Some(edgehost) => breakdown(edgehost).await,
            None => println!("\n(the split of an asset request's time is edgehost's: not run)"),
        }
    }
    for t in targets {
        t.platform.stop().await;
    }
}

/// The targets `TARGETS` names (default all, or edgehost alone without `SPIN_BIN`), in
/// [`KINDS`]' order.
fn selected_kinds() -> Vec<&'static Kind> {
    let spin = std::env::var_os("SPIN_BIN").is_some_and(|s| !s.is_empty());
    let named: String = env_or("TARGETS", String::new());
    if named.trim().is_empty() {
        if !spin {
            println!("SPIN_BIN is not set: edgehost alone");
        }
        return KINDS.iter().filter(|k| spin || !k.on_spin).collect();
    }
    let words: Vec<&str> = named.split(',').map(str::trim).collect();
    for word in &words {
        assert!(
            KINDS.iter().any(|k| k.name == *word),
            "TARGETS={named:?}: {word:?} is none of edgehost, spin-sqlite, spin-postgres"
        );
    }
    let kinds: Vec<&Kind> = KINDS.iter().filter(|k| words.contains(&k.name)).collect();
    assert!(
        spin || kinds.iter().all(|k| !k.on_spin),
        "TARGETS={named:?} names a Spin target: set SPIN_BIN to a spin binary"
    );
    kinds
}

/// The rows whose names contain one of `ROWS`' words (all when it is empty), with the
/// yardstick whenever any row runs.
fn selected_rows(only: &str) -> Vec<&'static Row> {
    if !ROWS.iter().any(|r| picked(only, r.name)) {
        return Vec::new();
    }
    ROWS.iter()
        .filter(|r| r.name == YARDSTICK || picked(only, r.name))
        .collect()
}

/// Whether `ROWS` (`only`) is empty or one of its words is part of `name`.
fn picked(only: &str, name: &str) -> bool {
    only.is_empty()
        || only
            .split(',')
            .map(str::trim)
            .any(|w| !w.is_empty() && name.contains(w))
}

/// One round: each row on every target, the targets' order rotated by `round`; prints a
/// line per row and target.
fn run_round(round: usize, rows: &[&Row], targets: &[Target], measured: &mut [Vec<Vec<Sample>>]) {
    println!(
        "{:<26} {:<14} {:>8} {:>9} {:>9} {:>7}  load",
        "row", "target", "req/s", "p50", "p99", "/asset"
    );
    let n = targets.len();
    let order: Vec<usize> = (0..n).map(|i| (i + round - 1) % n).collect();
    // The yardstick's rate per target in this round (its row comes first).
    let mut asset = vec![f64::NAN; n];
    for (row, samples) in rows.iter().zip(measured.iter_mut()) {
        let mut figures: Vec<Option<Figures>> = targets.iter().map(|_| None).collect();
        for &i in &order {
            figures[i] = Some(wrk(&(row.args)(&targets[i])));
        }
        for (i, f) in figures.into_iter().enumerate() {
            let f = f.expect("every target ran the row");
            if row.name == YARDSTICK {
                asset[i] = f.rate;
            }
            let per_asset = f.rate / asset[i];
            println!(
                "{:<26} {:<14} {:>8.0} {:>9} {:>9} {:>6.2}x  {}{}",
                row.name,
                targets[i].name(),
                f.rate,
                f.p50,
                f.p99,
                per_asset,
                f.load,
                notes(&f)
            );
            samples[i].push(Sample {
                rate: f.rate,
                p99: micros_of(&f.p99),
                per_asset,
            });
        }
    }
}

/// Per row and target: the medians of the rounds' req/s, p99 and rate over the asset's.
fn print_medians(rounds: usize, rows: &[&Row], targets: &[Target], measured: &[Vec<Vec<Sample>>]) {
    println!(
        "\nmedians of {} (/asset: over the same target's {YARDSTICK} rate)",
        plural(rounds, "round")
    );
    println!(
        "{:<26} {:<14} {:>8} {:>9} {:>7}",
        "row", "target", "req/s", "p99", "/asset"
    );
    for (row, per_target) in rows.iter().zip(measured) {
        for (t, samples) in targets.iter().zip(per_target) {
            let of = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
            println!(
                "{:<26} {:<14} {:>8.0} {:>9} {:>6.2}x",
                row.name,
                t.name(),
                of(|s| s.rate),
                show_micros(of(|s| s.p99)),
                of(|s| s.per_asset)
            );
        }
    }
}

/// edgehost's rate over spin-sqlite's per row (the same `spin.toml` on SQLite on both
/// hosts): the median ratio and each round's, when both ran.
fn print_pair(rounds: usize, rows: &[&Row], targets: &[Target], measured: &[Vec<Vec<Sample>>]) {
    let index = |name: &str| targets.iter().position(|t| t.name() == name);
    let (Some(e), Some(s)) = (index("edgehost"), index("spin-sqlite")) else {
        return;
    };
    println!(
        "\nedgehost over spin-sqlite, medians of {}",
        plural(rounds, "round")
    );
    println!(
        "{:<26} {:>10} {:>10}   {:>12}  (ratio per round)",
        "row", "edgehost/s", "spin/s", "median ratio"
    );
    for (row, per_target) in rows.iter().zip(measured) {
        let (edgehost, spin) = (&per_target[e], &per_target[s]);
        let ratios: Vec<f64> = edgehost
            .iter()
            .zip(spin)
            .map(|(e, s)| e.rate / s.rate)
            .collect();
        let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{:<26} {:>10.0} {:>10.0}   {:>11.2}x  ({})",
            row.name,
            median(edgehost.iter().map(|s| s.rate).collect()),
            median(spin.iter().map(|s| s.rate).collect()),
            median(ratios),
            each.join(", ")
        );
    }
}
/// Where an asset request's time goes on edgehost: instantiating the pages component,
/// then the guest's run through wasi:http with the body read whole (both in this task,
/// sequentially, no HTTP: `edgehost::bench_request`), against a whole request over
/// loopback on one keep-alive connection (`wrk -c1`, p50), the rest being hyper, the
/// kernel's TCP and wrk.
async fn breakdown(t: &Target) {
    println!(
        "\nwhere an asset request's time goes on edgehost (p50; sequential, then wrk -t1 -c1 -d3s)"
    );
    println!(
        "{:<26} {:>11} {:>11} {:>11} {:>11}",
        "request", "instantiate", "+ guest", "HTTP 1 conn", "HTTP rest"
    );
    let options = edgehost::Options {
        manifest: platform_tests::workspace_root().join("spin.toml"),
        listen: "127.0.0.1:0".parse().expect("an address"),
        state_dir: Some(t.platform.state_dir().to_path_buf()),
        components: vec!["pages".into()],
        ..Default::default()
    };
    for (name, url, gzip, iterations) in [
        ("layout.js, gzip", &t.layout, true, 2000),
        ("layout.js, identity", &t.layout, false, 2000),
        ("hls.js 389 KB, gzip", &t.hls, true, 500),
        ("hls.js 389 KB, identity", &t.hls, false, 100),
    ] {
        let headers: &[(&str, &str)] = if gzip {
            &[("accept-encoding", "gzip")]
        } else {
            &[]
        };
        let timings = edgehost::bench_request(&options, "pages", url, headers, iterations)
            .await
            .expect("the asset requests");
        let instantiate = median(timings.iter().map(|t| t.0.as_secs_f64() * 1e6).collect());
        let handled = median(timings.iter().map(|t| t.1.as_secs_f64() * 1e6).collect());
        let mut args = vec!["-t1", "-c1", "-d3s", "--latency"];
        if gzip {
            args.extend(["-H", "Accept-Encoding: gzip"]);
        }
        let out = std::process::Command::new("wrk")
            .args(args)
            .arg(t.platform.url(url))
            .output()
            .expect("wrk runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let p50 = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("50%"))
            .map(|v| micros_of(v.trim()))
            .unwrap_or(f64::NAN);
        println!(
            "{name:<26} {:>9.0}µs {:>9.0}µs {:>9.0}µs {:>9.0}µs",
            instantiate,
            handled - instantiate,
            p50,
            p50 - handled
        );
    }
}

/// wrk's latency figure (`81.00us`, `2.25ms`, `1.20s`) in microseconds.
fn micros_of(figure: &str) -> f64 {
    let split = figure
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(figure.len());
    let (number, unit) = figure.split_at(split);
    let number: f64 = number.parse().unwrap_or(f64::NAN);
    match unit {
        "us" => number,
        "ms" => number * 1e3,
        "s" => number * 1e6,
        _ => f64::NAN,
    }
}

/// The middle value (the mean of the two middle ones for an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// wrk's way of showing microseconds (`850.00us`, `2.25ms`, `1.20s`).
fn show_micros(us: f64) -> String {
    if us < 1e3 {
        format!("{us:.2}us")
    } else if us < 1e6 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// Registers a tenant and a user on `platform`, finds the asset URLs and writes the create
/// rows' script.
async fn prepare(
    kind: &'static Kind,
    platform: Platform,
    hls: &str,
    work: &std::path::Path,
) -> Target {
    let name = kind.name;
    let tenant = platform.register_client(&format!("bench-{name}")).await;
    let username = format!("bench-{name}");
    let user = platform.signup(&tenant, &username).await;
    // The recording page of a public broadcast references layout.js.
    let created = platform
        .request(Method::POST, "/api/broadcasts")
        .header("x-api-key", &tenant.api_key)
        .bearer_auth(&user.token)
        .json(&serde_json::json!({"title": "recorded"}))
        .send()
        .await
        .expect("a create");
    assert_eq!(created.status(), 200, "{name}: a create");
    let created: serde_json::Value = created.json().await.expect("the created broadcast");
    let stream = created["streamId"].as_str().expect("streamId");
    let page = platform
        .request(Method::GET, &format!("/streams/{stream}/record"))
        .send()
        .await
        .expect("record page");
    assert_eq!(page.status(), 200, "{name}: the record page");
    let html = page.text().await.expect("the page's body");
    let layout =
        platform_tests::script_url(&html, "/static/layout.").expect("layout.js is referenced");
    let create_script = work.join(format!("create-{name}.lua"));
    std::fs::write(
        &create_script,
        format!(
            "wrk.method = \"POST\"\n\
             wrk.body = '{{\"title\":\"bench\"}}'\n\
             wrk.headers[\"Content-Type\"] = \"application/json\"\n\
             wrk.headers[\"X-API-Key\"] = \"{}\"\n\
             wrk.headers[\"Authorization\"] = \"Bearer {}\"\n",
            tenant.api_key, user.token
        ),
    )
    .expect("write the wrk script");
    Target {
        kind,
        platform,
        api_key: tenant.api_key,
        token: user.token,
        user_id: user.id,
        username,
        layout,
        hls: format!("/static/{hls}"),
        create_script,
    }
}

/// Both encodings of both assets answer 200 with the file's content, before anything is
/// timed.
async fn check_assets(t: &Target) {
    for (url, file) in [
        (&t.layout, "layout.js"),
        (&t.hls, "vendor/hls.light.min.js"),
    ] {
        let original = std::fs::read(platform_tests::workspace_root().join("static").join(file))
            .expect("the static file");
        // reqwest without its gzip feature neither asks for nor decodes gzip.
        let plain = t.platform.request(Method::GET, url).send().await.unwrap();
        assert_eq!(plain.status(), 200, "{}: {url}", t.name());
        assert!(plain.headers().get("content-encoding").is_none());
        assert_eq!(
            plain.bytes().await.unwrap(),
            original,
            "{}: {url}",
            t.name()
        );
        let gz = t
            .platform
            .request(Method::GET, url)
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(gz.status(), 200);
        assert_eq!(
            gz.headers()["content-encoding"],
            "gzip",
            "{}: {url}",
            t.name()
        );
        let body = gz.bytes().await.unwrap();
        assert!(body.starts_with(&[0x1f, 0x8b]) && body.len() < original.len());
    }
}

/// One create, one API-key read and the user's profile read succeed (the profile being
/// the user's), before anything is timed.
async fn check_api(t: &Target) {
    let name = t.name();
    let create = t
        .platform
        .request(Method::POST, "/api/broadcasts")
        .header("x-api-key", &t.api_key)
        .bearer_auth(&t.token)
        .json(&serde_json::json!({"title": "bench"}))
        .send()
        .await
        .unwrap();
    assert_eq!(create.status(), 200, "{name}: a create");
    let read = t
        .platform
        .request(Method::GET, "/api/streaming/providers")
        .header("x-api-key", &t.api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200, "{name}: a read");
    let profile = t
        .platform
        .request(Method::GET, "/api/users/profile/full")
        .header("x-api-key", &t.api_key)
        .bearer_auth(&t.token)
        .send()
        .await
        .unwrap();
    let (status, profile) = platform_tests::json_of(profile).await;
    assert_eq!(status, 200, "{name}: the profile read: {profile}");
    assert_eq!(
        (profile["id"].as_str(), profile["username"].as_str()),
        (Some(t.user_id.as_str()), Some(t.username.as_str())),
        "{name}: the user's own profile: {profile}"
    );
}

/// `path` below `static/` under its content-hashed public name (as `build.rs` names it).
fn hashed(path: &str) -> String {
    let bytes = std::fs::read(platform_tests::workspace_root().join("static").join(path))
        .expect("the static file");
    let digest = hex::encode(Sha256::digest(&bytes));
    let file = path.rsplit('/').next().unwrap_or(path);
    let (stem, ext) = file.rsplit_once('.').expect("a file with an extension");
    format!("{stem}.{}.{ext}", &digest[..10])
}

/// One `wrk -t2 -c32 -d5s --latency` run with `args` (options, then the URL).
fn wrk(args: &[String]) -> Figures {
    let out = std::process::Command::new("wrk")
        .args(["-t2", "-c32", "-d5s", "--latency"])
        .args(args)
        .output()
        .expect("wrk runs (apt-get install -y wrk)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix).map(|v| v.trim().to_string()))
    };
    let rate = line("Requests/sec:")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("wrk said: {text}"));
    let non_2xx = line("Non-2xx or 3xx responses:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Figures {
        rate,
        p50: line("50%").unwrap_or_default(),
        p99: line("99%").unwrap_or_default(),
        non_2xx,
        errors: line("Socket errors:").unwrap_or_default(),
        load: load_average(),
    }
}

/// `n` and `thing`, with an `s` unless there is one.
fn plural(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("{n} {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// The 1-minute load average, as `uptime` shows it.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

/// Failed requests, if any, after the row (a row with them is not a clean figure).
fn notes(f: &Figures) -> String {
    let mut out = String::new();
    if f.non_2xx > 0 {
        out.push_str(&format!("  {} non-2xx", f.non_2xx));
    }
    if !f.errors.is_empty() {
        out.push_str(&format!("  socket errors {}", f.errors));
    }
    out
}
