//! Domain rules as plain functions: no I/O, so unit tests call them directly.

pub mod broadcast;
pub mod cohost;
pub mod sfu;
pub mod webhooks;
