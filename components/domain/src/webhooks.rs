//! Outbound webhooks' rules: which events exist, which URLs an endpoint may have, how a
//! delivery is signed (Standard Webhooks), and when a failed one is tried again.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::net::IpAddr;

/// Every event type an endpoint may subscribe to (or `*` for all). Components that record
/// a new type in the outbox add it here.
pub const EVENT_TYPES: &[&str] = &[
    "broadcast.created",
    "broadcast.started",
    "broadcast.ended",
    "broadcast.errored",
    "broadcast.stream_key_reset",
    "broadcast.health",
    "broadcast.replay_ready",
    "clip.ready",
    "cohost.requested",
    "cohost.joined",
    "cohost.left",
    "cohost.removed",
    "user.created",
    "user.deleted",
    "file.ready",
    "file.deleted",
    "chat.message_deleted",
    "chat.message_reported",
    "chat.user_banned",
    "wallet.credited",
    "gift.sent",
    "payout.requested",
    "payout.completed",
    "payout.rejected",
    "subscription.started",
    "subscription.renewed",
    "subscription.canceled",
    "subscription.lapsed",
    "recording.started",
    "recording.ready",
    "recording.failed",
    "webhook.test",
];

/// The retry schedule: the wait after the 1st, 2nd, ... failed attempt (seconds); after the
/// last one the delivery is `failed`.
pub const RETRY_DELAYS: [i64; 7] = [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000];
/// An endpoint whose attempts have failed this long without a success is disabled.
pub const DISABLE_AFTER_FAILING_SECS: i64 = 5 * 86_400;
/// The longest `Retry-After` honoured (a longer one waits this long).
pub const MAX_RETRY_AFTER_SECS: i64 = 36_000;
/// After a rotation, the previous secret keeps signing this long.
pub const PREVIOUS_SECRET_SECS: i64 = 86_400;
/// Random bytes in a signing secret.
pub const SECRET_BYTES: usize = 32;
pub const SECRET_PREFIX: &str = "whsec_";

/// Checks a subscription list: `["*"]` or known types, at least one, no duplicates.
pub fn check_events(events: &[String]) -> Result<(), String> {
    if events.is_empty() {
        return Err("subscribe to at least one event type, or [\"*\"]".into());
    }
    if events.iter().any(|e| e == "*") && events.len() > 1 {
        return Err("\"*\" stands alone".into());
    }
    for (i, event) in events.iter().enumerate() {
        if event != "*" && !EVENT_TYPES.contains(&event.as_str()) {
            return Err(format!("unknown event type {event:?}"));
        }
        if events[..i].contains(event) {
            return Err(format!("{event:?} is listed twice"));
        }
    }
    Ok(())
}

/// Whether a subscription list covers `event_type`. `webhook.test` is sent only on request.
pub fn subscribes(events: &[String], event_type: &str) -> bool {
    event_type != "webhook.test" && events.iter().any(|e| e == "*" || e == event_type)
}

/// Checks an endpoint URL: `https` (plain `http` only when `allow_local`), an absolute URL
/// without credentials, and, unless `allow_local`, a host that is not a loopback, private,
/// link-local, metadata or otherwise non-public literal address or a local name. Names are
/// not resolved here: the host's `block_networks = ["private"]` checks the resolved
/// addresses at connect time.
pub fn check_url(url: &str, allow_local: bool) -> Result<(), String> {
    if url.len() > 2048 {
        return Err("at most 2048 characters".into());
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain spaces or control characters".into());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("must be an absolute https URL".into());
    };
    match scheme.to_ascii_lowercase().as_str() {
        "https" => {}
        "http" if allow_local => {}
        "http" => {
            return Err(format!(
                "must be https (plain http only for local tests: {})",
                local_switch(WEBHOOK_SWITCH)
            ));
        }
        _ => return Err("must be an https URL".into()),
    }
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    check_authority(authority, allow_local, WEBHOOK_SWITCH)
}

/// The variable that lets webhooks go to plain http and local receivers.
pub const WEBHOOK_SWITCH: &str = "webhook_allow_http";

/// How a refusal names the variable `switch` that lifts it for local tests: as the
/// environment variable an operator sets (`edgehost up --production` refuses it).
pub fn local_switch(switch: &str) -> String {
    format!(
        "set SPIN_VARIABLE_{}=true, which --production refuses",
        switch.to_ascii_uppercase()
    )
}

/// Checks the authority (`host[:port]`) of an outbound URL: no credentials, a valid host,
/// and, unless `allow_local`, a host that is not a loopback, private, link-local, metadata
/// or otherwise non-public literal address or a local name. A refusal of a local host
/// names `switch`, the variable that allows them.
pub fn check_authority(authority: &str, allow_local: bool, switch: &str) -> Result<(), String> {
    if authority.contains('@') {
        return Err("must not contain credentials".into());
    }
    let host = host_of(authority).ok_or("has no valid host")?;
    if allow_local {
        return Ok(());
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return if is_public(ip) {
            Ok(())
        } else {
            Err(format!(
                "must not point at a loopback, private, link-local or reserved address \
                 (for local tests: {})",
                local_switch(switch)
            ))
        };
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    let local = name == "localhost"
        || !name.contains('.')
        || [
            ".localhost",
            ".local",
            ".internal",
            ".localdomain",
            ".home.arpa",
        ]
        .iter()
        .any(|suffix| name.ends_with(suffix))
        || name == "metadata.google.internal";
    if local || looks_numeric(&name) {
        return Err(format!(
            "must name a public host (for local tests: {})",
            local_switch(switch)
        ));
    }
    Ok(())
}

/// The host of an authority (`host`, `host:port`, `[v6]:port`), lowercase.
fn host_of(authority: &str) -> Option<String> {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.starts_with(':')) {
            return None;
        }
        v6
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
            Some(_) => return None,
            None => authority,
        }
    };
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    valid.then(|| host.to_ascii_lowercase())
}

/// Names that a resolver would read as an IPv4 address in another notation (`0x7f.1`,
/// `2130706433`, `127.1`): refused rather than guessed at.
fn looks_numeric(name: &str) -> bool {
    name.split('.').all(|part| {
        !part.is_empty()
            && (part.chars().all(|c| c.is_ascii_digit())
                || part
                    .strip_prefix("0x")
                    .is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit())))
    })
}

/// Whether an address is one the platform may deliver to: the one rule of
/// [`super::network`] (public unicast, in every IPv4-in-IPv6 form too).
pub use super::network::is_public;

/// A new signing secret: `whsec_` and the base64 of [`SECRET_BYTES`] random bytes.
pub fn new_secret() -> String {
    format!(
        "{SECRET_PREFIX}{}",
        BASE64.encode(crate::ids::random_bytes(SECRET_BYTES))
    )
}

/// The HMAC key of a secret: the bytes its base64 part encodes.
fn key_bytes(secret: &str) -> Option<Vec<u8>> {
    BASE64
        .decode(secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret))
        .ok()
}

/// One Standard Webhooks signature, `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&key_bytes(secret)?).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(format!("v1,{}", BASE64.encode(mac.finalize().into_bytes())))
}

/// The `webhook-signature` header: one signature per secret, separated by spaces.
pub fn signature_header(secrets: &[&str], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .filter_map(|secret| sign(secret, id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What an attempt's answer means for the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Delivered,
    /// The receiver is gone for good (410): the endpoint is disabled.
    Gone,
    Retry,
}

/// A 2xx is delivered; 410 disables; anything else (3xx included) is tried again.
pub fn verdict(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Delivered,
        410 => Verdict::Gone,
        _ => Verdict::Retry,
    }
}

/// When to try again after the failed attempt number `step` (1-based since the schedule
/// last started), `jitter` in [0, 1) spreading retries by up to 10 % of the wait; `None`
/// once the schedule is exhausted. A `Retry-After` (in seconds) replaces the scheduled
/// wait, capped at [`MAX_RETRY_AFTER_SECS`], but never ends the schedule early or late.
pub fn next_attempt(now: i64, step: i64, jitter: f64, retry_after: Option<i64>) -> Option<i64> {
    let delay = *RETRY_DELAYS.get(usize::try_from(step.checked_sub(1)?).ok()?)?;
    let wait = match retry_after {
        Some(secs) => secs.clamp(1, MAX_RETRY_AFTER_SECS),
        None => delay + (delay as f64 * 0.1 * jitter.clamp(0.0, 1.0)) as i64,
    };
    Some(now + wait)
}

/// A `Retry-After` header as seconds from `now`: delay-seconds or an HTTP date
/// (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn parse_retry_after(value: &str, now: i64) -> Option<i64> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<i64>() {
        return (secs >= 0).then_some(secs);
    }
    let at = parse_http_date(value)?;
    Some((at - now).max(0))
}

fn parse_http_date(value: &str) -> Option<i64> {
    // IMF-fixdate only: "Sun, 06 Nov 1994 08:49:37 GMT".
    let mut parts = value.split_whitespace();
    let (_, day, month, year, time, zone) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if zone != "GMT" || parts.next().is_some() {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? + 1;
    let day: u32 = day.parse().ok()?;
    let year: u32 = year.parse().ok()?;
    crate::time::parse_rfc3339(&format!("{year:04}-{month:02}-{day:02}T{time}Z"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn subscriptions_name_known_types_or_everything() {
        assert!(check_events(&list(&["*"])).is_ok());
        assert!(check_events(&list(&["broadcast.started", "user.created"])).is_ok());
        assert!(check_events(&list(&[])).is_err());
        assert!(check_events(&list(&["*", "user.created"])).is_err());
        assert!(check_events(&list(&["broadcast.exploded"])).is_err());
        assert!(check_events(&list(&["user.created", "user.created"])).is_err());
        assert!(subscribes(&list(&["*"]), "cohost.joined"));
        assert!(subscribes(&list(&["cohost.joined"]), "cohost.joined"));
        assert!(!subscribes(&list(&["cohost.left"]), "cohost.joined"));
        assert!(!subscribes(&list(&["*"]), "webhook.test"));
    }

    #[test]
    fn urls_must_be_https_and_public() {
        for ok in [
            "https://example.com/hooks",
            "https://hooks.example.com:8443/x?y=1",
            "https://93.184.216.34/",
            "https://[2606:2800:220:1:248:1893:25c8:1946]/",
        ] {
            assert_eq!(check_url(ok, false), Ok(()), "{ok}");
        }
        for bad in [
            "http://example.com/",
            "ftp://example.com/",
            "example.com",
            "https://user:pw@example.com/",
            "https://localhost/",
            "https://LOCALHOST./",
            "https://api.localhost/",
            "https://printer.local/",
            "https://metadata.google.internal/",
            "https://intranet/",
            "https://127.0.0.1/",
            "https://127.1/",
            "https://2130706433/",
            "https://0x7f.0.0.1/",
            "https://10.1.2.3/",
            "https://172.16.0.1/",
            "https://192.168.1.1:8443/",
            "https://169.254.169.254/latest/meta-data",
            "https://100.64.0.1/",
            "https://0.0.0.0/",
            "https://[::1]/",
            "https://[fe80::1]/",
            "https://[fd00:ec2::254]/",
            "https://[::ffff:127.0.0.1]/",
            "https://[::ffff:10.0.0.1]/",
            "https://exa mple.com/",
            "https://",
        ] {
            assert!(check_url(bad, false).is_err(), "{bad} accepted");
        }
        // Local use (webhook_allow_http): plain http and loopback receivers.
        assert_eq!(check_url("http://127.0.0.1:8080/hook", true), Ok(()));
        // A refusal a local test may lift names the switch as it is set.
        for local in [
            "http://a.example/hook",
            "https://127.0.0.1/hook",
            "https://localhost/",
        ] {
            let why = check_url(local, false).unwrap_err();
            assert!(
                why.contains("SPIN_VARIABLE_WEBHOOK_ALLOW_HTTP=true"),
                "{local}: {why}"
            );
        }
        assert!(check_url("ftp://127.0.0.1/", true).is_err());
        assert!(check_url("http://u:p@127.0.0.1/", true).is_err());
    }

    #[test]
    fn signatures_follow_standard_webhooks() {
        // The Standard Webhooks specification's example (secret, id, timestamp, body).
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let sig = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).unwrap();
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        let header = signature_header(
            &[secret, secret],
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            body,
        );
        assert_eq!(header, format!("{sig} {sig}"));
        let fresh = new_secret();
        assert!(fresh.starts_with("whsec_"));
        assert_eq!(key_bytes(&fresh).unwrap().len(), SECRET_BYTES);
    }

    #[test]
    fn answers_decide_the_delivery() {
        assert_eq!(verdict(200), Verdict::Delivered);
        assert_eq!(verdict(204), Verdict::Delivered);
        assert_eq!(verdict(301), Verdict::Retry);
        assert_eq!(verdict(500), Verdict::Retry);
        assert_eq!(verdict(410), Verdict::Gone);
    }

    #[test]
    fn failed_attempts_follow_the_schedule_then_stop() {
        assert_eq!(next_attempt(1000, 1, 0.0, None), Some(1005));
        assert_eq!(next_attempt(1000, 2, 0.0, None), Some(1300));
        assert_eq!(next_attempt(1000, 2, 0.99, None), Some(1329));
        assert_eq!(next_attempt(0, 7, 0.0, None), Some(36_000));
        assert_eq!(next_attempt(0, 8, 0.0, None), None);
        assert_eq!(next_attempt(0, 0, 0.0, None), None);
        // Retry-After replaces the wait, within bounds, not the number of attempts.
        assert_eq!(next_attempt(1000, 1, 0.5, Some(60)), Some(1060));
        assert_eq!(next_attempt(1000, 1, 0.5, Some(0)), Some(1001));
        assert_eq!(
            next_attempt(0, 2, 0.0, Some(999_999)),
            Some(MAX_RETRY_AFTER_SECS)
        );
        assert_eq!(next_attempt(0, 8, 0.0, Some(1)), None);
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        assert_eq!(parse_retry_after("120", 0), Some(120));
        assert_eq!(parse_retry_after("-1", 0), None);
        assert_eq!(parse_retry_after("soon", 0), None);
        let at = crate::time::parse_rfc3339("1994-11-06T08:49:37Z").unwrap();
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", at - 30),
            Some(30)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", at + 30),
            Some(0)
        );
    }
}
