//! The pieces that talk to the Spin host: variables, SQL, key-value, the request context.

pub mod auth;
pub mod config;
pub mod endpoint;
pub mod http;
pub mod idempotent;
pub mod incoming;
pub mod outbound;
pub mod realtime;
pub mod sfu;
pub mod store;
