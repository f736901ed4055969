//! The platform's domain: its rules as plain functions (no I/O, so unit tests call them
//! directly), and the plain building blocks every part shares: ids, time, JWTs, signing,
//! sealed secrets, pagination, errors as problem documents, and input validation (request
//! bodies declared once). Nothing here talks to Spin; the native chat relay, media agent
//! and host use it as it is.

pub mod analytics;
pub mod broadcast;
pub mod clip;
pub mod cohost;
pub mod ids;
pub mod jwt;
pub mod media;
pub mod moderation;
pub mod network;
pub mod pagination;
pub mod player;
pub mod problem;
pub mod recording;
pub mod sealed;
pub mod sfu;
pub mod signing;
pub mod time;
pub mod uploads;
pub mod validate;
pub mod views;
pub mod webhooks;
pub mod word_filter;

pub use problem::ApiError;
