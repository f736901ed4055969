//! What each main route asks of the back ends, counted on the wire: the platform on
//! PostgreSQL with its key-value store on Redis, served by the real Spin (`SPIN_BIN`) and by
//! edgehost, each back end reached through a counting proxy (`platform_tests::wire_count`).
//! Per route, `REQUESTS` requests (default 50) are sent one after the other on one
//! connection after three to warm up, and the proxies' counts are divided by them:
//!
//! - `conns`: new PostgreSQL connections (a pool filling, or a connection replaced);
//! - `opens`: the pool's recycling batch (`CLOSE ALL; ... DISCARD SEQUENCES;`), which Spin
//!   sends each time a guest opens a pooled connection;
//! - `stmts`: statements parsed; `rt`: PostgreSQL round trips (every exchange the host
//!   waits on: connecting, simple queries, a statement's preparation and its execution);
//!   `closes`: prepared statements closed (sent without waiting: work for the server);
//! - `pg ms`: the time those round trips waited on PostgreSQL; `kv`: Redis commands;
//! - `p50 ms`: the whole request's median as the client saw it.
//!
//! Run: `SPIN_BIN=/work/spin-real/spin cargo bench -p platform-tests --bench host_calls
//! --profile host`. `HOSTS=spin` or `HOSTS=edgehost` runs one host (edgehost alone when
//! `SPIN_BIN` is unset); `ROUTES=a,b` the routes whose names contain a word; `STATEMENTS=1`
//! also lists each route's statements and Redis commands per request; `HOLD=n` first keeps
//! the platform serving for n seconds, printing its address and a user's credentials.

use platform_tests::wire_count::{CountingProxy, Counts, Protocol};
use platform_tests::{Exchange, Method, Platform, Tenant, User, env_or};
use serde_json::json;
use std::time::{Duration, Instant};

const SFU_KEY: &str = "APIbenchkey";
const SFU_SECRET: &str = "bench-sfu-secret-that-is-long-enough-0123456789";

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(run());
}

async fn run() {
    let requests: usize = env_or("REQUESTS", 50);
    let only: String = env_or("ROUTES", String::new());
    let spin_bin = std::env::var("SPIN_BIN").unwrap_or_default();
    let default_hosts = if spin_bin.is_empty() {
        "edgehost"
    } else {
        "spin,edgehost"
    };
    let hosts: String = env_or("HOSTS", default_hosts.to_string());
    let cluster = platform_tests::backends::PostgresCluster::shared().await;
    let redis = platform_tests::backends::RedisServer::shared().await;
    for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let on_spin = match host {
            "spin" => true,
            "edgehost" => false,
            other => panic!("HOSTS takes spin and edgehost, not {other}"),
        };
        let pg = CountingProxy::start(Protocol::Postgres, addr(&cluster.host())).await;
        let kv = CountingProxy::start(Protocol::Redis, addr(&redis.host())).await;
        let route = |url: &str| {
            if url.starts_with("redis") {
                kv.rewire(url)
            } else {
                pg.rewire(url)
            }
        };
        let variables = [("sfu_api_key", SFU_KEY), ("sfu_api_secret", SFU_SECRET)];
        let p = Platform::start_on_postgres_routed(on_spin, &variables, route).await;
        let fixture = Fixture::new(&p).await;
        // `HOLD=n` keeps the platform serving for n seconds first, its address and a user's
        // credentials printed, for measuring it by hand (`wrk`, `perf`).
        let hold: u64 = env_or("HOLD", 0);
        if hold > 0 {
            println!(
                "{host} at {} for {hold} s: X-API-Key {}, Bearer {}, broadcast {}",
                p.base, fixture.tenant.api_key, fixture.fan.token, fixture.broadcast
            );
            tokio::time::sleep(Duration::from_secs(hold)).await;
        }
        println!(
            "\n{host} on PostgreSQL + Redis KV: {requests} sequential requests per route, per request"
        );
        println!(
            "{:<22} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7} {:>5} {:>7} {:>7}  status",
            "route", "conns", "opens", "stmts", "rt", "closes", "pg ms", "kv", "kv ms", "p50 ms"
        );
        let mut details = Vec::new();
        for route in ROUTES {
            if !only.is_empty() && !only.split(',').any(|w| route.name.contains(w.trim())) {
                continue;
            }
            let measured = measure(&p, &fixture, route, requests, &pg, &kv).await;
            measured.print(route.name, requests);
            details.push((route.name, measured));
        }
        if env_or("STATEMENTS", 0u8) == 1 {
            for (name, m) in &details {
                let kinds: Vec<String> =
                    m.pg.exchanges
                        .iter()
                        .chain(&m.kv.exchanges)
                        .map(|(kind, t)| format!("{kind} {:.2}", t.count as f64 / requests as f64))
                        .collect();
                println!("\n{name}: exchanges per request: {}", kinds.join(", "));
                println!("statements per request");
                for (text, n) in m.pg.statements.iter().chain(&m.kv.statements) {
                    println!("  {:>5.2}  {text}", *n as f64 / requests as f64);
                }
            }
        }
        p.stop().await;
    }
}

fn addr(host: &str) -> std::net::SocketAddr {
    host.parse().expect("a loopback address")
}

/// What the routes act on: a tenant, users, a live broadcast with a session, a gift.
struct Fixture {
    tenant: Tenant,
    host: User,
    fan: User,
    /// Users who post chat, ten messages each (the per-user limit is 10 in 10 s).
    chatters: Vec<User>,
    broadcast: String,
    layout: String,
}

impl Fixture {
    async fn new(p: &Platform) -> Fixture {
        let tenant = p.register_client("Counted").await;
        let host = p.signup(&tenant, "host").await;
        let fan = p.signup_with_tokens(&tenant, "fan", 1_000_000_000).await;
        let mut chatters = Vec::new();
        for i in 0..env_or("REQUESTS", 50usize).div_ceil(10) + 1 {
            chatters.push(p.signup(&tenant, &format!("chatter{i}")).await);
        }
        let body = json!({"name": "Rose", "priceTokens": 10});
        let (status, gift) = p
            .as_server(&tenant, Method::PUT, "/api/v1/gifts/rose", Some(&body))
            .answer()
            .await;
        assert_eq!(status, 200, "the gift: {gift}");
        let live = p.live_broadcast(&host, "public").await;
        let broadcast = live["id"].as_str().expect("the broadcast's id").to_string();
        let stream = live["streamId"].as_str().expect("the stream id");
        let page = p
            .request(Method::GET, &format!("/streams/{stream}/record"))
            .send()
            .await
            .expect("the record page");
        let html = page.text().await.expect("the page's body");
        let layout =
            platform_tests::script_url(&html, "/static/layout.").expect("layout.js is referenced");
        Fixture {
            tenant,
            host,
            fan,
            chatters,
            broadcast,
            layout,
        }
    }
}

/// A route and how its `n`th request is built.
struct Route {
    name: &'static str,
    request: fn(&Platform, &Fixture, usize) -> reqwest::RequestBuilder,
}

const ROUTES: &[Route] = &[
    Route {
        name: "asset (layout.js)",
        request: |p, f, _| p.request(Method::GET, &f.layout),
    },
    Route {
        name: "API-key read",
        request: |p, f, _| p.as_client(&f.tenant, Method::GET, "/api/streaming/providers"),
    },
    Route {
        name: "profile read",
        request: |p, f, _| p.as_user(&f.fan, Method::GET, "/api/users/profile/full"),
    },
    Route {
        name: "broadcast create",
        request: |p, f, _| {
            p.as_user(&f.host, Method::POST, "/api/broadcasts")
                .json(&json!({"title": "counted"}))
        },
    },
    Route {
        name: "broadcast read",
        request: |p, f, _| {
            p.as_user(
                &f.fan,
                Method::GET,
                &format!("/api/broadcasts/{}", f.broadcast),
            )
        },
    },
    Route {
        name: "live listing",
        request: |p, f, _| p.as_client(&f.tenant, Method::GET, "/api/broadcasts/live"),
    },
    Route {
        name: "chat post",
        request: |p, f, n| {
            let path = format!("/api/broadcasts/{}/chat", f.broadcast);
            p.as_user(&f.chatters[n / 10 % f.chatters.len()], Method::POST, &path)
                .json(&json!({"message": format!("hello {n}")}))
        },
    },
    Route {
        name: "gift",
        request: |p, f, n| {
            static RUN: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
            let run = RUN.get_or_init(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos())
            });
            let path = format!("/api/broadcasts/{}/gifts", f.broadcast);
            p.as_user(&f.fan, Method::POST, &path)
                .header("idempotency-key", format!("counted-{run}-{n}"))
                .json(&json!({"giftId": "rose"}))
        },
    },
    Route {
        name: "SFU token",
        request: |p, f, _| {
            let path = format!("/api/streaming/sessions/{}/token", f.broadcast);
            p.as_user(&f.fan, Method::POST, &path)
                .json(&json!({"role": "subscriber"}))
        },
    },
];

/// One route's counts over its timed requests.
struct Measured {
    pg: Counts,
    kv: Counts,
    latencies: Vec<Duration>,
    statuses: std::collections::BTreeMap<u16, usize>,
}

async fn measure(
    p: &Platform,
    f: &Fixture,
    route: &Route,
    requests: usize,
    pg: &CountingProxy,
    kv: &CountingProxy,
) -> Measured {
    // The first requests prepare what later ones reuse (a pool's connections, a guest's
    // compiled module): they are not counted.
    let warm_up = 3;
    for n in 0..warm_up {
        let _ = (route.request)(p, f, n).send().await;
    }
    let (pg_before, kv_before) = (pg.snapshot(), kv.snapshot());
    let mut latencies = Vec::with_capacity(requests);
    let mut statuses = std::collections::BTreeMap::new();
    for n in warm_up..warm_up + requests {
        let started = Instant::now();
        let answer = (route.request)(p, f, n).send().await.expect("an answer");
        let status = answer.status().as_u16();
        let _ = answer.bytes().await;
        latencies.push(started.elapsed());
        *statuses.entry(status).or_default() += 1;
    }
    // The proxies count an exchange when its answer passes; the host may still be
    // giving a connection back.
    tokio::time::sleep(Duration::from_millis(50)).await;
    Measured {
        pg: pg.snapshot().since(&pg_before),
        kv: kv.snapshot().since(&kv_before),
        latencies,
        statuses,
    }
}

impl Measured {
    fn print(&self, name: &str, requests: usize) {
        let per = |n: u64| n as f64 / requests as f64;
        let per_ms = |d: Duration| d.as_secs_f64() * 1e3 / requests as f64;
        let opens = self
            .pg
            .statements
            .iter()
            .filter(|(text, _)| text.starts_with("CLOSE ALL"))
            .map(|(_, n)| *n)
            .sum::<u64>();
        let (pg, kv) = (self.pg.waited(), self.kv.waited());
        let statements = self.pg.of("prepare").count;
        let mut latencies = self.latencies.clone();
        latencies.sort();
        let p50 = latencies[latencies.len() / 2];
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(s, n)| format!("{s}x{n}"))
            .collect();
        println!(
            "{name:<22} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>7.2} {:>5.2} {:>7.2} {:>7.2}  {}",
            per(self.pg.connections),
            per(opens),
            per(statements),
            per(pg.count),
            per(self.pg.of("close").count),
            per_ms(pg.waited),
            per(kv.count),
            per_ms(kv.waited),
            p50.as_secs_f64() * 1e3,
            statuses.join(" ")
        );
    }
}
