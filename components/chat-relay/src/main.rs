//! The WebSocket chat relay. Not built yet: it only says so.

fn main() {
    eprintln!("chat-relay: the WebSocket relay is not available in this version");
    std::process::exit(2);
}
