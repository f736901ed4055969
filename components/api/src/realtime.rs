//! Pushes a stream's real-time events to the chat relay (shared with the money component:
//! see `edge::spin::realtime`).

pub use edge::spin::realtime::publish;
