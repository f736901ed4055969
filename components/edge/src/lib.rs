//! The components' Spin-facing edge: routing and tiers, what each route takes and answers
//! for the API document (`contract`), rate limits declared with their routes (`rate`),
//! answers several resources share, realtime events,
//! and [`spin`], the pieces that talk to the Spin host (configuration, authentication,
//! HTTP, outbound calls, the store's back ends).
//!
//! Everything outside [`spin`] is plain Rust that the OpenAPI document builder and the
//! tests use directly; [`spin`] is compiled only with the `spin` feature.

pub mod answers;
pub mod contract;
pub mod rate;
pub mod realtime;
pub mod routing;

#[cfg(feature = "spin")]
pub mod spin;
