//! Application and component variables, resolved once at start-up.
//!
//! Precedence for an application variable, highest first:
//! `Options.variables` > env `SPIN_VARIABLE_<NAME>` (and any extra `[[config_provider]]
//! type = "env"` prefixes) > the runtime config's `[variables]` table > the manifest
//! `default` > a generated local secret (only for `required = true, secret = true`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::manifest::Manifest;
use crate::runtime_config::RuntimeConfig;

/// File (in the state dir) that keeps generated local secrets across restarts.
pub const GENERATED_FILE: &str = "generated-variables.toml";

/// Spin's variable-name rules (`spin_expressions::Key`).
pub fn validate_name(name: &str) -> Result<(), String> {
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

/// A template such as `"{{ base_url }}/api"`: literal text and `{{ variable }}` references.
#[derive(Debug, Clone, PartialEq)]
pub struct Template(Vec<Part>);

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Lit(String),
    Var(String),
}

impl Template {
    pub fn parse(text: &str) -> Result<Template> {
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(expr) = rest.strip_prefix("{{") {
                let Some((name, tail)) = expr.split_once("}}") else {
                    bail!("unmatched '{{{{' in template {text:?}");
                };
                parts.push(Part::Var(name.trim().to_string()));
                rest = tail;
            } else {
                let end = rest.find("{{").unwrap_or(rest.len());
                parts.push(Part::Lit(rest[..end].to_string()));
                rest = &rest[end..];
            }
        }
        Ok(Template(parts))
    }

    pub fn is_literal(&self) -> bool {
        self.0.iter().all(|p| matches!(p, Part::Lit(_)))
    }

    /// Substitutes the referenced variables; every one must be known.
    pub fn resolve(&self, values: &HashMap<String, String>) -> Result<String> {
        let mut out = String::new();
        for part in &self.0 {
            match part {
                Part::Lit(s) => out.push_str(s),
                Part::Var(name) => match values.get(name) {
                    Some(v) => out.push_str(v),
                    None => bail!("unknown variable {name:?}"),
                },
            }
        }
        Ok(out)
    }
}

/// The resolved application variables.
#[derive(Debug, Clone, Default)]
pub struct AppVariables {
    pub values: HashMap<String, String>,
    /// Secrets generated for this state dir, in name order (printed at start-up).
    pub generated: Vec<(String, String)>,
}

/// Resolves every application variable, generating and persisting local secrets.
/// `defaults` stand in for the manifest's defaults (edgehost's own, e.g. the embedded
/// relay's `relay_url`): any explicit setting still wins.
pub fn resolve_app_variables(
    manifest: &Manifest,
    overrides: &[(String, String)],
    defaults: &[(String, String)],
    runtime: &RuntimeConfig,
    state_dir: &Path,
) -> Result<AppVariables> {
    let overrides: HashMap<&str, &str> = overrides
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let generated_path = state_dir.join(GENERATED_FILE);
    let mut stored = load_generated(&generated_path)?;
    let mut stored_changed = false;

    let mut out = AppVariables::default();
    let mut missing = Vec::new();
    for (name, decl) in &manifest.variables {
        let from_env = runtime.env_prefixes().iter().find_map(|prefix| {
            std::env::var(format!("{prefix}_{}", name.to_ascii_uppercase())).ok()
        });
        let value = overrides
            .get(name.as_str())
            .map(|v| v.to_string())
            .or(from_env)
            .or_else(|| runtime.variables.get(name).cloned())
            .or_else(|| {
                defaults
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
            })
            .or_else(|| decl.default.clone());
        let value = match value {
            Some(v) => v,
            None if decl.required && decl.secret => {
                let v = match stored.get(name) {
                    Some(v) => v.clone(),
                    None => {
                        stored_changed = true;
                        let v = random_hex_32()?;
                        stored.insert(name.clone(), v.clone());
                        v
                    }
                };
                out.generated.push((name.clone(), v.clone()));
                v
            }
            None => {
                missing.push(name.clone());
                continue;
            }
        };
        out.values.insert(name.clone(), value);
    }
    if !missing.is_empty() {
        bail!(
            "required variable(s) have no value: {}. Set them with SPIN_VARIABLE_<NAME> \
             (e.g. SPIN_VARIABLE_{}=...) or in a --runtime-config-file",
            missing.join(", "),
            missing[0].to_ascii_uppercase()
        );
    }
    if stored_changed {
        save_generated(&generated_path, &stored)?;
    }
    Ok(out)
}

/// Resolves a component's `[component.X.variables]` templates.
pub fn component_variables(
    component_id: &str,
    templates: &BTreeMap<String, String>,
    app: &AppVariables,
) -> Result<HashMap<String, String>> {
    templates
        .iter()
        .map(|(name, text)| {
            let value = Template::parse(text)
                .and_then(|t| t.resolve(&app.values))
                .with_context(|| {
                    format!("component `{component_id}`: variable `{name}` = {text:?}")
                })?;
            Ok((name.clone(), value))
        })
        .collect()
}

fn load_generated(path: &Path) -> Result<BTreeMap<String, String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).with_context(|| format!("invalid {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn save_generated(path: &Path, values: &BTreeMap<String, String>) -> Result<()> {
    let mut text = String::from(
        "# Local secrets generated by edgehost for `required = true, secret = true` variables.\n\
         # Development only. Delete this file to generate new ones.\n",
    );
    text.push_str(&toml::to_string(values)?);
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn random_hex_32() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no system randomness: {e}"))?;
    Ok(hex::encode(bytes))
}

// --- Host side of `fermyon:spin/variables@2.0.0` and `wasi:config/store` ---

use crate::bindings::fermyon::spin::variables as spin_vars;
use crate::bindings::wasi::config::store as wasi_config;
use crate::state::InstanceState;

impl InstanceState {
    /// Spin semantics: a bad name is `invalid-name`; a name the component did not declare
    /// in `[component.X.variables]` is `undefined`.
    fn variable(&self, name: &str) -> Result<String, spin_vars::Error> {
        validate_name(name).map_err(spin_vars::Error::InvalidName)?;
        self.env.variables.get(name).cloned().ok_or_else(|| {
            spin_vars::Error::Undefined(format!("no variable for {:?}.{name:?}", self.env.id))
        })
    }
}

impl spin_vars::Host for InstanceState {
    async fn get(&mut self, name: String) -> wasmtime::Result<Result<String, spin_vars::Error>> {
        Ok(self.variable(&name))
    }
}

impl wasi_config::Host for InstanceState {
    async fn get(
        &mut self,
        key: String,
    ) -> wasmtime::Result<Result<Option<String>, wasi_config::Error>> {
        Ok(Ok(self.variable(&key).ok()))
    }

    async fn get_all(
        &mut self,
    ) -> wasmtime::Result<Result<Vec<(String, String)>, wasi_config::Error>> {
        let mut all: Vec<(String, String)> = self
            .env
            .variables
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        all.sort();
        Ok(Ok(all))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_spin_rules() {
        assert!(validate_name("jwt_secret").is_ok());
        assert!(validate_name("a1").is_ok());
        for bad in ["", "Jwt", "1a", "a_", "a__b", "a-b"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn templates_resolve() {
        let vals = HashMap::from([("host".to_string(), "example.com".to_string())]);
        let t = Template::parse("https://{{ host }}/x").unwrap();
        assert!(!t.is_literal());
        assert_eq!(t.resolve(&vals).unwrap(), "https://example.com/x");
        assert!(Template::parse("plain").unwrap().is_literal());
        assert!(Template::parse("{{ nope").is_err());
        assert!(
            Template::parse("{{ other }}")
                .unwrap()
                .resolve(&vals)
                .is_err()
        );
    }
}
