//! edgehost against the real Spin: the same `spin.toml` on SQLite, served by edgehost (in
//! this process, on its multi-threaded runtime, as `edgehost up` runs it) and by `spin up`
//! (`SPIN_BIN`, a child process), loaded in one run by `wrk -t2 -c32 -d5s --latency`,
//! the two hosts alternating row by row. Rows: broadcast creates (`POST /api/broadcasts`
//! with the tenant's API key and a user's Bearer token), an API-key read
//! (`GET /api/streaming/providers`: the key looked up in SQLite, a small JSON answer), and
//! two embedded static assets, `layout.js` (6 KB) and the hls.js vendor file (389 KB),
//! each to a browser (`Accept-Encoding: gzip`) and to a client without it (the component
//! decompresses or keeps an uncompressed copy).
//!
//! Run: `SPIN_BIN=/work/spin-build/spin cargo bench -p platform-tests --bench hosts
//! --profile host` (needs `wrk`). `ROUNDS=n` repeats the table (default 3) and then prints
//! each row's medians: other work on the machine moves single rows by a factor of two.
//! `ROWS=a,b` runs only the rows whose names contain one of the words; `ROWS=asset` runs
//! only the split of an asset request's time, which follows the table when `ROWS` is
//! unset. `wrk`, both hosts and their guests share the machine: compare the ratios of one
//! run, not absolute figures.

use platform_tests::backends::Backend;
use platform_tests::{Method, Platform, env_or};
use sha2::{Digest, Sha256};

/// What one host needs to be loaded: its address and the credentials and URLs of the rows.
struct Target {
    name: &'static str,
    platform: Platform,
    api_key: String,
    token: String,
    layout: String,
    hls: String,
    /// The POST of the create rows (a wrk Lua script).
    create_script: std::path::PathBuf,
}

/// One `wrk` row's figures.
struct Figures {
    rate: f64,
    p50: String,
    p99: String,
    non_2xx: u64,
    errors: String,
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
    let work = tempfile::tempdir().expect("a scratch directory");
    let hls_path = format!("vendor/{}", hashed("vendor/hls.light.min.js"));
    let mut targets = Vec::new();
    for (name, on_spin) in [("edgehost", false), ("spin", true)] {
        let platform = Platform::start_on_spin(on_spin, Backend::Sqlite, &[]).await;
        targets.push(prepare(name, platform, &hls_path, work.path()).await);
    }
    let (edgehost, spin) = (&targets[0], &targets[1]);
    println!(
        "edgehost {} and spin {} (same spin.toml, SQLite), wrk -t2 -c32 -d5s, alternating",
        edgehost.platform.base, spin.platform.base
    );
    for t in &targets {
        check_assets(t).await;
    }

    type Row = (&'static str, fn(&Target) -> Vec<String>);
    let rows: [Row; 6] = [
        ("broadcast create (POST)", |t| {
            vec![
                "-s".into(),
                t.create_script.display().to_string(),
                t.platform.url("/api/broadcasts"),
            ]
        }),
        ("API-key read (providers)", |t| {
            vec![
                "-H".into(),
                format!("X-API-Key: {}", t.api_key),
                t.platform.url("/api/streaming/providers"),
            ]
        }),
        ("layout.js, gzip", |t| {
            vec![
                "-H".into(),
                "Accept-Encoding: gzip".into(),
                t.platform.url(&t.layout),
            ]
        }),
        ("layout.js, identity", |t| vec![t.platform.url(&t.layout)]),
        ("hls.js 389 KB, gzip", |t| {
            vec![
                "-H".into(),
                "Accept-Encoding: gzip".into(),
                t.platform.url(&t.hls),
            ]
        }),
        ("hls.js 389 KB, identity", |t| vec![t.platform.url(&t.hls)]),
    ];
    let selected = |name: &str| {
        only.is_empty()
            || only
                .split(',')
                .any(|w| !w.is_empty() && name.contains(w.trim()))
    };
    // Per row: (edgehost req/s, spin req/s) of each round.
    let mut measured: Vec<Vec<(f64, f64)>> = vec![Vec::new(); rows.len()];
    for round in 1..=rounds {
        println!("\nround {round}/{rounds}");
        println!(
            "{:<26} {:>10} {:>9} {:>9}   {:>10} {:>9} {:>9}   {:>6}  load",
            "row", "edgehost/s", "p50", "p99", "spin/s", "p50", "p99", "ratio"
        );
        for (row, (name, args)) in rows.iter().enumerate() {
            if !selected(name) {
                continue;
            }
            // Alternate which host goes first, so neither always meets the other's
            // leftovers (a busy SQLite file, a warm cache).
            let order = if round % 2 == 1 { [0, 1] } else { [1, 0] };
            let mut figures: [Option<Figures>; 2] = [None, None];
            for i in order {
                figures[i] = Some(wrk(&args(&targets[i])));
            }
            let [Some(e), Some(s)] = figures else {
                unreachable!("both hosts ran")
            };
            measured[row].push((e.rate, s.rate));
            println!(
                "{name:<26} {:>10.0} {:>9} {:>9}   {:>10.0} {:>9} {:>9}   {:>5.2}x  {}{}",
                e.rate,
                e.p50,
                e.p99,
                s.rate,
                s.p50,
                s.p99,
                e.rate / s.rate,
                load_average(),
                notes(&e, &s)
            );
        }
    }
    if rounds > 1 {
        println!("\nmedians of {rounds} rounds");
        println!(
            "{:<26} {:>10} {:>10}   {:>12}  (ratio per round)",
            "row", "edgehost/s", "spin/s", "median ratio"
        );
        for ((name, _), pairs) in rows.iter().zip(&measured) {
            if pairs.is_empty() {
                continue;
            }
            let ratios: Vec<f64> = pairs.iter().map(|(e, s)| e / s).collect();
            let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
            println!(
                "{name:<26} {:>10.0} {:>10.0}   {:>11.2}x  ({})",
                median(pairs.iter().map(|p| p.0).collect()),
                median(pairs.iter().map(|p| p.1).collect()),
                median(ratios),
                each.join(", ")
            );
        }
    }
    if selected("asset") || only.is_empty() {
        breakdown(edgehost).await;
    }
    for t in targets {
        t.platform.stop().await;
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

/// Registers a tenant and a user on `platform`, finds the asset URLs and writes the create
/// rows' script.
async fn prepare(
    name: &'static str,
    platform: Platform,
    hls: &str,
    work: &std::path::Path,
) -> Target {
    let tenant = platform.register_client(&format!("bench-{name}")).await;
    let user = platform.signup(&tenant, &format!("bench{name}")).await;
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
        name,
        platform,
        api_key: tenant.api_key,
        token: user.token,
        layout,
        hls: format!("/static/{hls}"),
        create_script,
    }
}

/// Both encodings of both assets answer 200 with the file's content, and one create and
/// one read succeed, before anything is timed.
async fn check_assets(t: &Target) {
    for (url, file) in [
        (&t.layout, "layout.js"),
        (&t.hls, "vendor/hls.light.min.js"),
    ] {
        let original = std::fs::read(platform_tests::workspace_root().join("static").join(file))
            .expect("the static file");
        // reqwest without its gzip feature neither asks for nor decodes gzip.
        let plain = t.platform.request(Method::GET, url).send().await.unwrap();
        assert_eq!(plain.status(), 200, "{}: {url}", t.name);
        assert!(plain.headers().get("content-encoding").is_none());
        assert_eq!(plain.bytes().await.unwrap(), original, "{}: {url}", t.name);
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
            t.name
        );
        let body = gz.bytes().await.unwrap();
        assert!(body.starts_with(&[0x1f, 0x8b]) && body.len() < original.len());
    }
    let create = t
        .platform
        .request(Method::POST, "/api/broadcasts")
        .header("x-api-key", &t.api_key)
        .bearer_auth(&t.token)
        .json(&serde_json::json!({"title": "bench"}))
        .send()
        .await
        .unwrap();
    assert_eq!(create.status(), 200, "{}: a create", t.name);
    let read = t
        .platform
        .request(Method::GET, "/api/streaming/providers")
        .header("x-api-key", &t.api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200, "{}: a read", t.name);
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
fn notes(e: &Figures, s: &Figures) -> String {
    let mut out = String::new();
    for (host, f) in [("edgehost", e), ("spin", s)] {
        if f.non_2xx > 0 {
            out.push_str(&format!("  {host}: {} non-2xx", f.non_2xx));
        }
        if !f.errors.is_empty() {
            out.push_str(&format!("  {host}: socket errors {}", f.errors));
        }
    }
    out
}
