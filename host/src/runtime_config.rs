//! `--runtime-config-file`: the parts of Spin's runtime configuration edgehost honours,
//! plus one edgehost extension.
//!
//! ```toml
//! # Spin: read variables from the environment with an extra prefix (MYAPP_<NAME>).
//! [[config_provider]]
//! type = "env"
//! prefix = "MYAPP"
//!
//! # edgehost extension (not accepted by Spin): literal variable values.
//! [variables]
//! jwt_secret = "dev-secret"
//!
//! # Spin: extra key-value stores and SQLite databases (type "spin"); relative paths
//! # are relative to this file's directory.
//! [key_value_store.cache]
//! type = "spin"
//! path = "cache.db"          # omit for an in-memory store
//!
//! # Spin: a key-value store in Redis (its whole database is the store).
//! [key_value_store.default]
//! type = "redis"
//! url = "redis://127.0.0.1:6379/0"
//!
//! [sqlite_database.default]
//! type = "spin"
//! path = "data/app.db"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::manifest::warn;

/// Spin's default environment prefix for variables.
pub const DEFAULT_ENV_PREFIX: &str = "SPIN_VARIABLE";

#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    env_prefixes: Vec<String>,
    pub variables: BTreeMap<String, String>,
    /// Label -> where the store lives.
    pub key_value_stores: BTreeMap<String, KvStoreConfig>,
    /// Label -> database file.
    pub sqlite_databases: BTreeMap<String, PathBuf>,
}

/// Where a key-value store lives.
#[derive(Debug, Clone, PartialEq)]
pub enum KvStoreConfig {
    /// `type = "spin"`: an SQLite file (`None`: in memory).
    Sqlite(Option<PathBuf>),
    /// `type = "redis"`: a Redis database.
    Redis { url: String },
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    config_provider: Vec<toml::Table>,
    #[serde(default)]
    variables: BTreeMap<String, String>,
    #[serde(default)]
    key_value_store: BTreeMap<String, Backend>,
    #[serde(default)]
    sqlite_database: BTreeMap<String, Backend>,
    #[serde(flatten)]
    other: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
struct Backend {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    path: Option<PathBuf>,
    #[serde(default)]
    url: Option<String>,
    #[serde(flatten)]
    _other: BTreeMap<String, toml::Value>,
}

impl RuntimeConfig {
    /// Loads a runtime config file; `None` gives the defaults.
    pub fn load(path: Option<&Path>) -> Result<RuntimeConfig> {
        let Some(path) = path else {
            return Ok(RuntimeConfig::default());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read runtime config {}", path.display()))?;
        let base = std::path::absolute(path)?
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Self::parse(&text, &base)
            .with_context(|| format!("invalid runtime config {}", path.display()))
    }

    pub fn parse(text: &str, base: &Path) -> Result<RuntimeConfig> {
        let raw: RawConfig = toml::from_str(text)?;
        let mut cfg = RuntimeConfig {
            variables: raw.variables,
            ..Default::default()
        };
        for key in raw.other.keys() {
            warn(format_args!("runtime config: ignoring `{key}`"));
        }
        for provider in raw.config_provider {
            match provider.get("type").and_then(|t| t.as_str()) {
                Some("env") => {
                    if let Some(prefix) = provider.get("prefix").and_then(|p| p.as_str()) {
                        cfg.env_prefixes.push(prefix.to_string());
                    }
                    if provider.contains_key("dotenv_path") {
                        warn(format_args!(
                            "runtime config: `dotenv_path` is not supported by edgehost (ignored)"
                        ));
                    }
                }
                other => warn(format_args!(
                    "runtime config: config_provider type {other:?} is not supported by edgehost (ignored)"
                )),
            }
        }
        let resolve = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
        for (label, b) in raw.key_value_store {
            let store = match (b.kind.as_str(), b.url) {
                ("spin", _) => KvStoreConfig::Sqlite(b.path.map(resolve)),
                ("redis", Some(url)) => KvStoreConfig::Redis { url },
                ("redis", None) => bail!("[key_value_store.{label}]: type \"redis\" needs a `url`"),
                (other, _) => bail!(
                    "[key_value_store.{label}]: type {other:?} is not supported by edgehost; \
                     use type = \"spin\" or \"redis\""
                ),
            };
            cfg.key_value_stores.insert(label, store);
        }
        for (label, b) in raw.sqlite_database {
            if b.kind != "spin" {
                bail!(
                    "[sqlite_database.{label}]: type {:?} is not supported by edgehost; use type = \"spin\"",
                    b.kind
                );
            }
            let Some(path) = b.path else {
                bail!("[sqlite_database.{label}]: edgehost needs a `path`");
            };
            cfg.sqlite_databases.insert(label, resolve(path));
        }
        Ok(cfg)
    }

    /// Environment prefixes searched for `<PREFIX>_<NAME>`, highest precedence first.
    pub fn env_prefixes(&self) -> Vec<String> {
        let mut v = vec![DEFAULT_ENV_PREFIX.to_string()];
        v.extend(self.env_prefixes.iter().cloned());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spin_and_edgehost_keys() {
        let cfg = RuntimeConfig::parse(
            r#"
[[config_provider]]
type = "env"
prefix = "MYAPP"
[variables]
a = "1"
[key_value_store.cache]
type = "spin"
path = "cache.db"
[key_value_store.mem]
type = "spin"
[key_value_store.shared]
type = "redis"
url = "redis://127.0.0.1:6379/2"
[sqlite_database.other]
type = "spin"
path = "/abs/other.db"
"#,
            Path::new("/cfg"),
        )
        .unwrap();
        assert_eq!(cfg.env_prefixes(), vec!["SPIN_VARIABLE", "MYAPP"]);
        assert_eq!(cfg.variables["a"], "1");
        assert_eq!(
            cfg.key_value_stores["cache"],
            KvStoreConfig::Sqlite(Some(PathBuf::from("/cfg/cache.db")))
        );
        assert_eq!(cfg.key_value_stores["mem"], KvStoreConfig::Sqlite(None));
        assert_eq!(
            cfg.key_value_stores["shared"],
            KvStoreConfig::Redis {
                url: "redis://127.0.0.1:6379/2".into()
            }
        );
        assert_eq!(
            cfg.sqlite_databases["other"],
            PathBuf::from("/abs/other.db")
        );
        let err = RuntimeConfig::parse("[key_value_store.x]\ntype = \"redis\"", Path::new("/"));
        assert!(format!("{:#}", err.unwrap_err()).contains("needs a `url`"));
        let err = RuntimeConfig::parse(
            "[key_value_store.x]\ntype = \"azure_cosmos\"",
            Path::new("/"),
        );
        assert!(format!("{:#}", err.unwrap_err()).contains("azure_cosmos"));
    }
}
