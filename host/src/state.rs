//! The per-request store data: WASI, wasi:http and the Spin interfaces for one instance.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::kv::KvStores;
use crate::outbound::{AllowedHosts, OutboundHooks};
use crate::pg::PgPools;
use crate::sqlite::Databases;

/// What one component may use, fixed at start-up.
pub struct ComponentEnv {
    pub id: Arc<str>,
    pub kv_allowed: HashSet<String>,
    pub sqlite_allowed: HashSet<String>,
    /// Resolved `[component.X.variables]`.
    pub variables: HashMap<String, String>,
    pub allowed_hosts: Arc<AllowedHosts>,
    /// WASI environment variables (`environment`).
    pub environment: Vec<(String, String)>,
    /// Read-only directory mounts from `files`: (host dir, guest path).
    pub mounts: Vec<(PathBuf, String)>,
    /// The runtime config's `[outbound_networking] block_networks` (app-wide, as in Spin).
    pub blocked_networks: Arc<crate::network_policy::BlockedNetworks>,
}

/// State shared by every instance of the app.
pub struct Services {
    pub kv: KvStores,
    pub sqlite: Databases,
    pub pg: PgPools,
    /// The guests' wall clock (`clock.rs`).
    pub clock: crate::clock::GuestClock,
}

pub struct InstanceState {
    pub table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: OutboundHooks,
    pub env: Arc<ComponentEnv>,
    pub services: Arc<Services>,
    pub open_stores: usize,
    pub open_connections: usize,
    pub open_pg_connections: usize,
    /// The instance's memory limit (see `limits.rs`); set by the server.
    pub limits: crate::limits::InstanceLimiter,
}

impl InstanceState {
    pub fn new(
        env: Arc<ComponentEnv>,
        services: Arc<Services>,
        self_addr: SocketAddr,
    ) -> Result<InstanceState> {
        let mut wasi = WasiCtxBuilder::new();
        // Nothing of the host environment is inherited; guest output (stdout too) goes to
        // our stderr so `println!` debugging in a component shows up.
        wasi.stdout(std::io::stderr()).stderr(std::io::stderr());
        wasi.envs(&env.environment);
        wasi.wall_clock(services.clock.clone());
        for (host, guest) in &env.mounts {
            wasi.preopened_dir(host, guest, FsPerms::ReadOnly)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("cannot mount {} at {guest}", host.display()))?;
        }
        Ok(InstanceState {
            table: ResourceTable::new(),
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            hooks: OutboundHooks {
                component: env.id.clone(),
                allowed: env.allowed_hosts.clone(),
                self_addr,
                blocked: env.blocked_networks.clone(),
            },
            env,
            services,
            open_stores: 0,
            open_connections: 0,
            open_pg_connections: 0,
            limits: Default::default(),
        })
    }
}

impl WasiView for InstanceState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for InstanceState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

/// A linker with WASI 0.2, wasi:http and the Spin interfaces.
pub fn linker(engine: &Engine) -> Result<Linker<InstanceState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    crate::bindings::Edgehost::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    Ok(linker)
}
