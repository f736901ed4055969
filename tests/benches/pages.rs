//! Pages benchmark, on loopback through edgehost (the real `spin.toml` application):
//! recording-page renders per second, 304 answers per second (a conditional request with
//! the page's ETag), and a content-hashed asset per second, gzip-encoded.
//!
//! Run: `cargo bench -p platform-tests --bench pages --profile host`. The load generator
//! (`tests/src/load.rs`, keep-alive connections) shares the machine with the server, so
//! absolute numbers are pessimistic; compare the rows of one run.

use bytes::Bytes;
use http_body_util::Full;
use platform_tests::load::{self, Plan};
use platform_tests::{Exchange, Method, Platform};

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let p = Platform::start().await;
    let plan = Plan::default();
    plan.describe();
    // A recording page exists for a broadcast that exists.
    let tenant = p.register_client("Bench").await;
    let host = p.signup(&tenant, "host").await;
    let (status, created) = p
        .as_user(&host, Method::POST, "/api/broadcasts")
        .send_json(&serde_json::json!({"title": "Bench"}))
        .await;
    assert_eq!(status, 200, "{created}");
    let stream = created["streamId"].as_str().expect("streamId");
    let record = format!("/streams/{stream}/record?layout=grid3x3&width=1280&height=720");
    let record = record.as_str();
    let first = p
        .request(Method::GET, record)
        .send()
        .await
        .expect("record page");
    assert_eq!(first.status(), 200);
    let etag = first.headers()["etag"].to_str().expect("etag").to_string();
    let html = first.text().await.expect("body");
    let asset =
        platform_tests::script_url(&html, "/static/layout.").expect("layout.js is referenced");
    let addr = p.addr();
    let warm_up = Plan {
        max_requests: 200,
        ..plan
    };
    load::run(addr, warm_up, 200, get(record, &[]))
        .await
        .expect("warm-up");
    let render = load::run(addr, plan, 200, get(record, &[]))
        .await
        .expect("renders");
    render.report(&format!("record page 200 ({} B)", html.len()));
    let conditional = load::run(addr, plan, 304, get(record, &[("if-none-match", &etag)]))
        .await
        .expect("conditional requests");
    conditional.report("record page 304");
    let gz = load::run(addr, plan, 200, get(&asset, &[("accept-encoding", "gzip")]))
        .await
        .expect("asset requests");
    gz.report("layout.js asset (gzip)");
    println!(
        "304 / 200 throughput: {:.2}x",
        conditional.per_second() / render.per_second()
    );
}

/// `GET path` with `headers`, as the load generator sends it.
fn get(
    path: &str,
    headers: &[(&str, &str)],
) -> impl Fn(usize) -> hyper::Request<Full<Bytes>> + Send + Sync + 'static {
    let path = path.to_string();
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |_| {
        let mut builder = hyper::Request::get(path.as_str());
        for (k, v) in &headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        builder
            .body(Full::new(Bytes::new()))
            .expect("a valid request")
    }
}
