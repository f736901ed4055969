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
//!
//! # Spin: refuse outbound connections to these networks ("private": every address that
//! # is not globally routable), checked at connect time on the resolved addresses.
//! [outbound_networking]
//! block_networks = ["private", "1.2.3.0/24"]
//!
//! # Spin: the memory limit of one instance, in bytes.
//! max_instance_memory = 134217728
//! ```
//!
//! Variable providers, as Spin spells them (`[[variables_provider]]`, or the older
//! `[[config_provider]]`): `type = "env"` with an optional `prefix` (default
//! `SPIN_VARIABLE`) and `dotenv_path`, and `type = "static"` with a `values` table. They
//! are asked in file order, then the default `SPIN_VARIABLE_<NAME>` environment, as in Spin.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::network_policy::BlockedNetworks;
use crate::warn;

/// Spin's default environment prefix for variables.
pub const DEFAULT_ENV_PREFIX: &str = "SPIN_VARIABLE";

#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// `[[variables_provider]]` / `[[config_provider]]`, in file order.
    providers: Vec<VariableProvider>,
    pub variables: BTreeMap<String, String>,
    /// Label -> where the store lives.
    pub key_value_stores: BTreeMap<String, KvStoreConfig>,
    /// Label -> database file.
    pub sqlite_databases: BTreeMap<String, PathBuf>,
    /// `[outbound_networking] block_networks`.
    pub blocked_networks: BlockedNetworks,
    /// `max_instance_memory`, in bytes.
    pub max_instance_memory: Option<usize>,
}

/// A source of variable values.
#[derive(Debug, Clone)]
enum VariableProvider {
    /// `<PREFIX>_<NAME>` from the environment, then from the dotenv file's values.
    Env {
        prefix: String,
        dotenv: BTreeMap<String, String>,
    },
    Static(BTreeMap<String, String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutboundNetworking {
    #[serde(default)]
    block_networks: Vec<String>,
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
    variables_provider: Vec<toml::Table>,
    #[serde(default)]
    outbound_networking: Option<OutboundNetworking>,
    #[serde(default)]
    max_instance_memory: Option<u64>,
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
            let why = match key.as_str() {
                "client_tls" | "state_dir" | "log_dir" | "llm_compute" => {
                    "not supported by edgehost"
                }
                _ => "unknown key",
            };
            warn(format_args!("runtime config: ignoring `{key}` ({why})"));
        }
        // Spin reads `variables_provider` and falls back to `config_provider`.
        let providers = if raw.variables_provider.is_empty() {
            raw.config_provider
        } else {
            raw.variables_provider
        };
        for provider in providers {
            if let Some(p) = VariableProvider::parse(&provider)? {
                cfg.providers.push(p);
            }
        }
        if let Some(net) = raw.outbound_networking {
            cfg.blocked_networks =
                BlockedNetworks::parse(&net.block_networks).context("[outbound_networking]")?;
        }
        cfg.max_instance_memory = raw
            .max_instance_memory
            .map(usize::try_from)
            .transpose()
            .context("max_instance_memory is too large")?;
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

    /// A variable's value from the providers (in file order), then from the default
    /// `SPIN_VARIABLE_<NAME>` environment: Spin's order.
    pub fn provided_variable(&self, name: &str) -> Option<String> {
        self.lookup(name, |key| std::env::var(key).ok())
    }

    /// `provided_variable` with the environment read through `env`.
    fn lookup(&self, name: &str, env: impl Fn(&str) -> Option<String>) -> Option<String> {
        let from_env = |prefix: &str| env(&env_key(prefix, name));
        self.providers
            .iter()
            .find_map(|p| match p {
                VariableProvider::Env { prefix, dotenv } => {
                    from_env(prefix).or_else(|| dotenv.get(&env_key(prefix, name)).cloned())
                }
                VariableProvider::Static(values) => values.get(name).cloned(),
            })
            .or_else(|| from_env(DEFAULT_ENV_PREFIX))
    }
}

/// `<PREFIX>_<NAME>` (an empty prefix: `<NAME>`), the name in upper case.
fn env_key(prefix: &str, name: &str) -> String {
    let name = name.to_ascii_uppercase();
    if prefix.is_empty() {
        name
    } else {
        format!("{prefix}_{name}")
    }
}

impl VariableProvider {
    /// One provider table; `None` for types edgehost does not implement (warned).
    fn parse(table: &toml::Table) -> Result<Option<VariableProvider>> {
        let kind = table.get("type").and_then(|t| t.as_str());
        let field = |key: &str| table.get(key).and_then(|v| v.as_str());
        match kind {
            Some("env") => {
                for key in table.keys() {
                    if !matches!(key.as_str(), "type" | "prefix" | "dotenv_path") {
                        warn(format_args!(
                            "runtime config: env provider: ignoring `{key}`"
                        ));
                    }
                }
                let dotenv = match field("dotenv_path") {
                    // As in Spin, relative to the working directory; a missing file is empty.
                    Some(path) => match std::fs::read_to_string(path) {
                        Ok(text) => parse_dotenv(&text),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
                        Err(e) => {
                            return Err(e)
                                .with_context(|| format!("cannot read dotenv file {path}"));
                        }
                    },
                    None => BTreeMap::new(),
                };
                Ok(Some(VariableProvider::Env {
                    prefix: field("prefix").unwrap_or(DEFAULT_ENV_PREFIX).to_string(),
                    dotenv,
                }))
            }
            Some("static") => {
                let values: BTreeMap<String, String> = table
                    .get("values")
                    .cloned()
                    .unwrap_or_else(|| toml::Value::Table(Default::default()))
                    .try_into()
                    .context("static variables provider: `values` must be a table of strings")?;
                Ok(Some(VariableProvider::Static(values)))
            }
            other => {
                warn(format_args!(
                    "runtime config: variables provider type {other:?} is not supported by edgehost (ignored)"
                ));
                Ok(None)
            }
        }
    }
}

/// `KEY=value` lines of a dotenv file: `#` comments, an optional `export `, values in
/// single or double quotes or bare.
fn parse_dotenv(text: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        let value = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or_default(),
            _ => value.split(" #").next().unwrap_or_default().trim_end(),
        };
        values.insert(key.trim().to_string(), value.to_string());
    }
    values
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
        let err = RuntimeConfig::parse("[key_value_store.x]\ntype = \"nosuch\"", Path::new("/"));
        assert!(format!("{:#}", err.unwrap_err()).contains("nosuch"));
    }

    #[test]
    fn providers_are_asked_in_order_before_the_default_environment() {
        let env = std::collections::HashMap::from([
            ("EDGEHOST_RCTEST_ONLY_ENV", "from env"),
            ("SPIN_VARIABLE_EDGEHOST_RCTEST_BOTH", "from default env"),
            ("EDGEHOST_RCTEST_BOTH", "from prefixed env"),
        ]);
        let env = |key: &str| env.get(key).map(|v| v.to_string());
        let dir = std::env::temp_dir().join(format!("edgehost-rc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dotenv = dir.join("vars.env");
        std::fs::write(
            &dotenv,
            "# comment\nexport EDGEHOST_RCTEST_DOT=\"dotted value\"\nEDGEHOST_RCTEST_BARE=bare # note\n",
        )
        .unwrap();
        let cfg = RuntimeConfig::parse(
            &format!(
                r#"
[[variables_provider]]
type = "static"
values = {{ from_static = "static value", rctest_both = "static wins" }}
[[variables_provider]]
type = "env"
prefix = "EDGEHOST"
dotenv_path = "{}"
"#,
                dotenv.display()
            ),
            &dir,
        )
        .unwrap();
        assert_eq!(
            cfg.lookup("from_static", env).as_deref(),
            Some("static value")
        );
        assert_eq!(
            cfg.lookup("rctest_both", env).as_deref(),
            Some("static wins")
        );
        assert_eq!(
            cfg.lookup("rctest_only_env", env).as_deref(),
            Some("from env")
        );
        assert_eq!(
            cfg.lookup("rctest_dot", env).as_deref(),
            Some("dotted value")
        );
        assert_eq!(cfg.lookup("rctest_bare", env).as_deref(), Some("bare"));
        assert_eq!(
            cfg.lookup("edgehost_rctest_both", env).as_deref(),
            Some("from default env")
        );
        assert_eq!(cfg.lookup("nowhere", env), None);
        // `config_provider` is the older spelling of the same thing.
        let old = RuntimeConfig::parse(
            "[[config_provider]]\ntype = \"env\"\nprefix = \"EDGEHOST\"",
            &dir,
        )
        .unwrap();
        assert_eq!(
            old.lookup("rctest_only_env", env).as_deref(),
            Some("from env")
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn outbound_networking_and_memory_limit() {
        let cfg = RuntimeConfig::parse(
            "max_instance_memory = 1048576\n[outbound_networking]\nblock_networks = [\"private\", \"1.2.3.0/24\"]",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(cfg.max_instance_memory, Some(1 << 20));
        assert!(
            cfg.blocked_networks
                .is_blocked("127.0.0.1".parse().unwrap())
        );
        assert!(cfg.blocked_networks.is_blocked("1.2.3.9".parse().unwrap()));
        assert!(!cfg.blocked_networks.is_blocked("1.2.4.9".parse().unwrap()));
        assert!(RuntimeConfig::default().blocked_networks.is_empty());
        for bad in [
            "[outbound_networking]\nblock_networks = [\"lan\"]",
            "[outbound_networking]\nblock_network = [\"private\"]",
            "max_instance_memory = -1",
        ] {
            assert!(RuntimeConfig::parse(bad, Path::new("/")).is_err(), "{bad}");
        }
    }

    #[test]
    fn dotenv_lines() {
        let v = parse_dotenv(
            "A=1\n# c\n\nexport B='two words'\nC = \"x#y\" \nD=plain # trailing\nnot a pair\n",
        );
        assert_eq!(v["A"], "1");
        assert_eq!(v["B"], "two words");
        assert_eq!(v["C"], "x#y");
        assert_eq!(v["D"], "plain");
        assert_eq!(v.len(), 4);
    }
}
