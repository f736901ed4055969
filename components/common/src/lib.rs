//! Shared building blocks of the platform's components.
//!
//! Everything outside [`spin`] is plain Rust that unit tests (and the native chat relay)
//! use directly; [`spin`] holds the pieces that talk to the Spin host and is compiled
//! only for the wasm components.

pub mod answers;
pub mod app;
pub mod contract;
pub mod domain;
pub mod ids;
pub mod jwt;
pub mod pagination;
pub mod problem;
pub mod realtime;
pub mod routing;
pub mod sealed;
pub mod signing;
pub mod store;
pub mod time;
pub mod validate;

#[cfg(feature = "spin")]
pub mod spin;

pub use problem::ApiError;
