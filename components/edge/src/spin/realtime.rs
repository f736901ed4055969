//! Pushes a stream's real-time events (reactions, status, viewers, co-hosts, layout) to
//! the chat relay, which fans them out to the stream's sockets. Wasm components cannot
//! hold sockets, so the relay's internal endpoint is the way out. Publishing is best
//! effort: the REST call that caused an event succeeds even when the relay is down.

use super::config;
use super::outbound::{self, OutboundRequest};
use crate::realtime::Event;
use std::time::Duration;

/// How long a push may take before it is given up: long enough for a relay busy fanning
/// out to thousands of sockets to take it (300 ms lost pushes there), short enough that a
/// relay that cannot be reached delays the REST call by at most this much.
const PUSH_TIMEOUT: Duration = Duration::from_millis(1000);

/// Sends `event` to the sockets of `stream_id`.
pub fn publish(stream_id: &str, event: Event) {
    let (Some(relay_url), Some(secret)) = (config::var("relay_url"), config::var("relay_secret"))
    else {
        return;
    };
    let url = format!(
        "{}/internal/streams/{stream_id}/events",
        relay_url.trim_end_matches('/')
    );
    let body = serde_json::to_string(&event).unwrap_or_default();
    let request = OutboundRequest {
        method: "POST",
        headers: vec![
            ("content-type".into(), b"application/json".to_vec()),
            ("x-relay-secret".into(), secret.into_bytes()),
        ],
        body: body.as_bytes(),
        timeout: PUSH_TIMEOUT,
        max_response_bytes: 4 * 1024,
        ..OutboundRequest::get(&url)
    };
    match outbound::send(&request) {
        Ok(answer) if answer.status < 300 => {}
        Ok(answer) => eprintln!(
            "real-time event for {stream_id}: the relay answered {}",
            answer.status
        ),
        Err(e) => eprintln!("real-time event for {stream_id} not delivered: {e}"),
    }
}
