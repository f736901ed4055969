//! API throughput through edgehost over loopback: SFU tokens minted per second and
//! broadcasts created per second, beside `/api/sfu/health` (which probes a stand-in SFU
//! over loopback on every request). The token and create rows run on SQLite, then on
//! PostgreSQL + Redis (throwaway servers, `platform_tests::backends`), in the same run.
//! On SQLite, creates also run at fixed rates (`CREATE_RATES`, default `1200,1700`), each
//! latency counted from when its request was due, so a server that falls behind shows it.
//!
//! Run: `cargo bench -p platform-tests --bench api --profile host`. The load generator
//! shares the machine with the server; compare the rows of one run.

use anyhow::Result;
use bytes::Bytes;
use http_body_util::Full;
use platform_tests::backends::Backend;
use platform_tests::load::{self, Plan};
use platform_tests::{Exchange, Method, Platform};
use serde_json::json;

fn main() -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

fn request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: String,
) -> hyper::Request<Full<Bytes>> {
    let mut builder = hyper::Request::builder().method(method).uri(path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder
        .body(Full::new(Bytes::from(body)))
        .expect("a valid request")
}

/// A stand-in SFU answering `OK` to the health probe (as LiveKit's root path does).
async fn fake_sfu() -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_req| async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                        Bytes::from_static(b"OK"),
                    )))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(url)
}

async fn run() -> Result<()> {
    let sfu_url = fake_sfu().await?;
    let plan = Plan::default();
    plan.describe();
    let mut health_measured = false;
    for (backend, label) in [
        (Backend::Sqlite, "SQLite"),
        (Backend::Postgres, "PostgreSQL"),
    ] {
        let p = Platform::start_on(
            backend,
            &[
                ("sfu_server_url", &sfu_url),
                ("sfu_api_url", &sfu_url),
                ("sfu_api_key", "APIbench"),
                ("sfu_api_secret", "bench-secret-bench-secret-bench-secret"),
            ],
        )
        .await;
        if !health_measured {
            measure_health(&p, plan).await?;
            health_measured = true;
        }
        measure_store(&p, plan, label).await?;
        p.stop().await;
    }
    Ok(())
}

fn warm_up(plan: Plan) -> Plan {
    Plan {
        max_requests: 300,
        ..plan
    }
}

async fn measure_health(p: &Platform, plan: Plan) -> Result<()> {
    let health = |_| request("GET", "/api/sfu/health", &[], String::new());
    load::run(p.addr(), warm_up(plan), 200, health).await?;
    load::run(p.addr(), plan, 200, health)
        .await?
        .report("GET /api/sfu/health");
    Ok(())
}

/// Token mints (reads: key, session, co-host) and broadcast creates (write transactions).
async fn measure_store(p: &Platform, plan: Plan, label: &str) -> Result<()> {
    let tenant = p.register_client("Bench").await;
    let user = p.signup(&tenant, "bencher").await;
    let (status, broadcast) = p
        .as_user(&user, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Bench"}))
        .await;
    anyhow::ensure!(status == 200, "broadcast: {broadcast}");
    let addr = p.addr();

    let token_path = format!(
        "/api/streaming/sessions/{}/token",
        broadcast["id"].as_str().unwrap_or_default()
    );
    let (api_key, bearer) = (tenant.api_key.clone(), format!("Bearer {}", user.token));
    // One request in ten is the owner's publisher token, the rest guests' viewer tokens.
    let mint = move |n: usize| {
        let (body, auth) = if n.is_multiple_of(10) {
            (json!({"role": "publisher"}), Some(bearer.as_str()))
        } else {
            (json!({"role": "subscriber"}), None)
        };
        let mut headers = vec![
            ("x-api-key", api_key.as_str()),
            ("content-type", "application/json"),
        ];
        headers.extend(auth.map(|a| ("authorization", a)));
        request("POST", &token_path, &headers, body.to_string())
    };
    let mint = std::sync::Arc::new(mint);
    let warm = mint.clone();
    load::run(addr, warm_up(plan), 200, move |n| warm(n)).await?;
    load::run(addr, plan, 200, move |n| mint(n))
        .await?
        .report(&format!("{label:<10} POST .../token (mint)"));

    let (api_key, bearer) = (tenant.api_key.clone(), format!("Bearer {}", user.token));
    let create = move |n: usize| {
        let body = json!({"title": format!("Show {n}"), "tags": ["bench"]});
        request(
            "POST",
            "/api/broadcasts",
            &[
                ("x-api-key", &api_key),
                ("authorization", &bearer),
                ("content-type", "application/json"),
            ],
            body.to_string(),
        )
    };
    let create = std::sync::Arc::new(create);
    let timings = p.sqlite_writer_timings().filter(|_| p.backends.is_none());
    // As fast as it goes; then, on SQLite, at fixed rates (CREATE_RATES, default
    // 1200,1700: below the machine's capacity, and the store's target), latency counted
    // from when each request was due.
    let mut runs = vec![(plan, format!("{label:<10} POST /api/broadcasts"))];
    if p.backends.is_none() {
        let rates = std::env::var("CREATE_RATES").unwrap_or_else(|_| "1200,1700".into());
        for rate in rates.split(',').map(str::trim) {
            let rate: f64 = rate
                .parse()
                .map_err(|_| anyhow::anyhow!("CREATE_RATES: {rate:?} is not a rate"))?;
            let paced = Plan {
                rate: Some(rate),
                ..plan
            };
            runs.push((
                paced,
                format!("{label:<10} POST /api/broadcasts @{rate:.0}/s"),
            ));
        }
    }
    for (plan, name) in runs {
        if let Some(t) = &timings {
            t.start();
        }
        let create = create.clone();
        load::run(addr, plan, 200, move |n| create(n))
            .await?
            .report(&name);
        if let Some(t) = &timings {
            load::report_writer(&t.take());
        }
    }
    Ok(())
}
