//! Host bindings for the Spin interfaces in `/wit` (see `wit/README.md`).
//!
//! Every import is an async host function and may trap (`wasmtime::Result`) on host-side
//! failures such as a bad resource handle. Each interface is implemented and linked by
//! its own module (`kv`, `sqlite`, `pg`, `variables`) on a view of the instance it gets
//! from `state`; a resource here is a placeholder type, and its handle indexes that
//! module's own table (`handles.rs`).

wasmtime::component::bindgen!({
    path: "../wit",
    world: "edgehost:host/edgehost",
    imports: { default: async | trappable },
});
