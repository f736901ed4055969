//! Pushes a stream's real-time events to the chat relay (shared with the money component:
//! see `common::spin::realtime`).

pub use common::spin::realtime::publish;
