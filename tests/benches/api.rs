//! API throughput through edgehost over loopback: SFU tokens minted per second and
//! broadcasts created per second, beside `/api/sfu/health` (which probes a stand-in SFU
//! over loopback on every request).
//!
//! Run: `cargo bench -p platform-tests --bench api --profile host`. The load generator
//! shares the machine with the server; compare the rows of one run.

use anyhow::Result;
use bytes::Bytes;
use http_body_util::Full;
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
    let p = Platform::start_with(&[
        ("sfu_server_url", &sfu_url),
        ("sfu_api_key", "APIbench"),
        ("sfu_api_secret", "bench-secret-bench-secret-bench-secret"),
    ])
    .await;
    let tenant = p.register_client("Bench").await;
    let user = p.signup(&tenant, "bencher").await;
    let (status, broadcast) = p
        .as_user(&user, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Bench"}))
        .await;
    anyhow::ensure!(status == 200, "broadcast: {broadcast}");
    let plan = Plan::default();
    plan.describe();
    let addr = p.addr();
    let warm_up = Plan {
        max_requests: 300,
        ..plan
    };

    let health = |_| request("GET", "/api/sfu/health", &[], String::new());
    load::run(addr, warm_up, 200, health).await?;
    load::run(addr, plan, 200, health)
        .await?
        .report("GET /api/sfu/health");

    let token_path = format!(
        "/api/streaming/sessions/{}/token",
        broadcast["id"].as_str().unwrap_or_default()
    );
    let api_key = tenant.api_key.clone();
    let owner_id = user.id.clone();
    // One request in ten is the owner's publisher token, the rest viewers' tokens.
    let mint = move |n: usize| {
        let body = if n.is_multiple_of(10) {
            json!({"userId": owner_id, "role": "publisher"})
        } else {
            json!({"userId": format!("viewer-{n}"), "role": "subscriber"})
        };
        request(
            "POST",
            &token_path,
            &[
                ("x-api-key", &api_key),
                ("content-type", "application/json"),
            ],
            body.to_string(),
        )
    };
    let mint = std::sync::Arc::new(mint);
    let warm = mint.clone();
    load::run(addr, warm_up, 200, move |n| warm(n)).await?;
    load::run(addr, plan, 200, move |n| mint(n))
        .await?
        .report("POST .../token (mint)");

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
    load::run(addr, plan, 200, create)
        .await?
        .report("POST /api/broadcasts");
    Ok(())
}
