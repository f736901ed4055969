//! The end-to-end suites, one module each, in one test binary: the platform's components
//! built for wasm32-wasip2 and served by edgehost in this process, over loopback.
//!
//! One binary links wasmtime once instead of once per suite. Run one suite with its module
//! path as the filter: `cargo test -p platform-tests --test platform money::`.
//!
//! Two suites keep binaries of their own because they change what the whole process shares:
//! `faults` stops and restarts the process's PostgreSQL cluster under load, and
//! `host_conformance` sets an environment variable before its hosts start.

mod support;

mod analytics;
mod api_contract;
mod attacks;
mod broadcasts;
mod chat_api;
mod chat_relay;
mod clips;
mod cohosts;
mod concurrency;
mod deploy_manifests;
mod files;
mod foundation;
mod guides;
mod media;
mod moderation;
mod money;
mod music;
mod object_store;
mod pages;
mod recording;
mod replays;
mod resumable_uploads;
mod sdk_api;
mod sdk_typescript;
mod signing;
mod tenancy;
mod users;
mod views;
mod webhooks;
