//! Host bindings for the Spin interfaces in `/wit` (see `wit/README.md`).
//!
//! Every import is an async host function (SQLite and the key-value store run on the
//! blocking pool) and may trap (`wasmtime::Result`) on host-side failures such as a bad
//! resource handle.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "edgehost:host/edgehost",
    imports: { default: async | trappable },
    with: {
        "fermyon:spin/key-value.store": crate::kv::KvStoreHandle,
        "fermyon:spin/sqlite.connection": crate::sqlite::SqliteConn,
        "spin:sqlite/sqlite.connection": crate::sqlite::SqliteConn,
        "spin:postgres/postgres@3.0.0.connection": crate::pg::PgConn,
        "spin:postgres/postgres@4.0.0.connection": crate::pg::PgConn,
    },
});
