//! The process-wide wasmtime `Engine` and the compiled-component cache.
//!
//! Compiling a component with cranelift is by far the slowest step of start-up, so each
//! distinct wasm file is compiled once per process (an in-memory map keyed by the
//! SHA-256 of its bytes, shared by every `Server` in the process) and its compiled form is
//! kept on disk (`Component::serialize`) for the next process. The on-disk directory is
//! `$EDGEHOST_CACHE_DIR`, else `<cargo workspace of the manifest>/target/edgehost-cache`,
//! else `~/.cache/edgehost`; the key covers the wasm bytes, the wasmtime version and the
//! engine configuration.

use std::collections::HashMap;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Must match the pinned `wasmtime` dependency; part of the disk-cache key.
const WASMTIME_VERSION: &str = "48.0.8";
/// Most compiled components kept on disk; older ones are pruned.
const MAX_DISK_ENTRIES: usize = 48;
/// With PAGEMAP_SCAN, how many dirtied bytes of a memory or table are reset in place
/// (beyond that, the rest is unmapped).
const DIRTY_PAGES_KEPT: usize = 8 << 20;
/// Concurrent instances the pooling allocator provides for.
const MAX_INSTANCES: u32 = 500;

static ENGINE: OnceLock<Engine> = OnceLock::new();

/// The shared engine: async host calls, pooling allocator (falls back to on-demand
/// allocation where the virtual memory it reserves is not available).
pub fn engine() -> Result<&'static Engine> {
    if let Some(e) = ENGINE.get() {
        return Ok(e);
    }
    let mut config = base_config();
    let mut pooling = PoolingAllocationConfig::default();
    // Memories and tables are reset by rewriting only the pages an instance dirtied (found
    // with Linux's PAGEMAP_SCAN) rather than unmapping them: every `madvise` is a TLB
    // shootdown on all cores, which dominated the per-request profile. Without the
    // ioctl, wasmtime memsets the lowest `keep_resident` bytes and madvises the rest;
    // a Rust guest's first MiB is its mostly untouched stack, so then none is kept.
    let scan = dirty_page_scan_is_sound();
    let (memory_resident, table_resident) = if scan {
        (DIRTY_PAGES_KEPT, DIRTY_PAGES_KEPT)
    } else {
        (0, 1 << 16)
    };
    pooling
        .total_component_instances(MAX_INSTANCES)
        .total_memories(MAX_INSTANCES)
        .total_tables(2 * MAX_INSTANCES)
        .total_stacks(MAX_INSTANCES)
        .total_core_instances(4 * MAX_INSTANCES)
        .max_core_instances_per_component(200)
        .max_memories_per_component(32)
        .max_tables_per_component(64)
        .max_component_instance_size(10 << 20)
        .max_core_instance_size(10 << 20)
        .pagemap_scan(if scan {
            wasmtime::Enabled::Yes
        } else {
            wasmtime::Enabled::No
        })
        .linear_memory_keep_resident(memory_resident)
        .table_keep_resident(table_resident);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    let engine = match Engine::new(&config) {
        Ok(e) => e,
        Err(e) => {
            crate::warn(format_args!(
                "pooling allocator unavailable ({e}); using on-demand allocation"
            ));
            Engine::new(&base_config())?
        }
    };
    let engine = ENGINE.get_or_init(|| engine);
    start_epoch_ticker(engine);
    Ok(engine)
}

/// Whether resetting instances by a PAGEMAP_SCAN of their dirty pages is available and
/// safe. The scan only finds dirty pages that are resident: a page the kernel swapped out
/// while its slot sat idle would be neither reset nor unmapped, and the next instance in
/// that slot would read what the previous request left there. So the scan is used only
/// on a machine with no swap configured at start-up (the usual server setting).
/// `EDGEHOST_DIRTY_PAGE_SCAN=0` turns the scan off (to compare, or to rule it out).
fn dirty_page_scan_is_sound() -> bool {
    let disabled = std::env::var("EDGEHOST_DIRTY_PAGE_SCAN").is_ok_and(|v| v == "0");
    !disabled && PoolingAllocationConfig::is_pagemap_scan_available() && !swap_configured()
}

/// True when `/proc/swaps` lists a swap area, or cannot be read.
fn swap_configured() -> bool {
    std::fs::read_to_string("/proc/swaps").map_or(true, |table| lists_swap_area(&table))
}

/// Whether a `/proc/swaps` table has a row below its column header.
fn lists_swap_area(proc_swaps: &str) -> bool {
    proc_swaps.lines().skip(1).any(|l| !l.trim().is_empty())
}

/// Guests yield to the async runtime every `EPOCH_TICK` (see `App::instantiate`):
/// a component spinning in a loop then cannot starve the other requests of a worker.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

fn start_epoch_ticker(engine: &Engine) {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("edgehost-epoch".into())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .ok();
    });
}

fn base_config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true).epoch_interruption(true);
    config
}

type Slot = Arc<tokio::sync::OnceCell<Component>>;
static COMPILED: LazyLock<Mutex<HashMap<[u8; 32], Slot>>> = LazyLock::new(Default::default);

/// Loads the component at `path`: from the in-process cache, the disk cache, or by
/// compiling it. `workspace_hint` is where to look for a cargo workspace's `target/`.
pub async fn load_component(
    engine: &Engine,
    path: &Path,
    workspace_hint: &Path,
) -> Result<Component> {
    let bytes = tokio::fs::read(path)
        .await
        .with_context(|| format!("cannot read component {}", path.display()))?;
    let digest: [u8; 32] = Sha256::digest(&bytes).into();
    let slot = {
        let mut map = COMPILED
            .lock()
            .map_err(|_| anyhow::anyhow!("cache lock poisoned"))?;
        map.entry(digest).or_default().clone()
    };
    let engine = engine.clone();
    let dir = disk_cache_dir(workspace_hint);
    let name = path.display().to_string();
    // Concurrent loads of the same bytes wait for one compilation.
    let component = slot
        .get_or_try_init(|| async move {
            tokio::task::spawn_blocking(move || {
                compile_or_load(&engine, &bytes, &digest, dir.as_deref())
            })
            .await
            .context("compile task failed")?
            .with_context(|| format!("cannot compile component {name}"))
        })
        .await?;
    Ok(component.clone())
}

fn compile_or_load(
    engine: &Engine,
    bytes: &[u8],
    digest: &[u8; 32],
    dir: Option<&Path>,
) -> Result<Component> {
    let file = dir.map(|d| d.join(format!("{}.cwasm", cache_key(engine, digest))));
    if let Some(file) = &file
        && file.is_file()
    {
        // SAFETY: `deserialize_file` requires trusted input. The file is one this
        // function wrote itself (atomically, via rename) into our own cache directory,
        // and wasmtime still checks its version and engine-compatibility header.
        match unsafe { Component::deserialize_file(engine, file) } {
            Ok(c) => return Ok(c),
            Err(e) => crate::warn(format_args!(
                "ignoring unusable cache entry {}: {e}",
                file.display()
            )),
        }
    }
    let component = Component::from_binary(engine, bytes)?;
    if let (Some(dir), Some(file)) = (dir, &file)
        && let Err(e) = store(dir, file, &component)
    {
        crate::warn(format_args!(
            "cannot write compile cache {}: {e:#}",
            dir.display()
        ));
    }
    Ok(component)
}

fn store(dir: &Path, file: &Path, component: &Component) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let data = component.serialize()?;
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, file)?;
    prune(dir);
    Ok(())
}

/// Keeps the newest `MAX_DISK_ENTRIES` compiled components.
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if files.len() <= MAX_DISK_ENTRIES {
        return;
    }
    files.sort();
    for (_, path) in &files[..files.len() - MAX_DISK_ENTRIES] {
        let _ = std::fs::remove_file(path);
    }
}

/// SHA-256 over the wasm digest, the wasmtime version and the engine's compatibility hash.
fn cache_key(engine: &Engine, digest: &[u8; 32]) -> String {
    struct ShaHasher(Sha256);
    impl Hasher for ShaHasher {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut h = ShaHasher(Sha256::new());
    h.write(digest);
    h.write(WASMTIME_VERSION.as_bytes());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut h);
    hex::encode(h.0.finalize())
}

fn disk_cache_dir(workspace_hint: &Path) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("EDGEHOST_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    // The outermost directory with a Cargo.lock is the workspace root.
    let workspace = workspace_hint
        .ancestors()
        .filter(|d| d.join("Cargo.lock").is_file())
        .last();
    if let Some(ws) = workspace {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| ws.join("target"));
        return Some(target.join("edgehost-cache"));
    }
    let home = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(home.join("edgehost"))
}

#[cfg(test)]
mod tests {
    use super::lists_swap_area;

    #[test]
    fn swap_is_configured_when_proc_swaps_has_a_row() {
        let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
        assert!(!lists_swap_area(header));
        assert!(!lists_swap_area(""));
        let with_zram = format!("{header}/dev/zram0  partition\t4194300\t0\t100\n");
        assert!(lists_swap_area(&with_zram));
    }
}
