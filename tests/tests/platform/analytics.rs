//! Analytics end to end, with the components' clock moved forward: a scripted hour of a
//! broadcast that crosses midnight UTC (viewer reports, SFU joins and leaves with a
//! rejoin, chat with a deletion, reactions, a follow), every number checked against hand
//! computation; the daily roll-up, the creator's and the tenant's series, CSV, and who may
//! read what; the dashboard page in headless Chromium.
//!
//! The clock is only moved forward, and real time runs on while the test runs, so every
//! instant lands up to `drift` seconds after its planned time; events are planned 5 s into
//! their minute, and time spans are checked to within the drift the test measured.

use crate::support::browser;

use base64::Engine;
use browser::Browser;
use livekit_api::access_token::AccessToken;
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

const SFU_KEY: &str = "APIanalyticskey";
const SFU_SECRET: &str = "analytics-sfu-secret-long-enough-0123456789abcdef";
const JOBS_TOKEN: &str = "analytics-jobs-token-0123456789";
const DAY: i64 = 86_400;

/// The scripted broadcast: the platform, its timeline, and the broadcast's ids.
struct Script<'a> {
    p: &'a Platform,
    /// The planned instant the clock stands at now (the real one is up to `drift` later).
    planned: i64,
    /// Where minute 0 of the script starts: 23:30:00 UTC.
    start_minute: i64,
    id: String,
    stream_id: String,
    webhooks: u32,
}

impl Script<'_> {
    /// Moves the clock to `second` seconds after the script's start minute.
    fn at(&mut self, second: i64) {
        let target = self.start_minute + second;
        assert!(target >= self.planned, "the script runs forward");
        if target > self.planned {
            self.p
                .advance_clock(Duration::from_secs((target - self.planned) as u64));
            self.planned = target;
        }
    }

    /// Moves to 5 s into script minute `minute`, keeping the broadcast's heartbeat fresh on
    /// the way (it goes stale after 90 s without one).
    async fn minute(&mut self, owner: &User, minute: i64) {
        let target = minute * 60 + 5;
        while self.planned < self.start_minute + target {
            let step = (self.start_minute + target - self.planned).min(60);
            self.at(self.planned - self.start_minute + step);
            let path = format!("/api/sessions/{}/heartbeat", self.id);
            let (status, body) = self.p.as_user(owner, Method::POST, &path).answer().await;
            assert_eq!(status, 200, "{body}");
        }
    }

    async fn report(&self, owner: &User, viewers: i64) {
        let path = format!("/api/broadcasts/{}/viewer-count", self.id);
        let (status, body) = self
            .p
            .as_user(owner, Method::POST, &path)
            .send_json(&json!({ "viewerCount": viewers }))
            .await;
        assert_eq!(status, 200, "{body}");
    }

    /// A participant webhook, signed as LiveKit signs them.
    async fn participant(&mut self, event: &str, identity: &str, role: &str) -> Value {
        self.webhooks += 1;
        let body = json!({
            "id": format!("EV_{}", self.webhooks),
            "event": event,
            "room": {"name": self.stream_id},
            "participant": {"identity": identity, "metadata": json!({"role": role}).to_string()},
        })
        .to_string();
        let digest =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(body.as_bytes()));
        let jwt = AccessToken::with_api_key(SFU_KEY, SFU_SECRET)
            .with_ttl(Duration::from_secs(3 * DAY as u64))
            .with_sha256(&digest)
            .to_jwt()
            .unwrap();
        let (status, answer) = self
            .p
            .request(
                Method::POST,
                &format!("/api/streaming/sessions/{}/participants/events", self.id),
            )
            .header("authorization", jwt)
            .header("content-type", "application/webhook+json")
            .body(body)
            .answer()
            .await;
        assert_eq!(status, 200, "{answer}");
        answer
    }

    async fn chat(&self, user: &User, text: &str) -> String {
        let path = format!("/api/broadcasts/{}/chat", self.id);
        let (status, body) = self
            .p
            .as_user(user, Method::POST, &path)
            .send_json(&json!({ "message": text }))
            .await;
        assert_eq!(status, 200, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    async fn react(&self, user: &User, reaction: &str) {
        let path = format!("/api/v1/sessions/{}/reactions", self.id);
        let (status, body) = self
            .p
            .as_user(user, Method::POST, &path)
            .send_json(&json!({ "reaction": reaction }))
            .await;
        assert_eq!(status, 200, "{body}");
    }

    async fn analytics(&self, user: &User, query: &str) -> Value {
        let path = format!("/api/broadcasts/{}/analytics{query}", self.id);
        let (status, body) = self.p.as_user(user, Method::GET, &path).answer().await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

/// A fresh access token for `user` (the scripted hour outlives the first one).
async fn refreshed(p: &Platform, user: &mut User) {
    let (status, body) = p
        .request(Method::POST, "/api/users/refresh")
        .header("x-api-key", &user.api_key)
        .json(&json!({ "refreshToken": user.refresh_token }))
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    user.token = body["token"].as_str().unwrap().to_string();
    user.refresh_token = body["refreshToken"].as_str().unwrap().to_string();
}

/// `value` within `slack` of `expected`.
fn near(value: &Value, expected: f64, slack: f64, what: &str) {
    let got = value
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: {value} is a number"));
    assert!(
        (got - expected).abs() <= slack,
        "{what}: {got}, expected {expected} ± {slack}"
    );
}

async fn run_job(p: &Platform) -> Value {
    let (status, body) = p
        .request(Method::POST, "/api/jobs/rollup-analytics")
        .bearer_auth(JOBS_TOKEN)
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn server_get(p: &Platform, t: &Tenant, path: &str) -> (u16, Value) {
    let (status, body) = p.as_server(t, Method::GET, path, None).answer().await;
    (status.as_u16(), body)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scripted_hour_across_midnight_adds_up() {
    let begun = Instant::now();
    let p = Platform::start_with(&[
        ("sfu_api_key", SFU_KEY),
        ("sfu_api_secret", SFU_SECRET),
        ("jobs_token", JOBS_TOKEN),
    ])
    .await;
    let t = p.register_client("Acme").await;
    let other = p.register_client("Other").await;

    // Align the clock: minute 0 of the script is 23:30:00 UTC of the coming midnight's
    // day, so minute 30 is 00:00 of the next day.
    let now = p.now();
    let mut midnight = (now / DAY + 1) * DAY;
    if midnight - 1800 <= now + 5 {
        midnight += DAY;
    }
    let start_minute = midnight - 1800;
    p.advance_clock(Duration::from_secs((start_minute - now) as u64));
    let mut s = Script {
        p: &p,
        planned: start_minute,
        start_minute,
        id: String::new(),
        stream_id: String::new(),
        webhooks: 0,
    };
    s.at(5);

    // Signed up on the script's first day: new and active users of that day.
    let mut ada = p.signup(&t, "ada").await;
    let mut bob = p.signup(&t, "bob").await;
    let mut carol = p.signup(&t, "carol").await;
    let mut dave = p.signup(&t, "dave").await;
    let mut eve = p.signup(&t, "eve").await;
    let (status, created) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Late show", "visibility": "public"}))
        .await;
    assert_eq!(status, 200, "{created}");
    s.id = created["id"].as_str().unwrap().to_string();
    s.stream_id = created["streamId"].as_str().unwrap().to_string();
    let (status, live) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/broadcasts/{}/status", s.id),
        )
        .send_json(&json!({"status": "active"}))
        .await;
    assert_eq!(status, 200, "{live}");

    // Minute 0 (23:30:05): a report of 3; viewers v1 and v2 join. The host's own
    // connection and a publishing co-host are not viewers.
    s.report(&ada, 3).await;
    s.participant("participant_joined", "v1", "subscriber")
        .await;
    s.participant("participant_joined", "v2", "subscriber")
        .await;
    s.participant("participant_joined", &ada.id, "publisher")
        .await;
    // Minute 1: reports of 5 and 7 (min 5, max 7, mean 6).
    s.minute(&ada, 1).await;
    s.report(&ada, 5).await;
    s.at(60 + 20);
    s.report(&ada, 7).await;
    // Minute 2: three messages (bob twice, carol), three reactions.
    s.minute(&ada, 2).await;
    s.chat(&bob, "hi").await;
    let carols = s.chat(&carol, "yo").await;
    s.chat(&bob, "again").await;
    s.react(&bob, "heart").await;
    s.react(&carol, "heart").await;
    s.react(&dave, "sparkle").await;
    // Minute 3: the owner deletes carol's message; it no longer counts, she still chatted.
    s.minute(&ada, 3).await;
    let path = format!("/api/streams/{}/chat/{carols}", s.stream_id);
    let (status, body) = p.as_user(&ada, Method::DELETE, &path).answer().await;
    assert_eq!(status, 200, "{body}");
    // Minute 10: v1 leaves (600 s); minute 15: v1 is back (a second session).
    s.minute(&ada, 10).await;
    s.participant("participant_left", "v1", "subscriber").await;
    s.minute(&ada, 15).await;
    s.participant("participant_joined", "v1", "subscriber")
        .await;
    s.participant("participant_joined", "co", "co_host").await;
    // Minute 20: v3 joins; minute 25: v2 leaves (1500 s).
    s.minute(&ada, 20).await;
    s.participant("participant_joined", "v3", "subscriber")
        .await;
    s.minute(&ada, 25).await;
    s.participant("participant_left", "v2", "subscriber").await;
    // Minute 29 (23:59:05): the peak report, a message, a reaction.
    s.minute(&ada, 29).await;
    s.report(&ada, 10).await;
    s.chat(&bob, "almost midnight").await;
    s.react(&eve, "thumbs_up").await;
    // Minute 30 (00:00:05): the numbers so far, while live.
    s.minute(&ada, 30).await;
    for u in [&mut ada, &mut bob, &mut carol, &mut dave, &mut eve] {
        refreshed(&p, u).await;
    }
    let so_far = s.analytics(&ada, "").await;
    let drift = begun.elapsed().as_secs_f64().ceil() + 1.0;
    assert_eq!(so_far["status"], "active");
    assert_eq!(so_far["uniqueViewers"], 3);
    assert_eq!(so_far["viewerSessions"], 4);
    // v1 600 + 900, v2 1500, v3 600 so far.
    near(
        &so_far["totalWatchSeconds"],
        3600.0,
        4.0 * drift,
        "watch so far",
    );
    assert_eq!(so_far["chatMessages"], 3);
    // Minute 31 (00:01:05): dave's first message, a report of 4.
    s.minute(&ada, 31).await;
    s.chat(&dave, "happy new day").await;
    s.report(&ada, 4).await;
    // Minute 40: v1 leaves again (1500 s); minute 50: a repeated join of v3 and a leave of
    // someone never seen change nothing.
    s.minute(&ada, 40).await;
    s.participant("participant_left", "v1", "subscriber").await;
    s.minute(&ada, 50).await;
    s.participant("participant_joined", "v3", "subscriber")
        .await;
    s.participant("participant_left", "v9", "subscriber").await;
    // Minute 55: eve follows ada during the broadcast.
    s.minute(&ada, 55).await;
    let (status, body) = p
        .as_user(&eve, Method::POST, &format!("/api/users/follow/{}", ada.id))
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    // Minute 60 (00:30:05): the end; v3 is still watching (2400 s, to the end).
    s.minute(&ada, 60).await;
    let (status, body) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/broadcasts/{}/status", s.id),
        )
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let drift = begun.elapsed().as_secs_f64().ceil() + 1.0;

    // The summary, by hand: reports 3, 5, 7, 10, 4.
    let a = s.analytics(&ada, "").await;
    near(&a["durationSeconds"], 3600.0, drift, "duration");
    assert_eq!(a["peakViewers"], 10);
    assert_eq!(a["peakConcurrentViewers"], 10);
    assert_eq!(a["averageViewers"], 5.8);
    assert_eq!(a["meanConcurrentViewers"], 5.8);
    assert_eq!(a["viewerReports"], 5);
    assert_eq!(a["uniqueViewers"], 3, "v1 twice is one viewer");
    assert_eq!(a["viewerSessions"], 4);
    // v1 600 + 1500, v2 1500, v3 2400.
    near(&a["totalWatchSeconds"], 6000.0, 4.0 * drift, "total watch");
    near(&a["meanWatchSeconds"], 2000.0, 2.0 * drift, "mean watch");
    assert_eq!(a["chatMessages"], 4, "five sent, one deleted");
    assert_eq!(a["messages"], 4);
    assert_eq!(a["chatters"], 3, "bob, carol, dave");
    assert_eq!(
        a["reactions"],
        json!({"heart": 2, "sparkle": 1, "thumbs_up": 1, "surprised": 0})
    );
    assert_eq!(a["reactionsTotal"], 4);
    assert_eq!(a["followsGained"], 1);
    assert_eq!(
        (a["gifts"].clone(), a["giftTokens"].clone()),
        (json!(0), json!(0))
    );

    // The minute series: 23:30 to 00:30, the last minute partial.
    let series = a["timeseries"].as_array().unwrap();
    assert_eq!(a["granularity"], "minute");
    assert_eq!(series.len(), 61);
    let minute = |k: usize| &series[k];
    assert_eq!(minute(0)["viewersMax"], 3);
    assert_eq!(minute(0)["joins"], 2);
    assert_eq!(minute(0)["newViewers"], 2);
    near(
        &minute(0)["watchSeconds"],
        110.0,
        2.0 * drift,
        "minute 0 watch",
    );
    assert_eq!(
        (
            minute(1)["viewersMin"].clone(),
            minute(1)["viewersMax"].clone(),
            minute(1)["viewersMean"].clone()
        ),
        (json!(5), json!(7), json!(6.0))
    );
    assert_eq!(minute(1)["watchSeconds"], 120, "two viewers all minute");
    assert_eq!(
        (
            minute(2)["messages"].clone(),
            minute(2)["newChatters"].clone()
        ),
        (json!(2), json!(2))
    );
    assert_eq!(minute(2)["reactions"], 3);
    assert_eq!(
        minute(5)["viewersMean"],
        Value::Null,
        "no report that minute"
    );
    assert_eq!(minute(15)["newViewers"], 0, "a rejoin is no new viewer");
    assert_eq!(minute(15)["joins"], 1);
    assert_eq!(minute(30)["time"], json!(format_time(midnight)));
    assert_eq!(minute(31)["newChatters"], 1);
    assert_eq!(minute(55)["follows"], 1);
    let watched: i64 = series
        .iter()
        .map(|m| m["watchSeconds"].as_i64().unwrap())
        .sum();
    near(&json!(watched), 6000.0, 4.0 * drift, "the minutes add up");

    // Hours: 23:00 holds 23:30-24:00, 00:00 the rest; split at midnight exactly.
    let hours = s.analytics(&ada, "?granularity=hour").await;
    let hours = hours["timeseries"].as_array().unwrap();
    assert_eq!(hours.len(), 2);
    assert_eq!(hours[0]["time"], json!(format_time(midnight - 3600)));
    // v1 600 + 895, v2 1500, v3 595 | v1 605, v3 1805.
    near(&hours[0]["watchSeconds"], 3590.0, 4.0 * drift, "hour 23");
    near(&hours[1]["watchSeconds"], 2410.0, 4.0 * drift, "hour 0");
    assert_eq!(
        (hours[0]["messages"].clone(), hours[1]["messages"].clone()),
        (json!(3), json!(1))
    );
    assert_eq!(
        (
            hours[0]["viewersMax"].clone(),
            hours[1]["viewersMax"].clone()
        ),
        (json!(10), json!(4))
    );
    let fives = s.analytics(&ada, "?granularity=5m").await;
    let fives = fives["timeseries"].as_array().unwrap();
    assert_eq!(fives.len(), 13);
    assert_eq!(fives[0]["viewersMean"], json!(5.0), "3, 5, 7");
    assert_eq!(fives[0]["viewerReports"], 3);

    // CSV: the same series.
    let response = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/broadcasts/{}/analytics?granularity=hour", s.id),
        )
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv"),
        "CSV"
    );
    let csv = response.text().await.unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    // The columns as docs/analytics.md lists them, in its order.
    assert_eq!(
        lines[0],
        "time,viewersMin,viewersMax,viewersMean,viewerReports,watchSeconds,joins,leaves,\
         newViewers,messages,newChatters,reactions,gifts,giftTokens,follows,subscriptions,\
         views,playedSeconds,rebufferSeconds,rebufferPercentage,startupTimeP50Ms,playbackFailures,\
         timeEpoch",
        "{csv}"
    );
    assert!(
        lines[1].starts_with(&format!("{},3,10,", format_time(midnight - 3600))),
        "{csv}"
    );

    // The tenant's server reads it too; another tenant's does not find it.
    let (status, by_server) =
        server_get(&p, &t, &format!("/api/broadcasts/{}/analytics", s.id)).await;
    assert_eq!(status, 200);
    assert_eq!(by_server["uniqueViewers"], 3);
    let (status, _) = server_get(&p, &other, &format!("/api/broadcasts/{}/analytics", s.id)).await;
    assert_eq!(status, 404);
    let (status, body) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/broadcasts/{}/analytics?granularity=week", s.id),
        )
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (422, Some("invalid_granularity"))
    );

    // Nothing is in the daily rows until the roll-up; then the broadcast once, split at
    // midnight.
    let first_day = midnight - DAY;
    let range = format!("from={}&to={}", date(first_day), date(midnight + DAY));
    let (status, mine) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/users/me/analytics?{range}"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(mine["totals"]["broadcasts"], 0);
    let job = run_job(&p).await;
    assert_eq!(
        (job["done"].clone(), job["remaining"].clone()),
        (json!(1), json!(0)),
        "{job}"
    );
    let again = run_job(&p).await;
    assert_eq!(again["done"], 0, "idempotent: {again}");
    let (_, mine) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/users/me/analytics?{range}"),
        )
        .answer()
        .await;
    let days = mine["timeseries"].as_array().unwrap();
    assert_eq!(days.len(), 2, "{mine}");
    assert_eq!(days[0]["time"], json!(format_time(first_day)));
    assert_eq!(
        (days[0]["broadcasts"].clone(), days[1]["broadcasts"].clone()),
        (json!(1), json!(0))
    );
    // Live 23:30:05-24:00 (1795 s) and 00:00-00:30:05 (1805 s).
    near(
        &days[0]["liveMinutes"],
        1795.0 / 60.0,
        drift / 60.0 + 0.01,
        "live day 1",
    );
    near(
        &days[1]["liveMinutes"],
        1805.0 / 60.0,
        drift / 60.0 + 0.01,
        "live day 2",
    );
    near(
        &days[0]["watchMinutes"],
        3590.0 / 60.0,
        4.0 * drift / 60.0 + 0.01,
        "watch day 1",
    );
    near(
        &days[1]["watchMinutes"],
        2410.0 / 60.0,
        4.0 * drift / 60.0 + 0.01,
        "watch day 2",
    );
    assert_eq!(
        (days[0]["messages"].clone(), days[1]["messages"].clone()),
        (json!(3), json!(1))
    );
    assert_eq!(
        (days[0]["chatters"].clone(), days[1]["chatters"].clone()),
        (json!(2), json!(1))
    );
    assert_eq!(
        (
            days[0]["peakConcurrentViewers"].clone(),
            days[1]["peakConcurrentViewers"].clone()
        ),
        (json!(10), json!(4))
    );
    assert_eq!(
        (
            days[0]["uniqueViewers"].clone(),
            days[1]["uniqueViewers"].clone()
        ),
        (json!(3), json!(0))
    );
    assert_eq!(days[1]["followsGained"], 1);
    assert_eq!(mine["totals"]["broadcasts"], 1);
    assert_eq!(mine["totals"]["messages"], 4);
    let (_, weeks) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/users/me/analytics?{range}&granularity=week"),
        )
        .answer()
        .await;
    let week_total: f64 = weeks["timeseries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["watchMinutes"].as_f64().unwrap())
        .sum();
    near(
        &json!(week_total),
        100.0,
        4.0 * drift / 60.0 + 0.02,
        "weeks hold the same watch time",
    );
    // Another creator's channel is empty.
    let (_, bobs) = p
        .as_user(
            &bob,
            Method::GET,
            &format!("/api/users/me/analytics?{range}"),
        )
        .answer()
        .await;
    assert_eq!(bobs["totals"]["broadcasts"], 0);

    // The tenant by day: the same broadcast, and its five new (and active) users.
    let (status, tenant) = server_get(&p, &t, &format!("/api/v1/analytics?{range}")).await;
    assert_eq!(status, 200, "{tenant}");
    let days = tenant["timeseries"].as_array().unwrap();
    assert_eq!(
        (days[0]["newUsers"].clone(), days[0]["activeUsers"].clone()),
        (json!(5), json!(5))
    );
    assert_eq!(
        days[1]["activeUsers"], 5,
        "the refreshed sessions after midnight"
    );
    assert_eq!(days[0]["broadcasts"], 1);
    assert_eq!(tenant["totals"]["messages"], 4);
    near(
        &tenant["totals"]["watchMinutes"],
        100.0,
        4.0 * drift / 60.0 + 0.02,
        "tenant watch",
    );
    // Chosen metrics only, by the hour (from the minute buckets), and as CSV.
    let hours_range = format!(
        "from={}&to={}",
        format_time(midnight - 3600),
        format_time(midnight + 3600)
    );
    let (status, hourly) = server_get(
        &p,
        &t,
        &format!("/api/v1/analytics?{hours_range}&granularity=hour&metrics=watchMinutes,messages,broadcasts,liveMinutes"),
    )
    .await;
    assert_eq!(status, 200, "{hourly}");
    let hours = hourly["timeseries"].as_array().unwrap();
    assert_eq!(hours.len(), 2);
    assert_eq!(
        hours[0].as_object().unwrap().len(),
        5,
        "time and four metrics"
    );
    near(
        &hours[0]["watchMinutes"],
        3590.0 / 60.0,
        4.0 * drift / 60.0 + 0.01,
        "tenant hour 23",
    );
    near(
        &hours[1]["watchMinutes"],
        2410.0 / 60.0,
        4.0 * drift / 60.0 + 0.01,
        "tenant hour 0",
    );
    near(
        &hours[0]["liveMinutes"],
        1795.0 / 60.0,
        drift / 60.0 + 0.01,
        "tenant live hour 23",
    );
    assert_eq!(
        (hours[0]["messages"].clone(), hours[1]["messages"].clone()),
        (json!(3), json!(1))
    );
    assert_eq!(
        (
            hours[0]["broadcasts"].clone(),
            hours[1]["broadcasts"].clone()
        ),
        (json!(1), json!(0))
    );
    let csv = p
        .as_server(
            &t,
            Method::GET,
            &format!("/api/v1/analytics?{range}&metrics=messages"),
            None,
        )
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        csv,
        format!(
            "time,messages\r\n{},3\r\n{},1\r\n",
            format_time(first_day),
            format_time(midnight)
        )
    );
    let (status, body) = server_get(&p, &t, "/api/v1/analytics?metrics=bogus").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("invalid_metric"))
    );
    let (status, body) = server_get(&p, &t, "/api/v1/analytics?from=2026-13-45").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("invalid_range"))
    );
    // Another tenant sees none of it.
    let (_, theirs) = server_get(&p, &other, &format!("/api/v1/analytics?{range}")).await;
    assert_eq!(theirs["totals"]["broadcasts"], 0);
    assert_eq!(theirs["totals"]["messages"], 0);
    assert_eq!(theirs["totals"]["newUsers"], 0);
}

/// Who may read a broadcast's analytics, and the channel series' tiers.
#[tokio::test(flavor = "multi_thread")]
async fn analytics_are_for_the_owner_and_the_tenant_server() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    let (_, b) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Mine", "visibility": "public"}))
        .await;
    let path = format!("/api/broadcasts/{}/analytics", b["id"].as_str().unwrap());
    let (status, _) = p.as_user(&bob, Method::GET, &path).answer().await;
    assert_eq!(status, 403, "a viewer is not the owner");
    let (status, pending) = p.as_user(&ada, Method::GET, &path).answer().await;
    assert_eq!(status, 200);
    assert_eq!(pending["timeseries"], json!([]), "never live: no series");
    assert_eq!(pending["uniqueViewers"], 0);
    // The tenant series is for the server tier only; the channel series for a user.
    let (status, _) = p
        .as_user(&ada, Method::GET, "/api/v1/analytics")
        .answer()
        .await;
    assert_eq!(status, 401);
    let (status, _) = p
        .as_client(&t, Method::GET, "/api/users/me/analytics")
        .answer()
        .await;
    assert_eq!(status, 401);
    let (status, body) = p
        .as_user(
            &ada,
            Method::GET,
            "/api/users/me/analytics?from=2026-01-01&to=2040-01-01&granularity=day",
        )
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (422, Some("range_too_large"))
    );
}

fn screenshot_dir() -> std::path::PathBuf {
    platform_tests::workspace_root().join("target/page-screenshots")
}

/// The dashboard page: minted by the owner, read-only for that broadcast for 15 minutes,
/// drawn in headless Chromium from the data embedded in the page.
#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_draws_the_known_numbers() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    // 5 s into a minute, so that each step below stays in its minute.
    let now = p.now();
    p.advance_clock(Duration::from_secs(((now / 60 + 1) * 60 + 5 - now) as u64));
    let (_, created) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "<b>Dashboard</b> show", "visibility": "public"}))
        .await;
    let id = created["id"].as_str().unwrap().to_string();
    let (_, other) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Another", "visibility": "public"}))
        .await;
    let other_id = other["id"].as_str().unwrap().to_string();
    let (status, _) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "active"}))
        .await;
    assert_eq!(status, 200);
    let report = |n: i64| {
        let request = p.as_user(
            &ada,
            Method::POST,
            &format!("/api/broadcasts/{id}/viewer-count"),
        );
        async move { request.send_json(&json!({ "viewerCount": n })).await }
    };
    let chat = || {
        let request = p.as_user(&bob, Method::POST, &format!("/api/broadcasts/{id}/chat"));
        async move { request.send_json(&json!({ "message": "hello" })).await }
    };
    let react = || {
        let request = p.as_user(
            &bob,
            Method::POST,
            &format!("/api/v1/sessions/{id}/reactions"),
        );
        async move { request.send_json(&json!({ "reaction": "heart" })).await }
    };
    let heartbeat = || {
        p.as_user(&ada, Method::POST, &format!("/api/sessions/{id}/heartbeat"))
            .status()
    };
    // Minute 0: 4 viewers. Minute 1: 8 then 10, two messages, a reaction. Minute 2: a
    // message, two reactions.
    assert_eq!(report(4).await.0, 200);
    p.advance_clock(Duration::from_secs(60));
    assert_eq!(heartbeat().await, 200);
    assert_eq!(report(8).await.0, 200);
    p.advance_clock(Duration::from_secs(20));
    assert_eq!(report(10).await.0, 200);
    assert_eq!(chat().await.0, 200);
    assert_eq!(chat().await.0, 200);
    assert_eq!(react().await.0, 200);
    p.advance_clock(Duration::from_secs(40));
    assert_eq!(heartbeat().await, 200);
    assert_eq!(chat().await.0, 200);
    assert_eq!(react().await.0, 200);
    assert_eq!(react().await.0, 200);

    // Only the owner mints a link; it opens this broadcast only.
    let share = format!("/api/broadcasts/{id}/analytics/share");
    let (status, _) = p.as_user(&bob, Method::POST, &share).answer().await;
    assert_eq!(status, 403);
    let (status, link) = p.as_user(&ada, Method::POST, &share).answer().await;
    assert_eq!(status, 200, "{link}");
    let token = link["token"].as_str().unwrap().to_string();
    let path = format!("/analytics/broadcasts/{id}?token={token}");
    assert!(link["url"].as_str().unwrap().ends_with(&path), "{link}");
    let page = p.request(Method::GET, &path).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(page.headers()["cache-control"], "no-store");
    let html = page.text().await.unwrap();
    assert!(
        html.contains("&lt;b&gt;Dashboard&lt;&#x2f;b&gt; show"),
        "the title is escaped"
    );
    assert!(!html.contains("<script>"), "no inline script");
    for wrong in [
        format!("/analytics/broadcasts/{id}?token=an_wrong"),
        format!("/analytics/broadcasts/{id}"),
        format!("/analytics/broadcasts/{other_id}?token={token}"),
        format!("/analytics/broadcasts/not-a-uuid?token={token}"),
    ] {
        let status = p
            .request(Method::GET, &wrong)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 404, "{wrong}");
    }

    let mut browser = Browser::launch(&[]).await;
    let tab = browser.open(&p.url(&path), 1100, 1000).await;
    browser
        .wait_for(
            &tab,
            "!!window.analyticsDashboard && document.querySelectorAll('canvas').length === 3",
            Duration::from_secs(10),
        )
        .await;
    let drawn = browser
        .eval(
            &tab,
            "(function () {\
               var c = analyticsDashboard.charts;\
               var canvas = document.querySelector('#chart-viewers canvas');\
               var px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;\
               var inked = 0;\
               for (var i = 3; i < px.length; i += 4) { if (px[i] > 0) inked++; }\
               return { mean: c[0].data[1], peak: c[0].data[2], messages: c[1].data[1],\
                        reactions: c[1].data[2], gifts: c[2].data[1], points: c[0].data[0].length,\
                        inked: inked,\
                        peakTile: document.querySelector('[data-tile=peak]').textContent,\
                        messagesTile: document.querySelector('[data-tile=messages]').textContent,\
                        title: document.getElementById('title').textContent };\
             })()",
        )
        .await;
    assert_eq!(drawn["points"], 3, "{drawn}");
    assert_eq!(drawn["mean"], json!([4, 9, null]));
    assert_eq!(drawn["peak"], json!([4, 10, null]));
    assert_eq!(drawn["messages"], json!([0, 2, 1]));
    assert_eq!(drawn["reactions"], json!([0, 1, 2]));
    assert_eq!(drawn["gifts"], json!([0, 0, 0]));
    assert!(
        drawn["inked"].as_u64().unwrap() > 500,
        "the viewers chart is drawn: {drawn}"
    );
    assert_eq!(drawn["peakTile"], "10");
    assert_eq!(drawn["messagesTile"], "3");
    assert_eq!(drawn["title"], "<b>Dashboard</b> show");
    // The dark theme of every other page (static/pages.css), and the time range as dates
    // and times in the reader's zone, not as RFC 3339 text.
    let look = browser
        .eval(
            &tab,
            "(function () {\
               var css = function (el, p) { return getComputedStyle(el)[p]; };\
               var lum = function (rgb) { var c = rgb.match(/\\d+/g).map(Number);\
                                        return (0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]) / 255; };\
               var range = document.getElementById('range');\
               return { body: lum(css(document.body, 'backgroundColor')),\
                        text: lum(css(document.body, 'color')),\
                        tile: lum(css(document.querySelector('.stat'), 'backgroundColor')),\
                        chart: lum(css(document.querySelector('.charts figure'), 'backgroundColor')),\
                        label: lum(css(document.querySelector('.stat-label'), 'color')),\
                        range: range.textContent, from: range.dataset.from,\
                        header: document.querySelector('.dashboard-header').innerText,\
                        iso: /\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}/.test(document.body.innerText) };\
             })()",
        )
        .await;
    for surface in ["body", "tile", "chart"] {
        assert!(
            look[surface].as_f64().unwrap() < 0.15,
            "{surface} is dark: {look}"
        );
    }
    for ink in ["text", "label"] {
        assert!(look[ink].as_f64().unwrap() > 0.5, "{ink} is light: {look}");
    }
    let (_, read) = p
        .as_user(&ada, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert_eq!(look["from"], read["startedAt"], "{look}");
    assert_eq!(look["iso"], false, "no RFC 3339 time on the page: {look}");
    let range = look["range"].as_str().unwrap();
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    assert!(
        month.iter().any(|m| range.contains(m)) && range.contains(':'),
        "a date and a time: {range:?}"
    );
    browser
        .screenshot(&tab, &screenshot_dir().join("analytics-dashboard.png"))
        .await;
    browser.assert_clean(&tab).await;
    browser.close().await;

    // Fifteen minutes later the link is dead.
    p.advance_clock(Duration::from_secs(15 * 60));
    let status = p.request(Method::GET, &path).send().await.unwrap().status();
    assert_eq!(status, 404);
}

fn format_time(t: i64) -> String {
    domain::time::format_rfc3339(t)
}

fn date(t: i64) -> String {
    format_time(t)[..10].to_string()
}

/// A broadcast without heartbeats goes `error` after 90 s and says why: in its view, in its
/// `broadcast.errored` payload and on its dashboard; `error` stays final.
#[tokio::test(flavor = "multi_thread")]
async fn an_errored_broadcast_says_why_on_its_dashboard() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let create = |title: &'static str| {
        let request = p.as_user(&ada, Method::POST, "/api/broadcasts");
        async move {
            request
                .send_json(&json!({ "title": title, "visibility": "public" }))
                .await
        }
    };
    let status = |id: &str, to: &'static str| {
        let request = p.as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"));
        async move { request.send_json(&json!({ "status": to })).await }
    };
    let (_, stale) = create("Forgot the heartbeat").await;
    let stale_id = stale["id"].as_str().unwrap().to_string();
    let (_, reported) = create("Encoder crashed").await;
    let reported_id = reported["id"].as_str().unwrap().to_string();
    assert_eq!(stale["errorReason"], Value::Null, "{stale}");
    assert_eq!(status(&stale_id, "active").await.0, 200);
    assert_eq!(status(&reported_id, "active").await.0, 200);
    let (code, errored) = status(&reported_id, "error").await;
    assert_eq!(code, 200, "{errored}");
    assert_eq!(errored["errorReason"], "requested", "{errored}");

    p.advance_clock(Duration::from_secs(91));
    let (code, read) = p
        .as_user(&ada, Method::GET, &format!("/api/broadcasts/{stale_id}"))
        .answer()
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        (&read["status"], &read["errorReason"]),
        (&json!("error"), &json!("stale")),
        "{read}"
    );
    let (code, refused) = status(&stale_id, "completed").await;
    assert_eq!(code, 409, "error is final: {refused}");

    let dashboard = |id: String| {
        let p = &p;
        let ada = &ada;
        async move {
            let share = format!("/api/broadcasts/{id}/analytics/share");
            let (code, link) = p.as_user(ada, Method::POST, &share).answer().await;
            assert_eq!(code, 200, "{link}");
            let token = link["token"].as_str().unwrap();
            let path = format!("/analytics/broadcasts/{id}?token={token}");
            let page = p.request(Method::GET, &path).send().await.unwrap();
            assert_eq!(page.status(), 200);
            page.text().await.unwrap()
        }
    };
    let html = dashboard(stale_id).await;
    assert!(
        html.contains("id=\"error-reason\"") && html.contains("no heartbeat for 90 seconds"),
        "{html}"
    );
    let html = dashboard(reported_id).await;
    assert!(html.contains("as the app reported"), "{html}");
}
