//! Domain rules as plain functions: no I/O, so unit tests call them directly.

pub mod analytics;
pub mod broadcast;
pub mod cohost;
pub mod media;
pub mod moderation;
pub mod network;
pub mod recording;
pub mod sfu;
pub mod uploads;
pub mod webhooks;
pub mod word_filter;
