//! Faults under load, on both back ends: the database going away while 64 clients create
//! broadcasts and send gifts (PostgreSQL stopped and started again; on SQLite, the state
//! directory's disk filling up and emptying), and the key-value store's Redis killed and
//! started again under file uploads. Every acknowledged write is there afterwards, the
//! ledger's invariants hold, and what fails in between is 503 with `Retry-After`, never
//! 500. Each test prints its figures; docs/reliability.md records them.
//!
//! The faults take a whole server or disk, so the tests of this suite run one at a time.

use platform_tests::{Exchange, Method, Platform, User, backends};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

static ONE_FAULT_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const CLIENTS: usize = 64;
const FANS: usize = 16;
const GIFT_PRICE: i64 = 10;
const FAN_TOKENS: i64 = 1_000_000;
/// `store::idempotency::CLAIM_LEASE_SECS`.
const CLAIM_LEASE_SECS: i64 = 120;
/// How long the load runs before the fault, the fault itself, and after it.
const BEFORE: Duration = Duration::from_secs(4);
const OUTAGE: Duration = Duration::from_secs(3);
const AFTER: Duration = Duration::from_secs(4);

/// One answer the platform gave.
#[derive(Debug, Clone)]
struct Answer {
    /// When it was sent: before the fault (0), during it (1) or after it (2).
    phase: u8,
    status: u16,
    retry_after: Option<String>,
    body: Value,
}

async fn answer(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.expect("the platform answers");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response.json().await.unwrap_or(Value::Null);
    Answer {
        phase: 0,
        status,
        retry_after,
        body,
    }
}

/// A refusal the client is meant to retry: 503, saying when.
fn is_retryable(a: &Answer) -> bool {
    a.status == 503
        && a.retry_after
            .as_deref()
            .is_some_and(|s| s.parse::<u32>().is_ok())
}

/// The state directory's own small file system, so that the test can fill it.
struct SmallDisk {
    mount: PathBuf,
}

impl SmallDisk {
    const SIZE_MIB: u32 = 96;

    fn mount() -> SmallDisk {
        let mount = std::env::temp_dir().join(format!("faults-disk-{}", std::process::id()));
        std::fs::create_dir_all(&mount).expect("create the mount point");
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={}m", Self::SIZE_MIB)])
            .arg("tmpfs")
            .arg(&mount)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "the disk-full fault mounts a small tmpfs for the state directory, which needs \
             root (CAP_SYS_ADMIN): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk { mount }
    }

    /// Writes a file until the disk is full; answers it.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.mount.join("filler");
        let mut file = std::fs::File::create(&path).expect("create the filler");
        let chunk = vec![0u8; 256 * 1024];
        loop {
            if let Err(e) = file.write_all(&chunk) {
                assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
                break;
            }
        }
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.mount)
            .status();
        let _ = std::fs::remove_dir(&self.mount);
    }
}

/// The fault the database suffers on this back end.
enum DatabaseFault {
    /// PostgreSQL stopped as an operator's restart does, down for `OUTAGE`.
    Restart,
    /// The disk under SQLite full for `OUTAGE`.
    DiskFull(SmallDisk),
}

impl DatabaseFault {
    fn name(&self) -> &'static str {
        match self {
            DatabaseFault::Restart => "PostgreSQL stopped and started",
            DatabaseFault::DiskFull(_) => "the SQLite state disk full",
        }
    }

    async fn strike(&self) {
        match self {
            DatabaseFault::Restart => {
                backends::PostgresCluster::shared()
                    .await
                    .outage(OUTAGE)
                    .await;
            }
            DatabaseFault::DiskFull(disk) => {
                let filler = disk.fill();
                tokio::time::sleep(OUTAGE).await;
                std::fs::remove_file(filler).expect("remove the filler");
            }
        }
    }
}

/// What the load saw: every answer, by kind, and when the fault was on.
#[derive(Default)]
struct Tally {
    creates: Vec<Answer>,
    gifts: Vec<(String, Answer)>,
    reads: Vec<Answer>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_database_going_away_under_load_loses_nothing_acknowledged() {
    let _one = ONE_FAULT_AT_A_TIME.lock().await;
    let (fault, state) = match backends::Backend::selected() {
        backends::Backend::Postgres => (DatabaseFault::Restart, tempfile::tempdir().unwrap()),
        backends::Backend::Sqlite => {
            let disk = SmallDisk::mount();
            let state = tempfile::tempdir_in(&disk.mount).expect("state on the small disk");
            (DatabaseFault::DiskFull(disk), state)
        }
    };
    let p = Arc::new(Platform::start_for_faults(state, None, &[]).await);
    let t = p.register_client("Faults").await;
    let host = p.signup(&t, "host").await;
    let mut fans = Vec::new();
    for n in 0..FANS {
        let fan = p.signup(&t, &format!("fan{n}")).await;
        let (status, credited) = p
            .as_server(
                &t,
                Method::POST,
                &format!("/api/v1/wallets/{}/credits", fan.id),
                Some(&json!({"tokens": FAN_TOKENS, "reference": format!("receipt-{n}")})),
            )
            .header("idempotency-key", format!("credit-{n}"))
            .answer()
            .await;
        assert_eq!(status, 201, "{credited}");
        fans.push(fan);
    }
    let body = json!({"name": "rose", "priceTokens": GIFT_PRICE, "animation": "large"});
    let (status, gift) = p
        .as_server(&t, Method::PUT, "/api/v1/gifts/rose", Some(&body))
        .answer()
        .await;
    assert_eq!(status, 200, "{gift}");
    let show = live_broadcast(&p, &host).await;
    // Warm the platform's database connections first, so that "before" measures the load
    // and not their set-up.
    futures_util::future::join_all((0..CLIENTS).map(|i| {
        p.as_user(&fans[i % FANS], Method::GET, "/api/wallet")
            .status()
    }))
    .await;
    let fans = Arc::new(fans);

    let running = Arc::new(AtomicBool::new(true));
    let phase = Arc::new(AtomicU8::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (p, fans, show) = (p.clone(), fans.clone(), show.clone());
            let (running, phase) = (running.clone(), phase.clone());
            let sent = move |mut a: Answer, at: u8| {
                a.phase = at;
                a
            };
            tokio::spawn(async move {
                let fan = &fans[i % FANS];
                let mut tally = Tally::default();
                let mut n = 0u64;
                while running.load(Ordering::SeqCst) {
                    n += 1;
                    let at = phase.load(Ordering::SeqCst);
                    match n % 3 {
                        0 => {
                            let request = p
                                .as_user(fan, Method::POST, "/api/broadcasts")
                                .json(&json!({"title": format!("client {i} #{n}")}));
                            tally.creates.push(sent(answer(request).await, at));
                        }
                        1 => {
                            let key = format!("gift-{i}-{n}");
                            let request = p
                                .as_user(
                                    fan,
                                    Method::POST,
                                    &format!("/api/broadcasts/{show}/gifts"),
                                )
                                .header("idempotency-key", &key)
                                .json(&json!({"giftId": "rose"}));
                            tally.gifts.push((key, sent(answer(request).await, at)));
                        }
                        _ => {
                            let request =
                                p.as_user(fan, Method::GET, &format!("/api/broadcasts/{show}"));
                            tally.reads.push(sent(answer(request).await, at));
                        }
                    }
                }
                tally
            })
        })
        .collect();

    tokio::time::sleep(BEFORE).await;
    let struck = Instant::now();
    phase.store(1, Ordering::SeqCst);
    fault.strike().await;
    phase.store(2, Ordering::SeqCst);
    let down_for = struck.elapsed();
    tokio::time::sleep(AFTER).await;
    running.store(false, Ordering::SeqCst);
    let mut tally = Tally::default();
    for client in clients {
        let t = client.await.expect("a client");
        tally.creates.extend(t.creates);
        tally.gifts.extend(t.gifts);
        tally.reads.extend(t.reads);
    }

    // Nothing but success or a retryable refusal, ever.
    let all = tally
        .creates
        .iter()
        .chain(tally.gifts.iter().map(|(_, a)| a))
        .chain(tally.reads.iter());
    let unexpected: Vec<&Answer> = all
        .filter(|a| !matches!(a.status, 200 | 201) && !is_retryable(a))
        .collect();
    assert!(
        unexpected.is_empty(),
        "{} answers were neither success nor 503 with Retry-After, e.g. {:?}",
        unexpected.len(),
        &unexpected[..unexpected.len().min(3)]
    );
    let refused =
        |answers: &mut dyn Iterator<Item = &Answer>| answers.filter(|a| a.status == 503).count();
    let creates_refused = refused(&mut tally.creates.iter());
    let gifts_refused = refused(&mut tally.gifts.iter().map(|(_, a)| a));
    assert!(
        creates_refused + gifts_refused > 0,
        "the fault refused no write: it did not strike"
    );
    for (_, a) in tally.gifts.iter().filter(|(_, a)| a.status == 503) {
        assert_eq!(a.body["code"], "database_unavailable", "{:?}", a);
    }

    // Every acknowledged broadcast is there.
    let created: Vec<&str> = tally
        .creates
        .iter()
        .filter(|a| a.status == 200)
        .map(|a| a.body["id"].as_str().expect("a created broadcast's id"))
        .collect();
    for id in &created {
        let (status, b) = p
            .as_user(&host, Method::GET, &format!("/api/broadcasts/{id}"))
            .answer()
            .await;
        assert_eq!(status, 200, "acknowledged broadcast {id} is gone: {b}");
    }
    // A refused gift retried with its key is sent once (or was sent already, if only its
    // answer was lost); then every fan paid exactly for the gifts acknowledged. A request
    // that claimed its key and then lost the database could not release it: the retry
    // comes after the claim's lease.
    // The show's owner keeps it alive across that time (a broadcast without a heartbeat
    // for 90 s ends in `error`).
    for _ in 0..2 {
        p.advance_clock(Duration::from_secs(CLAIM_LEASE_SECS as u64 / 2 + 1));
        let (status, beat) = p
            .as_user(
                &host,
                Method::POST,
                &format!("/api/sessions/{show}/heartbeat"),
            )
            .answer()
            .await;
        assert_eq!(status, 200, "{beat}");
    }
    let mut acknowledged = tally.gifts.iter().filter(|(_, a)| a.status == 201).count();
    for (key, _) in tally.gifts.iter().filter(|(_, a)| a.status == 503) {
        let i: usize = key.split('-').nth(1).unwrap().parse().unwrap();
        let retry = p
            .as_user(
                &fans[i % FANS],
                Method::POST,
                &format!("/api/broadcasts/{show}/gifts"),
            )
            .header("idempotency-key", key)
            .json(&json!({"giftId": "rose"}));
        let a = answer(retry).await;
        assert_eq!(a.status, 201, "the retry of {key}: {a:?}");
        acknowledged += 1;
    }
    let mut spent = 0;
    for fan in fans.iter() {
        let w = wallet(&p, fan).await;
        spent += FAN_TOKENS - w["tokens"].as_i64().unwrap();
    }
    assert_eq!(
        spent,
        GIFT_PRICE * acknowledged as i64,
        "the fans paid for exactly the gifts acknowledged"
    );
    // The host earns 50 diamonds per 100 tokens (the default rate).
    assert_eq!(
        wallet(&p, &host).await["diamonds"].as_i64().unwrap(),
        GIFT_PRICE * acknowledged as i64 / 2
    );
    let check = p.run_job("check-ledger").await;
    assert_eq!(check["ok"], true, "{check}");

    let reads_during = tally.reads.iter().filter(|a| a.phase == 1).count();
    let reads_served = tally
        .reads
        .iter()
        .filter(|a| a.phase == 1 && a.status == 200)
        .count();
    if let DatabaseFault::DiskFull(_) = fault {
        // A full disk stops writes, not reads.
        assert_eq!(
            reads_served, reads_during,
            "reads go on while the disk is full"
        );
    }
    // Writes acknowledged per second before, during and after the fault.
    let rate = |at: u8, seconds: f64| {
        let done = tally
            .creates
            .iter()
            .filter(|a| a.phase == at && a.status == 200)
            .count()
            + tally
                .gifts
                .iter()
                .filter(|(_, a)| a.phase == at && a.status == 201)
                .count();
        done as f64 / seconds
    };
    println!(
        "faults: {} for {:.1} s under {CLIENTS} clients: {} broadcast creates ({} refused \
         with 503), {} gifts ({} refused with 503, all sent once on retry); writes \
         acknowledged per second before / during / after: {:.0} / {:.0} / {:.0}; reads \
         during the fault: {} ({} served); acknowledged writes lost: 0; 500s: 0",
        fault.name(),
        down_for.as_secs_f64(),
        tally.creates.len(),
        creates_refused,
        tally.gifts.len(),
        gifts_refused,
        rate(0, BEFORE.as_secs_f64()),
        rate(1, down_for.as_secs_f64()),
        rate(2, AFTER.as_secs_f64()),
        reads_during,
        reads_served,
    );
    drop(_one);
    Arc::try_unwrap(p)
        .ok()
        .expect("no client holds the platform")
        .stop()
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn file_storage_going_away_is_503_and_keeps_what_it_acknowledged() {
    let _one = ONE_FAULT_AT_A_TIME.lock().await;
    let mut redis = backends::OwnRedis::start_durable().await;
    let state = tempfile::tempdir().unwrap();
    let p = Platform::start_for_faults(state, Some(redis.url()), &[]).await;
    let t = p.register_client("Files").await;
    let ada = p.signup(&t, "ada").await;
    let content: Vec<u8> = (0..200_000u32).map(|n| (n % 251) as u8).collect();
    let kept = upload(&p, &ada, &content).await;
    assert_eq!(kept.status, 201, "{:?}", kept.body);
    let kept_id = kept.body["id"].as_str().unwrap().to_string();

    redis.stop();
    let refused = upload(&p, &ada, &content).await;
    assert!(is_retryable(&refused), "{refused:?}");
    assert_eq!(refused.body["code"], "storage_unavailable");
    let download =
        answer(p.as_user(&ada, Method::GET, &format!("/api/files/{kept_id}/download"))).await;
    assert!(is_retryable(&download), "{download:?}");
    // What lives in SQL still answers.
    let (status, listed) = p.as_user(&ada, Method::GET, "/api/files").answer().await;
    assert_eq!(status, 200, "{listed}");

    redis.launch().await;
    let bytes = p
        .as_user(&ada, Method::GET, &format!("/api/files/{kept_id}/download"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(
        bytes.as_ref(),
        content.as_slice(),
        "the acknowledged file came back whole"
    );
    let again = upload(&p, &ada, &content).await;
    assert_eq!(again.status, 201, "{:?}", again.body);
    // The refused upload left no file behind.
    let (_, listed) = p.as_user(&ada, Method::GET, "/api/files").answer().await;
    assert_eq!(listed["total"], 2, "{listed}");
    println!(
        "faults: Redis under the key-value store killed and restarted: uploads and downloads 503 with Retry-After while down, the acknowledged file intact after"
    );
    p.stop().await;
}

async fn upload(p: &Platform, user: &User, content: &[u8]) -> Answer {
    answer(
        p.as_user(user, Method::POST, "/api/files?filename=clip.bin")
            .header("content-type", "application/octet-stream")
            .body(content.to_vec()),
    )
    .await
}

async fn wallet(p: &Platform, user: &User) -> Value {
    let (status, w) = p.as_user(user, Method::GET, "/api/wallet").answer().await;
    assert_eq!(status, 200, "{w}");
    w
}

/// A public broadcast of `owner`, live; answers its id.
async fn live_broadcast(p: &Platform, owner: &User) -> String {
    let live = p.live_broadcast(owner, "public").await;
    live["id"].as_str().unwrap().to_string()
}
