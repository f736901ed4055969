//! WebSocket clients of the chat relay, for the suites that talk to it.

use futures_util::StreamExt;
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A client's socket.
pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The next text frame as JSON, skipping pings and pongs; panics after `within`.
pub async fn next_text_frame(ws: &mut Ws, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, ws.next())
            .await
            .expect("a frame in time")
            .expect("the socket is open")
            .expect("a valid frame");
        if let Message::Text(t) = msg {
            return serde_json::from_str(&t).expect("JSON frame");
        }
    }
}
