//! `spin.toml` (manifest version 2): the subset edgehost runs, validated up front so that a
//! bad manifest fails at start-up with a message naming the offending entry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;

use crate::warn;

/// A parsed and validated manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Directory holding `spin.toml`; relative paths in the manifest are relative to it.
    pub dir: PathBuf,
    pub application: Application,
    /// Application variables, by name.
    pub variables: BTreeMap<String, VariableDecl>,
    /// The HTTP triggers, in manifest order.
    pub http_triggers: Vec<HttpTrigger>,
    /// Components, by id.
    pub components: BTreeMap<String, Component>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[allow(dead_code)] // accepted so that they are not reported as unknown keys
pub struct Application {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(flatten)]
    pub other: BTreeMap<String, toml::Value>,
}

/// A `[variables]` entry.
#[derive(Debug, Clone, Deserialize)]
#[allow(dead_code)] // `description` is accepted, not used
#[serde(deny_unknown_fields)]
pub struct VariableDecl {
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub secret: bool,
    #[serde(default)]
    pub description: Option<String>,
}

/// A `[[trigger.http]]` entry.
#[derive(Debug, Clone)]
pub struct HttpTrigger {
    /// The route as written in the manifest; `None` for `route = { private = true }`.
    pub route: Option<String>,
    pub component: String,
}

/// A `[component.X]` entry.
#[derive(Debug, Clone, Deserialize)]
#[allow(dead_code)] // `description` and `exclude_files` are accepted, not used
pub struct Component {
    pub source: ComponentSource,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub files: Vec<FileMount>,
    #[serde(default)]
    pub exclude_files: Vec<String>,
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    pub allowed_http_hosts: Vec<String>,
    #[serde(default)]
    pub key_value_stores: Vec<String>,
    #[serde(default)]
    pub sqlite_databases: Vec<String>,
    /// WASI environment variables for the component.
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// Component variables: name -> template over application variables.
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
    #[serde(default)]
    pub build: Option<BuildConfig>,
    #[serde(flatten)]
    pub other: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ComponentSource {
    Local(String),
    Remote {
        url: String,
        #[allow(dead_code)]
        digest: String,
    },
    Registry(#[allow(dead_code)] toml::Table),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum FileMount {
    /// A path or glob, relative to the manifest directory, mounted at the same path.
    Pattern(String),
    /// `{ source = "dir", destination = "/path" }`
    Placement { source: String, destination: String },
}

/// `[component.X.build]`
#[derive(Debug, Clone, Deserialize)]
pub struct BuildConfig {
    pub command: BuildCommands,
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    pub watch: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum BuildCommands {
    One(String),
    Many(Vec<String>),
}

impl BuildCommands {
    pub fn commands(&self) -> Vec<&str> {
        match self {
            BuildCommands::One(c) => vec![c.as_str()],
            BuildCommands::Many(cs) => cs.iter().map(String::as_str).collect(),
        }
    }
}

// The raw document, before validation.
#[derive(Deserialize)]
struct RawManifest {
    spin_manifest_version: toml::Value,
    #[serde(default)]
    application: Application,
    #[serde(default)]
    variables: BTreeMap<String, VariableDecl>,
    #[serde(default)]
    trigger: BTreeMap<String, Vec<toml::Table>>,
    #[serde(default)]
    component: BTreeMap<String, Component>,
    #[serde(flatten)]
    other: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttpTrigger {
    #[serde(default)]
    #[allow(dead_code)]
    id: Option<String>,
    route: RawRoute,
    component: toml::Value,
    #[serde(default)]
    executor: Option<toml::Table>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawRoute {
    Path(String),
    Private { private: bool },
}

impl Manifest {
    /// Reads and validates `spin.toml`.
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read manifest {}", path.display()))?;
        let dir = path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .unwrap_or(Path::new("."));
        let dir = std::path::absolute(dir)
            .with_context(|| format!("cannot resolve directory of {}", path.display()))?;
        Self::parse(&text, dir).with_context(|| format!("invalid manifest {}", path.display()))
    }

    /// Parses and validates manifest text; `dir` is where relative paths start.
    /// Keeps only the components `ids` and their triggers, as Spin's `spin up
    /// --component-id` (selective deployment) does; empty keeps all. An unknown id is an
    /// error.
    pub fn retain_components(&mut self, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        if let Some(unknown) = ids.iter().find(|id| !self.components.contains_key(*id)) {
            bail!(
                "--component-id {unknown}: the manifest has no such component (it has {})",
                self.components
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        self.components.retain(|id, _| ids.contains(id));
        self.http_triggers.retain(|t| ids.contains(&t.component));
        Ok(())
    }

    pub fn parse(text: &str, dir: PathBuf) -> Result<Manifest> {
        let raw: RawManifest = toml::from_str(text)?;
        ensure!(
            raw.spin_manifest_version.as_integer() == Some(2)
                || raw.spin_manifest_version.as_str() == Some("2"),
            "spin_manifest_version must be 2 (found {})",
            raw.spin_manifest_version
        );
        for key in raw.other.keys() {
            warn(format_args!(
                "ignoring unknown top-level manifest key `{key}`"
            ));
        }
        for (name, decl) in &raw.variables {
            check_variable(name, decl)?;
        }
        let mut http_triggers = Vec::new();
        for (kind, triggers) in raw.trigger {
            if kind != "http" {
                warn(format_args!(
                    "skipping {} `{kind}` trigger(s): edgehost serves only HTTP triggers",
                    triggers.len()
                ));
                continue;
            }
            for (i, table) in triggers.into_iter().enumerate() {
                http_triggers.push(http_trigger(i, table)?);
            }
        }
        for (id, c) in &raw.component {
            check_component(id, c)?;
        }
        for t in &http_triggers {
            ensure!(
                raw.component.contains_key(&t.component),
                "trigger for route {:?} names component `{}`, which is not defined \
                 (expected a [component.{}] table)",
                t.route.as_deref().unwrap_or("<private>"),
                t.component,
                t.component
            );
        }
        Ok(Manifest {
            dir,
            application: raw.application,
            variables: raw.variables,
            http_triggers,
            components: raw.component,
        })
    }

    /// Absolute path of a component's wasm file.
    pub fn source_path(&self, id: &str) -> Option<PathBuf> {
        match &self.components.get(id)?.source {
            ComponentSource::Local(p) => Some(self.dir.join(p)),
            _ => None,
        }
    }
}

/// An application variable's declaration: a valid name, and a default or `required`.
fn check_variable(name: &str, decl: &VariableDecl) -> Result<()> {
    validate_variable_name(name)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("invalid variable name `{name}` in [variables]"))?;
    ensure!(
        !(decl.required && decl.default.is_some()),
        "variable `{name}`: `required = true` and `default` are mutually exclusive"
    );
    ensure!(
        decl.required || decl.default.is_some(),
        "variable `{name}` must have either a `default` or `required = true`"
    );
    Ok(())
}

/// The `i`th `[[trigger.http]]` table: a component named by id, a wasi-http executor, a
/// route pattern or `{ private = true }`.
fn http_trigger(i: usize, table: toml::Table) -> Result<HttpTrigger> {
    let what = format!("[[trigger.http]] #{}", i + 1);
    let t: RawHttpTrigger = toml::Value::Table(table)
        .try_into()
        .with_context(|| format!("invalid {what}"))?;
    let component = match t.component {
        toml::Value::String(id) => id,
        toml::Value::Table(_) => bail!(
            "{what}: inline components are not supported by edgehost; \
             declare a [component.<id>] table and name it in `component`"
        ),
        other => bail!("{what}: `component` must be a component id, found {other}"),
    };
    if let Some(exec) = &t.executor {
        let ty = exec.get("type").and_then(|v| v.as_str()).unwrap_or("");
        ensure!(
            ty == "spin" || ty == "http",
            "{what}: executor type {ty:?} is not supported (only wasi-http components)"
        );
    }
    let route = match t.route {
        RawRoute::Path(p) => Some(p),
        RawRoute::Private { private: true } => None,
        RawRoute::Private { private: false } => {
            bail!("{what}: route must be a string pattern or `{{ private = true }}`")
        }
    };
    Ok(HttpTrigger { route, component })
}

/// A `[component.<id>]` table edgehost can run: a local source, no component
/// dependencies, valid variable names; what it ignores, it says.
fn check_component(id: &str, c: &Component) -> Result<()> {
    validate_component_id(id)?;
    match &c.source {
        ComponentSource::Local(_) => {}
        ComponentSource::Remote { url, .. } => bail!(
            "component `{id}`: remote source {url} is not supported by edgehost \
             (no network); build it locally and use a path"
        ),
        ComponentSource::Registry(_) => {
            bail!("component `{id}`: registry sources are not supported by edgehost")
        }
    }
    for key in c.other.keys() {
        match key.as_str() {
            "dependencies" | "dependencies_inherit_configuration" => {
                bail!("component `{id}`: component dependencies are not supported by edgehost")
            }
            _ => warn(format_args!("component `{id}`: ignoring `{key}`")),
        }
    }
    if !c.allowed_http_hosts.is_empty() {
        warn(format_args!(
            "component `{id}`: `allowed_http_hosts` is a manifest v1 key; \
             use `allowed_outbound_hosts` (ignored)"
        ));
    }
    for name in c.variables.keys() {
        validate_variable_name(name)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("component `{id}`: invalid variable name `{name}`"))?;
    }
    Ok(())
}

/// Spin component ids: lower-case letters, digits, `-` and `_`, starting with a letter.
fn validate_component_id(id: &str) -> Result<()> {
    let ok = id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    ensure!(
        ok,
        "invalid component id `{id}`: use lower-case letters, digits and '-', starting with a letter"
    );
    Ok(())
}

/// Spin's variable-name rules (`spin_expressions::Key`).
pub fn validate_variable_name(name: &str) -> Result<(), String> {
    let reason = if name.is_empty() {
        "must not be empty".to_string()
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_'))
    {
        format!(
            "invalid character {c:?}. Variable names may contain only lower-case letters, numbers, and underscores."
        )
    } else if !name.as_bytes()[0].is_ascii_lowercase() {
        "must start with a lowercase ASCII letter".to_string()
    } else if !name.as_bytes()[name.len() - 1].is_ascii_alphanumeric() {
        "must end with a lowercase ASCII letter or digit".to_string()
    } else if name.contains("__") {
        "must not contain multiple consecutive underscores".to_string()
    } else {
        return Ok(());
    };
    Err(format!("{name:?}: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest> {
        Manifest::parse(text, PathBuf::from("/app"))
    }

    const GOOD: &str = r#"
spin_manifest_version = 2
[application]
name = "demo"
[variables]
jwt_secret = { required = true, secret = true }
base_url = { default = "http://localhost:3000" }
[[trigger.http]]
route = "/api/..."
component = "api"
[[trigger.http]]
route = { private = true }
component = "api"
[component.api]
source = "target/api.wasm"
key_value_stores = ["default"]
sqlite_databases = ["default"]
allowed_outbound_hosts = ["{{ base_url }}"]
[component.api.variables]
jwt = "{{ jwt_secret }}"
[component.api.build]
command = "cargo build"
workdir = "components/api"
"#;

    #[test]
    fn parses_a_good_manifest() {
        let m = parse(GOOD).unwrap();
        assert_eq!(m.application.name, "demo");
        assert_eq!(m.http_triggers.len(), 2);
        assert_eq!(m.http_triggers[0].route.as_deref(), Some("/api/..."));
        assert_eq!(m.http_triggers[1].route, None);
        assert_eq!(
            m.source_path("api").unwrap(),
            PathBuf::from("/app/target/api.wasm")
        );
        let b = m.components["api"].build.as_ref().unwrap();
        assert_eq!(b.command.commands(), vec!["cargo build"]);
    }

    #[test]
    fn a_selection_keeps_its_components_and_their_triggers() {
        let two = format!(
            "{GOOD}[[trigger.http]]\nroute = \"/hooks\"\ncomponent = \"hooks\"\n\
             [component.hooks]\nsource = \"target/hooks.wasm\"\n"
        );
        let mut m = parse(&two).unwrap();
        m.retain_components(&[]).unwrap();
        assert_eq!(m.components.len(), 2);
        m.retain_components(&["hooks".to_string()]).unwrap();
        assert_eq!(m.components.keys().collect::<Vec<_>>(), ["hooks"]);
        assert_eq!(m.http_triggers.len(), 1);
        assert_eq!(m.http_triggers[0].route.as_deref(), Some("/hooks"));
        let err = parse(&two)
            .unwrap()
            .retain_components(&["nope".to_string()])
            .unwrap_err();
        assert!(err.to_string().contains("no such component"), "{err}");
    }

    #[test]
    fn rejects_bad_manifests() {
        let err = |t: &str| format!("{:#}", parse(t).unwrap_err());
        assert!(err("spin_manifest_version = 1").contains("must be 2"));
        let unknown = GOOD.replace(
            "component = \"api\"\n[[trigger.http]]",
            "component = \"nope\"\n[[trigger.http]]",
        );
        assert!(err(&unknown).contains("`nope`"), "{}", err(&unknown));
        let both = GOOD.replace(
            "required = true, secret",
            "required = true, default = \"x\", secret",
        );
        assert!(err(&both).contains("mutually exclusive"));
        let bad_id = GOOD.replace("component.api", "component.Api");
        assert!(err(&bad_id).contains("invalid component id"));
        let remote = GOOD.replace(
            "source = \"target/api.wasm\"",
            "source = { url = \"https://x/y.wasm\", digest = \"sha256:0\" }",
        );
        assert!(err(&remote).contains("remote source"));
    }

    #[test]
    fn names_follow_spin_rules() {
        assert!(validate_variable_name("jwt_secret").is_ok());
        assert!(validate_variable_name("a1").is_ok());
        for bad in ["", "Jwt", "1a", "a_", "a__b", "a-b"] {
            assert!(validate_variable_name(bad).is_err(), "{bad}");
        }
    }
}
