//! What the moderation checks cost a chat post. Every post runs them in the API
//! (`moderation::screen`): the poster's restrictions, whether they moderate, the stream's
//! modes, following, the creator's and the tenant's blocked words, slow mode. A moderator
//! is exempt after the first two reads, so the difference between a viewer's post on a
//! stream with every rule on (500 blocked words per list, followers-only, slow mode) and a
//! moderator's post on the same stream is what the rest of the checks add. Also measured:
//! the word filter alone on a 200-character message against 1000 patterns.
//!
//! `cargo bench -p platform-tests --bench moderation --profile host` (env: POSTS=400, and
//! WORDS=500, the blocked words per list: 0 shows what the lists' reading and matching cost)

use domain::word_filter::{Blocklist, compile, is_blocked};
use platform_tests::{Exchange, Method, Platform, User, env_or};
use serde_json::json;
use std::time::{Duration, Instant};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

/// Prints and answers (p50, p99).
fn report(label: &str, mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let (p50, p99) = (percentile(&samples, 0.5), percentile(&samples, 0.99));
    println!(
        "{label:<58} n={:<5} p50 {:>8.3} ms  p99 {:>8.3} ms",
        samples.len(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    (p50, p99)
}

/// `posts` chat posts by `users` in turn, `per_round` each per round; the clock moves
/// past the slow-mode and rate windows between rounds, so every post is accepted.
async fn posts(
    p: &Platform,
    path: &str,
    users: &[User],
    per_round: usize,
    posts: usize,
) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(posts);
    let mut i = 0;
    while samples.len() < posts {
        for user in users.iter().flat_map(|u| std::iter::repeat_n(u, per_round)) {
            let message = format!("message number {i} with some ordinary words in it");
            let started = Instant::now();
            let (status, body) = p
                .as_user(user, Method::POST, path)
                .send_json(&json!({ "message": message }))
                .await;
            samples.push(started.elapsed());
            assert_eq!(status, 200, "{body}");
            i += 1;
        }
        p.advance_clock(Duration::from_secs(11));
    }
    samples
}

fn words(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}x")).collect()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let n: usize = env_or("POSTS", 400);
    let per_list: usize = env_or("WORDS", 500);

    // The word filter alone: two stored lists of 500, read and matched as a post does.
    let stored = [
        compile(&words("creator", 500)),
        compile(&words("tenant", 500)),
    ];
    let message = "so this is a perfectly normal chat message, nothing to see here, \
                   just a few words about the show and the music and the weather today ok"
        .repeat(2);
    let mut filter = Vec::new();
    for _ in 0..2000 {
        let started = Instant::now();
        let lists: Vec<Blocklist> = stored.iter().filter_map(|c| Blocklist::parse(c)).collect();
        assert!(!is_blocked(&message, &lists));
        filter.push(started.elapsed());
    }
    report(
        "word filter: 2x500 stored patterns, 200-char message",
        filter,
    );
    // Compiling a list, once when it is saved.
    let sources = words("blocked", 500);
    let mut prepare = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        let compiled = compile(&sources);
        prepare.push(started.elapsed());
        assert_eq!(compiled.lines().count(), 501);
    }
    report("compiling a list of 500 (when it is saved)", prepare);

    let p = Platform::start().await;
    let t = p.register_client("Bench").await;
    let owner = p.signup(&t, "owner").await;
    let mut viewers = Vec::new();
    for i in 0..5 {
        viewers.push(p.signup(&t, &format!("viewer{i}")).await);
    }
    let (status, b) = p
        .as_user(&owner, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Bench"}))
        .await;
    assert_eq!(status, 200, "{b}");
    let chat = format!("/api/streams/{}/chat", b["streamId"].as_str().unwrap());
    for v in &viewers {
        let (status, _) = p
            .as_user(v, Method::POST, &format!("/api/users/follow/{}", owner.id))
            .answer()
            .await;
        assert_eq!(status, 200);
    }
    let (status, _) = p
        .as_user(&owner, Method::PUT, "/api/users/me/chat/blocked-words")
        .send_json(&json!({"words": words("creator", per_list), "action": "reject"}))
        .await;
    assert_eq!(status, 200);
    let (status, _) = p
        .as_server(
            &t,
            Method::PUT,
            "/api/v1/chat/blocked-words",
            Some(&json!({"words": words("tenant", per_list)})),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    let (status, _) = p
        .as_user(&owner, Method::PUT, &format!("{chat}/settings"))
        .send_json(&json!({"slowModeSeconds": 10, "followersOnlyMinutes": 0}))
        .await;
    assert_eq!(status, 200);

    // Warm up both paths, then alternate the measured rounds so drift hits both alike.
    let owner_only = std::slice::from_ref(&owner);
    posts(&p, &chat, &viewers, 1, 50).await;
    posts(&p, &chat, owner_only, 10, 20).await;
    let (mut checked, mut exempt) = (Vec::new(), Vec::new());
    for _ in 0..4 {
        checked.extend(posts(&p, &chat, &viewers, 1, n / 4).await);
        exempt.extend(posts(&p, &chat, owner_only, 10, n / 4).await);
    }
    let exempt = report(
        "chat post, moderator (exempt: restriction + role reads)",
        exempt,
    );
    let checked = report(
        &format!("chat post, viewer (every check, 2x{per_list} words, slow mode)"),
        checked,
    );
    let ms = |a: Duration, b: Duration| (a.as_secs_f64() - b.as_secs_f64()) * 1e3;
    println!(
        "added by the checks past the exemption: p50 {:.3} ms, p99 {:.3} ms",
        ms(checked.0, exempt.0),
        ms(checked.1, exempt.1)
    );
    p.stop().await;
}
