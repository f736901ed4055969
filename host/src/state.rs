//! The per-request store data: WASI, wasi:http and the Spin interfaces for one instance.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use wasmtime::Engine;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::kv::{self, KvStores, KvView};
use crate::outbound::{AllowedHosts, OutboundHooks};
use crate::pg::{self, PgPools, PgView};
use crate::sqlite::{self, Databases, SqliteView};
use crate::variables::{self, VariablesView};

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
    /// Idle outbound HTTP connections (`outbound_pool.rs`).
    pub outbound: Arc<crate::outbound_pool::ConnectionPool>,
}

pub struct InstanceState {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: OutboundHooks,
    pub env: Arc<ComponentEnv>,
    pub services: Arc<Services>,
    /// The handles of each Spin interface, each in the interface's own table.
    kv_stores: kv::OpenStores,
    sqlite_connections: sqlite::OpenConnections,
    pg_connections: pg::OpenConnections,
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
                pool: services.outbound.clone(),
            },
            env,
            services,
            kv_stores: kv::open_stores(),
            sqlite_connections: sqlite::open_connections(),
            pg_connections: pg::open_connections(),
            limits: Default::default(),
        })
    }
}

/// Each Spin interface's view of the instance: the component's grants, the app's shared
/// back end, and the interface's own handles.
impl InstanceState {
    fn kv(&mut self) -> KvView<'_> {
        KvView {
            allowed: &self.env.kv_allowed,
            stores: &self.services.kv,
            open: &mut self.kv_stores,
        }
    }

    fn sqlite(&mut self) -> SqliteView<'_> {
        SqliteView {
            allowed: &self.env.sqlite_allowed,
            databases: &self.services.sqlite,
            open: &mut self.sqlite_connections,
        }
    }

    fn pg(&mut self) -> PgView<'_> {
        PgView {
            component: &self.env.id,
            allowed_hosts: &self.env.allowed_hosts,
            pools: &self.services.pg,
            open: &mut self.pg_connections,
        }
    }

    fn variables(&mut self) -> VariablesView<'_> {
        VariablesView {
            component: &self.env.id,
            values: &self.env.variables,
        }
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
    kv::add_to_linker(&mut linker, InstanceState::kv)?;
    sqlite::add_to_linker(&mut linker, InstanceState::sqlite)?;
    pg::add_to_linker(&mut linker, InstanceState::pg)?;
    variables::add_to_linker(&mut linker, InstanceState::variables)?;
    Ok(linker)
}
