//! The deployment files checked against the code, so that a renamed variable, port, route
//! or job fails here rather than in a deployment: `deploy/kubernetes/*.yaml`,
//! `deploy/fermyon-wasm-functions/README.md` and `components/chat-relay/Dockerfile`
//! against `spin.toml` (variables, routes, outbound hosts), `jobs.toml`, the README's route
//! table (which each component's unit test checks against its route table) and the
//! relay's own configuration (`chat_relay::ENVIRONMENT`, its default ports and public path),
//! and the media server's (`media_agent::ENVIRONMENT`).
//!
//! Each check is a function answering its problems, so the tests below also show that a
//! changed name is caught (the checks run on altered copies).

use serde_yaml::Value as Yaml;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const SPIN_APP: &str = "live-platform";
const APP_SECRETS: &str = "live-platform-secrets";
const RELAY: &str = "chat-relay";
const RELAY_INTERNAL: &str = "chat-relay-internal";

fn read(path: &str) -> String {
    let full = platform_tests::workspace_root().join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn yaml_documents(text: &str) -> Vec<Yaml> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| {
            use serde::Deserialize;
            Yaml::deserialize(doc).expect("valid YAML")
        })
        .filter(|doc| !doc.is_null())
        .collect()
}

/// Every Kubernetes object of `deploy/kubernetes/`, by file.
fn kubernetes() -> Vec<Yaml> {
    let dir = platform_tests::workspace_root().join("deploy/kubernetes");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|p| yaml_documents(&std::fs::read_to_string(p).unwrap()))
        .collect()
}

fn get<'a>(value: &'a Yaml, path: &[&str]) -> &'a Yaml {
    path.iter().fold(value, |v, key| &v[*key])
}

fn text<'a>(value: &'a Yaml, path: &[&str]) -> Option<&'a str> {
    get(value, path).as_str()
}

fn list<'a>(value: &'a Yaml, path: &[&str]) -> &'a [Yaml] {
    get(value, path)
        .as_sequence()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn object<'a>(objects: &'a [Yaml], kind: &str, name: &str) -> &'a Yaml {
    objects
        .iter()
        .find(|o| text(o, &["kind"]) == Some(kind) && text(o, &["metadata", "name"]) == Some(name))
        .unwrap_or_else(|| panic!("no {kind} {name} in deploy/kubernetes"))
}

fn objects_of<'a>(objects: &'a [Yaml], kind: &'a str) -> impl Iterator<Item = &'a Yaml> {
    objects
        .iter()
        .filter(move |o| text(o, &["kind"]) == Some(kind))
}

/// The port of a `host:port` listen address.
fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit_once(':')?.1.parse().ok()
}

/// What `spin.toml` declares: variables (required or with a default, secret or not), the
/// HTTP trigger routes and each component's allowed outbound hosts.
struct SpinManifest {
    variables: BTreeMap<String, Declared>,
    routes: Vec<String>,
    outbound: Vec<String>,
}

struct Declared {
    required: bool,
    secret: bool,
    default: Option<String>,
}

impl SpinManifest {
    fn parse(text: &str) -> SpinManifest {
        let doc: toml::Table = text.parse().expect("spin.toml is TOML");
        let variables = doc["variables"]
            .as_table()
            .unwrap()
            .iter()
            .map(|(name, v)| {
                let flag = |key| v.get(key).and_then(toml::Value::as_bool).unwrap_or(false);
                let declared = Declared {
                    required: flag("required"),
                    secret: flag("secret"),
                    default: v.get("default").and_then(|d| d.as_str()).map(String::from),
                };
                (name.clone(), declared)
            })
            .collect();
        let routes = doc["trigger"]["http"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["route"].as_str().unwrap().to_string())
            .collect();
        let outbound = doc["component"]
            .as_table()
            .unwrap()
            .values()
            .flat_map(|c| {
                c.get("allowed_outbound_hosts")
                    .and_then(|h| h.as_array())
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|h| h.as_str().unwrap().to_string())
            .collect();
        SpinManifest {
            variables,
            routes,
            outbound,
        }
    }

    fn required(&self) -> impl Iterator<Item = &str> {
        self.variables
            .iter()
            .filter(|(_, d)| d.required)
            .map(|(n, _)| n.as_str())
    }
}

fn spin_manifest() -> SpinManifest {
    SpinManifest::parse(&read("spin.toml"))
}

/// A variable as a deployment sets it: a literal value or a reference to a Secret key.
#[derive(Debug, Clone, PartialEq)]
enum Setting {
    Value(String),
    Secret { secret: String, key: String },
}

/// `name`/`value`/`valueFrom.secretKeyRef` lists (a SpinApp's variables, a container's env).
fn settings(entries: &[Yaml]) -> BTreeMap<String, Setting> {
    entries
        .iter()
        .map(|e| {
            let name = text(e, &["name"]).expect("a name").to_string();
            let setting = match text(e, &["value"]) {
                Some(v) => Setting::Value(v.to_string()),
                None => Setting::Secret {
                    secret: text(e, &["valueFrom", "secretKeyRef", "name"])
                        .unwrap_or_else(|| panic!("{name}: a value or a secretKeyRef"))
                        .to_string(),
                    key: text(e, &["valueFrom", "secretKeyRef", "key"])
                        .unwrap()
                        .to_string(),
                },
            };
            (name, setting)
        })
        .collect()
}

fn value<'a>(settings: &'a BTreeMap<String, Setting>, name: &str) -> Option<&'a str> {
    match settings.get(name) {
        Some(Setting::Value(v)) => Some(v),
        _ => None,
    }
}

fn local(url: &str) -> bool {
    ["localhost", "127.0.0.1", "0.0.0.0", "[::1]"]
        .iter()
        .any(|h| url.contains(h))
}

/// The problems of a set of Spin variable settings (a SpinApp's, the Fermyon guide's)
/// against `spin.toml`. `secret_keys`: the keys the app's Secret provides (None: literal
/// values are expected, as on a command line).
fn variable_problems(
    spin: &SpinManifest,
    set: &BTreeMap<String, Setting>,
    secret_keys: Option<&BTreeSet<String>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, setting) in set {
        let Some(declared) = spin.variables.get(name) else {
            problems.push(format!(
                "{name} is set but spin.toml declares no such variable"
            ));
            continue;
        };
        match (setting, secret_keys) {
            (Setting::Value(_), Some(_)) if declared.secret => problems.push(format!(
                "{name} is a secret in spin.toml: take it from a Secret, not a literal value"
            )),
            (Setting::Secret { secret, key }, Some(keys))
                if secret != APP_SECRETS || !keys.contains(key) =>
            {
                problems.push(format!("{name}: the Secret {secret} has no key {key}"));
            }
            _ => {}
        }
        if let Setting::Value(v) = setting
            && (name.ends_with("_url") || name.ends_with("_base"))
            && local(v)
        {
            problems.push(format!("{name} = {v} points at the local machine"));
        }
    }
    for name in spin.required() {
        if !set.contains_key(name) {
            problems.push(format!("spin.toml requires {name}, which is not set"));
        }
    }
    match value(set, "registration_mode") {
        Some("admin") => {}
        other => problems.push(format!("registration_mode must be admin, not {other:?}")),
    }
    match (value(set, "sfu_server_url"), value(set, "sfu_api_url")) {
        (Some(client), Some(api)) => {
            if !(client.starts_with("wss://") || client.starts_with("ws://")) {
                problems.push(format!("sfu_server_url = {client}: clients need ws/wss"));
            }
            if !(api.starts_with("https://") || api.starts_with("http://")) {
                problems.push(format!("sfu_api_url = {api}: the server calls http/https"));
            }
        }
        _ => problems.push("set both sfu_server_url and sfu_api_url".into()),
    }
    match value(set, "database") {
        Some("postgres") => {
            for name in ["postgres_url", "postgres_host"] {
                if !set.contains_key(name) {
                    problems.push(format!("database=postgres needs {name}"));
                }
            }
        }
        Some("sqlite") => {}
        other => problems.push(format!(
            "database must be postgres or sqlite, not {other:?}"
        )),
    }
    problems
}

fn secret_keys(objects: &[Yaml], name: &str) -> BTreeSet<String> {
    let secret = object(objects, "Secret", name);
    get(secret, &["stringData"])
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect()
}

fn spin_app_settings(objects: &[Yaml]) -> BTreeMap<String, Setting> {
    settings(list(
        object(objects, "SpinApp", SPIN_APP),
        &["spec", "variables"],
    ))
}

#[test]
fn the_spinapp_sets_declared_variables_secrets_from_the_secret_and_every_required_one() {
    let objects = kubernetes();
    let keys = secret_keys(&objects, APP_SECRETS);
    let set = spin_app_settings(&objects);
    let problems = variable_problems(&spin_manifest(), &set, Some(&keys));
    assert!(problems.is_empty(), "spinapp.yaml: {problems:#?}");

    let app = object(&objects, "SpinApp", SPIN_APP);
    assert_eq!(
        text(app, &["apiVersion"]),
        Some("core.spinkube.dev/v1alpha1")
    );
    let runtime = text(app, &["spec", "runtimeConfig", "loadFromSecret"]).unwrap();
    assert!(secret_keys(&objects, runtime).contains("runtime-config.toml"));
    // The probes ask routes the app serves.
    for probe in ["readiness", "liveness"] {
        let path = text(app, &["spec", "checks", probe, "httpGet", "path"]).unwrap();
        assert!(
            served_by_spin(&spin_manifest().routes, path),
            "{probe}: {path}"
        );
    }
}

/// The probes are asked of a running app, not only matched against the routes: a path
/// that no longer answers 200 (an asset renamed by its content hash) would keep every pod
/// unready.
#[tokio::test(flavor = "multi_thread")]
async fn the_spinapps_probes_answer_200_from_a_running_app() {
    let objects = kubernetes();
    let app = object(&objects, "SpinApp", SPIN_APP);
    let p = platform_tests::Platform::start().await;
    for probe in ["readiness", "liveness"] {
        let path = text(app, &["spec", "checks", probe, "httpGet", "path"]).unwrap();
        let status = p
            .request(platform_tests::Method::GET, path)
            .send()
            .await
            .expect("the app answers")
            .status();
        assert_eq!(status, 200, "the {probe} probe {path}");
    }
    p.stop().await;
}

#[test]
fn a_renamed_or_missing_variable_is_caught() {
    let objects = kubernetes();
    let keys = secret_keys(&objects, APP_SECRETS);
    let set = spin_app_settings(&objects);

    // spin.toml renames a variable the SpinApp sets.
    let renamed = read("spin.toml").replace("jwt_secret", "jwt_signing_secret");
    let problems = variable_problems(&SpinManifest::parse(&renamed), &set, Some(&keys));
    assert!(
        problems.iter().any(|p| p.contains("jwt_secret is set"))
            && problems
                .iter()
                .any(|p| p.contains("requires jwt_signing_secret")),
        "{problems:#?}"
    );

    // The SpinApp forgets a required secret, or inlines one.
    let mut missing = set.clone();
    missing.remove("relay_secret");
    let problems = variable_problems(&spin_manifest(), &missing, Some(&keys));
    assert!(
        problems.iter().any(|p| p.contains("relay_secret")),
        "{problems:#?}"
    );
    let mut inlined = set.clone();
    inlined.insert("jobs_token".into(), Setting::Value("hunter2".into()));
    let problems = variable_problems(&spin_manifest(), &inlined, Some(&keys));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("jobs_token is a secret")),
        "{problems:#?}"
    );

    // The SFU URLs swapped.
    let mut swapped = set.clone();
    swapped.insert(
        "sfu_api_url".into(),
        Setting::Value("wss://my.livekit.cloud".into()),
    );
    let problems = variable_problems(&spin_manifest(), &swapped, Some(&keys));
    assert!(
        problems.iter().any(|p| p.contains("sfu_api_url")),
        "{problems:#?}"
    );
}

#[test]
fn only_http_addresses_are_outbound_hosts_and_the_sfu_defaults_are_split() {
    let spin = spin_manifest();
    // A ws/wss URL has no default port: Spin refuses it as an outbound host.
    for host in &spin.outbound {
        assert!(!host.contains("sfu_server_url"), "{host}");
    }
    assert!(spin.outbound.iter().any(|h| h == "{{ sfu_api_url }}"));
    let default = |name: &str| spin.variables[name].default.clone().unwrap();
    assert!(default("sfu_server_url").starts_with("ws://"));
    assert!(default("sfu_api_url").starts_with("http://"));
}

/// The runtime config the SpinApp loads: Spin's format, the key-value store in the
/// cluster's Redis (another database than the relays' fan-out).
#[test]
fn the_runtime_config_secret_puts_the_key_value_store_in_the_clusters_redis() {
    let objects = kubernetes();
    let secret = object(&objects, "Secret", "live-platform-runtime-config");
    let config: toml::Table = text(secret, &["stringData", "runtime-config.toml"])
        .unwrap()
        .parse()
        .expect("runtime-config.toml is TOML");
    let kv = &config["key_value_store"]["default"];
    assert_eq!(kv["type"].as_str(), Some("redis"));
    let kv_url = kv["url"].as_str().unwrap();
    let redis = object(&objects, "Service", "redis");
    let redis_port = list(redis, &["spec", "ports"])[0]["port"].as_u64().unwrap();
    assert!(
        kv_url.starts_with(&format!("redis://redis:{redis_port}/")),
        "{kv_url}"
    );

    let relay_env = relay_env(&objects);
    let fan_out = value(&relay_env, "REDIS_URL").unwrap();
    assert!(
        fan_out.starts_with(&format!("redis://redis:{redis_port}/")),
        "{fan_out}"
    );
    assert_ne!(
        kv_url, fan_out,
        "the key-value store is a whole Redis database"
    );
    // Only tables Spin knows.
    for key in config.keys() {
        assert!(
            ["key_value_store", "sqlite_database", "variables_provider"].contains(&key.as_str()),
            "{key}"
        );
    }
}

fn relay_container(objects: &[Yaml]) -> &Yaml {
    let deployment = object(objects, "Deployment", RELAY);
    let containers = list(deployment, &["spec", "template", "spec", "containers"]);
    assert_eq!(containers.len(), 1);
    &containers[0]
}

fn relay_env(objects: &[Yaml]) -> BTreeMap<String, Setting> {
    settings(list(relay_container(objects), &["env"]))
}

fn container_port(container: &Yaml, name: &str) -> u16 {
    list(container, &["ports"])
        .iter()
        .find(|p| text(p, &["name"]) == Some(name))
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap_or_else(|| panic!("no container port {name}")) as u16
}

/// The port a Service exposes, after checking it forwards to the named container port.
fn service_port(objects: &[Yaml], service: &str, target: &str) -> u16 {
    let svc = object(objects, "Service", service);
    let ports = list(svc, &["spec", "ports"]);
    assert_eq!(ports.len(), 1, "{service}");
    assert_eq!(text(&ports[0], &["targetPort"]), Some(target), "{service}");
    assert_eq!(
        text(svc, &["spec", "selector", "app.kubernetes.io/name"]),
        Some(RELAY),
        "{service}"
    );
    ports[0]["port"].as_u64().unwrap() as u16
}

fn relay_problems(objects: &[Yaml], known: &[(&str, bool)]) -> Vec<String> {
    let mut problems = Vec::new();
    let env = relay_env(objects);
    for name in env.keys() {
        if !known.iter().any(|(k, _)| k == name) {
            problems.push(format!("the relay reads no variable {name}"));
        }
    }
    for (name, required) in known {
        if *required && !env.contains_key(*name) {
            problems.push(format!("the relay requires {name}"));
        }
    }
    let app = spin_app_settings(objects);
    for (relay_name, app_name) in [
        ("JWT_SECRET", "jwt_secret"),
        ("RELAY_SECRET", "relay_secret"),
    ] {
        if env.get(relay_name) != app.get(app_name) {
            problems.push(format!("{relay_name} must be the app's {app_name}"));
        }
    }
    problems
}

#[test]
fn the_relay_deployment_matches_the_relays_configuration() {
    let objects = kubernetes();
    let problems = relay_problems(&objects, chat_relay::ENVIRONMENT);
    assert!(problems.is_empty(), "relay.yaml: {problems:#?}");

    // A variable the relay renamed is caught.
    let renamed: Vec<(&str, bool)> = chat_relay::ENVIRONMENT
        .iter()
        .map(|(n, r)| {
            (
                if *n == "RELAY_SECRET" {
                    "RELAY_SHARED_SECRET"
                } else {
                    *n
                },
                *r,
            )
        })
        .collect();
    let problems = relay_problems(&objects, &renamed);
    assert!(
        problems.iter().any(|p| p.contains("RELAY_SECRET")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("RELAY_SHARED_SECRET")),
        "{problems:#?}"
    );

    // Ports: listen addresses, container ports and Services agree.
    let env = relay_env(&objects);
    let container = relay_container(&objects);
    let public = port_of(value(&env, "LISTEN").unwrap()).unwrap();
    let internal = port_of(value(&env, "INTERNAL_LISTEN").unwrap()).unwrap();
    assert_eq!(container_port(container, "ws"), public);
    assert_eq!(container_port(container, "internal"), internal);
    // The defaults of the binary are the ports the image and manifests use.
    assert_eq!(port_of(chat_relay::DEFAULT_LISTEN), Some(public));
    assert_eq!(port_of(chat_relay::DEFAULT_INTERNAL_LISTEN), Some(internal));
    service_port(&objects, RELAY, "ws");
    let internal_service = service_port(&objects, RELAY_INTERNAL, "internal");

    // The app pushes events to the internal Service; the relay calls the app's Service.
    let app = spin_app_settings(&objects);
    assert_eq!(
        value(&app, "relay_url"),
        Some(format!("http://{RELAY_INTERNAL}:{internal_service}").as_str())
    );
    assert_eq!(
        value(&env, "API_URL"),
        Some(format!("http://{SPIN_APP}").as_str())
    );
    assert_eq!(value(&env, "BASE_URL"), value(&app, "base_url"));

    // The autoscaler scales this Deployment; the NetworkPolicy keeps the internal port to
    // the Spin app's pods.
    let hpa = object(&objects, "HorizontalPodAutoscaler", RELAY);
    assert_eq!(
        text(hpa, &["spec", "scaleTargetRef", "kind"]),
        Some("Deployment")
    );
    assert_eq!(text(hpa, &["spec", "scaleTargetRef", "name"]), Some(RELAY));
    let policy = object(&objects, "NetworkPolicy", RELAY_INTERNAL);
    let rules = list(policy, &["spec", "ingress"]);
    for rule in rules {
        let ports: Vec<u64> = list(rule, &["ports"])
            .iter()
            .filter_map(|p| p["port"].as_u64())
            .collect();
        if ports.contains(&u64::from(internal)) {
            let from = list(rule, &["from"]);
            assert_eq!(from.len(), 1);
            assert_eq!(
                text(
                    &from[0],
                    &["podSelector", "matchLabels", "core.spinkube.dev/app-name"]
                ),
                Some(SPIN_APP)
            );
        }
    }
    assert!(rules.iter().any(|r| {
        list(r, &["ports"])
            .iter()
            .any(|p| p["port"].as_u64() == Some(u64::from(public)))
    }));
}

#[test]
fn the_relay_dockerfile_is_multi_stage_static_and_exposes_the_relays_ports() {
    let dockerfile = read("components/chat-relay/Dockerfile");
    let instructions: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms: Vec<&&str> = instructions
        .iter()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert!(froms.len() >= 2, "multi-stage: {froms:?}");
    assert_eq!(
        froms.last().map(|l| l.trim()),
        Some("FROM scratch"),
        "a static image"
    );
    assert!(dockerfile.contains("-p chat-relay"), "builds the relay");
    // The profile it builds with exists, and unwinds (a panicking task must not abort).
    let profile = dockerfile
        .split_whitespace()
        .skip_while(|w| *w != "--profile")
        .nth(1)
        .expect("--profile");
    let workspace: toml::Table = read("Cargo.toml").parse().unwrap();
    let chosen = &workspace["profile"][profile];
    assert_eq!(chosen["panic"].as_str(), Some("unwind"), "{profile}");
    assert!(dockerfile.contains(&format!("target/{profile}/chat-relay")));
    assert!(
        instructions
            .iter()
            .any(|l| l.starts_with("USER ") && !l.contains("root"))
    );

    // ENV names are the relay's, and the ports it listens on are the ones exposed.
    let env_block = dockerfile
        .split("\nENV ")
        .nth(1)
        .expect("ENV")
        .split("\nEXPOSE")
        .next()
        .unwrap();
    let env: BTreeMap<&str, &str> = env_block
        .split(['\\', '\n', ' '])
        .filter_map(|pair| pair.split_once('='))
        .collect();
    for name in env.keys() {
        assert!(chat_relay::is_environment_variable(name), "{name}");
    }
    let exposed: BTreeSet<u16> = instructions
        .iter()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(|ports| ports.split_whitespace().map(|p| p.parse::<u16>().unwrap()))
        .collect();
    let listening: BTreeSet<u16> = ["LISTEN", "INTERNAL_LISTEN"]
        .iter()
        .map(|n| port_of(env[n]).unwrap())
        .collect();
    assert_eq!(exposed, listening);
    let objects = kubernetes();
    let renv = relay_env(&objects);
    for name in ["LISTEN", "INTERNAL_LISTEN"] {
        assert_eq!(
            port_of(env[name]),
            port_of(value(&renv, name).unwrap()),
            "{name}"
        );
    }
}

/// Whether a path is one of `spin.toml`'s routes (`/x/...` wildcards and `:param`s).
fn served_by_spin(routes: &[String], path: &str) -> bool {
    routes.iter().any(|route| {
        if let Some(prefix) = route.strip_suffix("/...") {
            return path.starts_with(&format!("{prefix}/"));
        }
        let (want, got): (Vec<&str>, Vec<&str>) =
            (route.split('/').collect(), path.split('/').collect());
        want.len() == got.len()
            && want
                .iter()
                .zip(&got)
                .all(|(w, g)| w.starts_with(':') && !g.is_empty() || w == g)
    })
}

/// The backend (Service, port) an Ingress sends `path` to: the longest `Prefix` path that
/// matches whole segments, as Kubernetes defines it.
fn ingress_backend(ingress: &Yaml, path: &str) -> Option<(String, u16)> {
    let mut best: Option<(usize, String, u16)> = None;
    for rule in list(ingress, &["spec", "rules"]) {
        for p in list(rule, &["http", "paths"]) {
            assert_eq!(text(p, &["pathType"]), Some("Prefix"));
            let prefix = text(p, &["path"]).unwrap().trim_end_matches('/');
            let matches =
                prefix.is_empty() || path == prefix || path.starts_with(&format!("{prefix}/"));
            if matches && best.as_ref().is_none_or(|(len, _, _)| prefix.len() > *len) {
                let service = text(p, &["backend", "service", "name"])
                    .unwrap()
                    .to_string();
                let port = get(p, &["backend", "service", "port", "number"])
                    .as_u64()
                    .unwrap();
                best = Some((prefix.len(), service, port as u16));
            }
        }
    }
    best.map(|(_, s, p)| (s, p))
}

#[test]
fn the_ingress_sends_the_sockets_to_the_relay_and_every_route_to_the_app() {
    let objects = kubernetes();
    let ingress = object(&objects, "Ingress", SPIN_APP);
    let spin = spin_manifest();
    let relay = (RELAY.to_string(), service_port(&objects, RELAY, "ws"));
    let app = (SPIN_APP.to_string(), 80);

    // The relay's public path goes to the relay; the internal one is never routed there.
    assert!(
        list(ingress, &["spec", "rules"])
            .iter()
            .any(|r| list(r, &["http", "paths"])
                .iter()
                .any(|p| text(p, &["path"]) == Some(chat_relay::PUBLIC_PATH_PREFIX))),
        "an Ingress path {}",
        chat_relay::PUBLIC_PATH_PREFIX
    );
    let socket = format!("{}streams/0b7c/chat", chat_relay::PUBLIC_PATH_PREFIX);
    assert_eq!(ingress_backend(ingress, &socket), Some(relay.clone()));
    assert_ne!(
        ingress_backend(ingress, "/internal/streams/x/events"),
        Some(relay.clone())
    );

    // Every route of spin.toml reaches the app: an example path of each.
    for route in &spin.routes {
        let example = route.replace("/...", "/anything").replace(":id", "0b7c");
        assert!(
            served_by_spin(&spin.routes, &example),
            "{route} -> {example}"
        );
        assert_eq!(
            ingress_backend(ingress, &example),
            Some(app.clone()),
            "{route}"
        );
        assert!(
            !route.starts_with(chat_relay::PUBLIC_PATH_PREFIX),
            "{route}"
        );
    }
    // The app's Service is the SpinApp's (SpinKube names it after the app, port 80).
    assert!(
        objects_of(&objects, "SpinApp").any(|a| text(a, &["metadata", "name"]) == Some(SPIN_APP))
    );
}

/// A job of `jobs.toml`.
struct Job {
    name: String,
    every: Option<String>,
}

fn jobs(text: &str) -> Vec<Job> {
    let doc: toml::Table = text.parse().expect("jobs.toml is TOML");
    doc["job"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| Job {
            name: j["name"].as_str().unwrap().to_string(),
            every: j.get("every").and_then(|e| e.as_str()).map(String::from),
        })
        .collect()
}

/// The cron schedule of an `every` interval that cron can say (whole minutes or hours).
fn cron_of(every: &str) -> Option<String> {
    let (n, unit) = every.split_at(every.find(|c: char| !c.is_ascii_digit())?);
    let n: u32 = n.parse().ok()?;
    match (unit, n) {
        ("m", 1) => Some("* * * * *".into()),
        ("m", 2..=59) => Some(format!("*/{n} * * * *")),
        ("h", 1) => Some("0 * * * *".into()),
        ("h", 2..=23) => Some(format!("0 */{n} * * *")),
        // Cron says minutes at the finest: a job due every few seconds runs every minute.
        ("s", 1..=59) => Some("* * * * *".into()),
        _ => None,
    }
}

/// The CronJobs' jobs: name -> schedule, after checking how each calls the app.
fn cron_jobs(objects: &[Yaml]) -> BTreeMap<String, String> {
    objects_of(objects, "CronJob")
        .map(|cron| {
            let pod = get(cron, &["spec", "jobTemplate", "spec", "template", "spec"]);
            let container = &list(pod, &["containers"])[0];
            let env = settings(list(container, &["env"]));
            let job = value(&env, "JOB").expect("JOB").to_string();
            // The SpinApp that runs the component serving the job's route.
            let component = component_serving(&format!("/api/jobs/{job}"));
            let app = spin_app_running(objects, &component);
            assert_eq!(
                value(&env, "APP_URL"),
                Some(format!("http://{app}").as_str()),
                "{job} is served by {component}, which the SpinApp {app} runs"
            );
            assert_eq!(
                env.get("JOBS_TOKEN"),
                spin_app_settings(objects).get("jobs_token"),
                "{job}: the app's jobs_token"
            );
            let script = list(container, &["command"])
                .iter()
                .filter_map(Yaml::as_str)
                .collect::<Vec<_>>()
                .join(" ");
            assert!(script.contains("-X POST"), "{job}");
            assert!(script.contains("\"$APP_URL/api/jobs/$JOB\""), "{job}");
            assert!(
                script.contains("authorization: Bearer $JOBS_TOKEN"),
                "{job}"
            );
            assert_eq!(
                text(cron, &["spec", "concurrencyPolicy"]),
                Some("Forbid"),
                "{job}"
            );
            (job, text(cron, &["spec", "schedule"]).unwrap().to_string())
        })
        .collect()
}

/// The component of `spin.toml` whose HTTP trigger serves `path` (the most specific one,
/// as Spin routes: an exact route before a wildcard).
fn component_serving(path: &str) -> String {
    let doc: toml::Table = read("spin.toml").parse().expect("spin.toml is TOML");
    let triggers = doc["trigger"]["http"].as_array().unwrap();
    let route_of = |t: &toml::Value| t["route"].as_str().unwrap_or_default().to_string();
    let exact = triggers.iter().find(|t| route_of(t) == path);
    let wildcard = || {
        triggers
            .iter()
            .filter(|t| {
                route_of(t)
                    .strip_suffix("...")
                    .is_some_and(|prefix| path.starts_with(prefix))
            })
            .max_by_key(|t| route_of(t).len())
    };
    exact
        .or_else(wildcard)
        .map(|t| t["component"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no trigger of spin.toml serves {path}"))
}

/// The components `spin.toml` declares.
fn component_ids() -> Vec<String> {
    let doc: toml::Table = read("spin.toml").parse().expect("spin.toml is TOML");
    doc["component"]
        .as_table()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

/// The components a SpinApp runs (`spec.components`; all when it lists none).
fn components_of(app: &Yaml) -> Vec<String> {
    match get(app, &["spec", "components"]).as_sequence() {
        Some(list) => list
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect(),
        None => component_ids(),
    }
}

/// The name of the one SpinApp that runs `component`.
fn spin_app_running<'a>(objects: &'a [Yaml], component: &str) -> &'a str {
    let apps: Vec<&str> = objects_of(objects, "SpinApp")
        .filter(|app| components_of(app).iter().any(|c| c == component))
        .map(|app| text(app, &["metadata", "name"]).unwrap())
        .collect();
    match apps.as_slice() {
        [one] => one,
        other => panic!("{component} runs in {} SpinApps: {other:?}", other.len()),
    }
}

/// The `[outbound_networking] block_networks` of a SpinApp's runtime config.
fn blocked_networks(objects: &[Yaml], app: &Yaml) -> Vec<String> {
    let secret_name = text(app, &["spec", "runtimeConfig", "loadFromSecret"]).unwrap();
    let secret = object(objects, "Secret", secret_name);
    let config: toml::Table = text(secret, &["stringData", "runtime-config.toml"])
        .unwrap()
        .parse()
        .expect("the runtime config is TOML");
    config
        .get("outbound_networking")
        .and_then(|o| o.get("block_networks"))
        .and_then(|b| b.as_array())
        .map(|b| b.iter().map(|n| n.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn every_component_runs_once_and_only_the_one_reaching_any_host_blocks_private_networks() {
    let objects = kubernetes();
    for component in component_ids() {
        let name = spin_app_running(&objects, &component);
        let app = object(&objects, "SpinApp", name);
        let blocked = blocked_networks(&objects, app).contains(&"private".to_string());
        let doc: toml::Table = read("spin.toml").parse().unwrap();
        let reaches_any_host = doc["component"][component.as_str()]
            .get("allowed_outbound_hosts")
            .and_then(|h| h.as_array())
            .is_some_and(|hosts| hosts.iter().any(|h| h.as_str().unwrap().contains("://*")));
        // The component that connects to hosts tenants choose must not reach private
        // networks; the others must reach the private hosts spin.toml names (the relay's
        // in-cluster address), so their SpinApp may not block them.
        assert_eq!(
            blocked, reaches_any_host,
            "{component} (SpinApp {name}): blocks private networks: {blocked}, \
             reaches any host: {reaches_any_host}"
        );
    }
    let main = spin_app_settings(&objects);
    let relay_url = value(&main, "relay_url").unwrap();
    assert!(
        relay_url.starts_with("http://chat-relay-internal"),
        "{relay_url}"
    );

    // Spin resolves every required variable at start, whatever components run: the
    // delivery SpinApp sets them, from the app's Secret, and the same database.
    let keys = secret_keys(&objects, APP_SECRETS);
    let delivery = object(&objects, "SpinApp", spin_app_running(&objects, "webhooks"));
    let set = settings(list(delivery, &["spec", "variables"]));
    for name in spin_manifest().required() {
        assert!(
            set.contains_key(name),
            "the delivery SpinApp does not set {name}"
        );
    }
    for (name, setting) in &set {
        if let Setting::Secret { secret, key } = setting {
            assert!(secret == APP_SECRETS && keys.contains(key), "{name}");
        }
        assert_eq!(
            Some(setting),
            main.get(name),
            "{name}: set as the app sets it"
        );
    }
    for name in ["database", "postgres_host", "postgres_url"] {
        assert_eq!(set.get(name), main.get(name), "{name}");
    }
}

fn job_problems(jobs: &[Job], scheduled: &BTreeMap<String, String>, readme: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let routes = edge::routing::documented_routes(readme);
    let names: BTreeSet<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    for name in scheduled.keys() {
        if !names.contains(name.as_str()) {
            problems.push(format!("{name} is scheduled but is no job of jobs.toml"));
        }
    }
    for job in jobs {
        let path = format!("/api/jobs/{}", job.name);
        if !routes
            .iter()
            .any(|r| r.method == "POST" && r.path == path && r.tier == "jobs")
        {
            problems.push(format!("{path} is no jobs route of the application"));
        }
        match (scheduled.get(&job.name), &job.every) {
            (None, _) => problems.push(format!("{} has no schedule", job.name)),
            (Some(cron), Some(every)) if cron_of(every).as_ref() != Some(cron) => {
                problems.push(format!(
                    "{}: scheduled {cron:?}, jobs.toml says every {every}",
                    job.name
                ))
            }
            _ => {}
        }
    }
    problems
}

#[test]
fn every_job_has_a_cronjob_calling_its_jobs_route_on_its_schedule() {
    let objects = kubernetes();
    let scheduled = cron_jobs(&objects);
    let jobs = jobs(&read("jobs.toml"));
    let readme = read("README.md");
    let problems = job_problems(&jobs, &scheduled, &readme);
    assert!(problems.is_empty(), "cronjobs.yaml: {problems:#?}");

    // A job renamed in jobs.toml, or a route gone from the API, is caught.
    let renamed = self::jobs(&read("jobs.toml").replace("\"prune\"", "\"cleanup\""));
    let problems = job_problems(&renamed, &scheduled, &readme);
    assert!(
        problems.iter().any(|p| p.contains("prune is scheduled")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("cleanup")),
        "{problems:#?}"
    );
    let without_route = readme.replace("`/api/jobs/prune`", "`/api/jobs/pruned`");
    let problems = job_problems(&jobs, &scheduled, &without_route);
    assert!(
        problems.iter().any(|p| p.contains("/api/jobs/prune is no")),
        "{problems:#?}"
    );
    assert_eq!(cron_of("1h").as_deref(), Some("0 * * * *"));
    assert_eq!(cron_of("15m").as_deref(), Some("*/15 * * * *"));
    assert_eq!(cron_of("2s").as_deref(), Some("* * * * *"));
    assert_eq!(cron_of("90m"), None);
}

/// The `--variable name=value` settings and the `spin aka crons create` lines of the
/// Fermyon Wasm Functions guide.
fn fermyon_guide() -> (BTreeMap<String, Setting>, BTreeMap<String, String>) {
    let guide = shell_blocks(&read("deploy/fermyon-wasm-functions/README.md"));
    let words = shell_words(&guide);
    let mut variables = BTreeMap::new();
    for pair in words.windows(2) {
        if pair[0] == "--variable" {
            let (name, value) = pair[1].split_once('=').expect("name=value");
            variables.insert(name.to_string(), Setting::Value(value.to_string()));
        }
    }
    let mut crons = BTreeMap::new();
    for command in guide.split("spin aka crons create").skip(1) {
        let words = shell_words(command.split("\n\n").next().unwrap());
        let flag = |name: &str| {
            words
                .windows(2)
                .find(|w| w[0] == name)
                .map(|w| w[1].clone())
                .unwrap_or_else(|| panic!("{name} in {command}"))
        };
        let (name, schedule, path) = (flag("--name"), flag("--schedule"), flag("--path-and-query"));
        assert_eq!(
            path,
            format!("/api/jobs/{name}?token=$JOBS_TOKEN"),
            "{name}"
        );
        crons.insert(name, schedule);
    }
    (variables, crons)
}

/// The text of a Markdown file's ```sh blocks (the prose around them is not shell).
fn shell_blocks(markdown: &str) -> String {
    markdown
        .split("```sh\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Splits shell text into words: quotes removed, `\` line continuations joined.
fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut in_word = false;
    for c in text.replace("\\\n", " ").chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[test]
fn the_fermyon_guide_sets_every_required_variable_and_schedules_every_job() {
    let (variables, crons) = fermyon_guide();
    let problems = variable_problems(&spin_manifest(), &variables, None);
    assert!(problems.is_empty(), "the Fermyon guide: {problems:#?}");
    // Fermyon Wasm Functions has no Spin SQLite.
    assert_eq!(value(&variables, "database"), Some("postgres"));
    let problems = job_problems(&jobs(&read("jobs.toml")), &crons, &read("README.md"));
    assert!(
        problems.is_empty(),
        "the Fermyon guide's crons: {problems:#?}"
    );
    // Both guides schedule the jobs alike.
    assert_eq!(crons, cron_jobs(&kubernetes()));
}

#[test]
fn the_guides_are_linked_and_kustomize_applies_every_manifest() {
    let readme = read("README.md");
    let overview = read("docs/deploy.md");
    for guide in [
        "deploy/fermyon-wasm-functions/README.md",
        "deploy/kubernetes/README.md",
    ] {
        assert!(
            readme.contains(&format!("({guide})")),
            "README links {guide}"
        );
        assert!(
            overview.contains(&format!("(../{guide})")),
            "docs/deploy.md links {guide}"
        );
    }
    assert!(readme.contains("components/chat-relay/Dockerfile"));
    let kustomization = yaml_documents(&read("deploy/kubernetes/kustomization.yaml"));
    let listed: BTreeSet<&str> = list(&kustomization[0], &["resources"])
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    let dir = platform_tests::workspace_root().join("deploy/kubernetes");
    let files: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml" && !n.contains("example"))
        .collect();
    assert_eq!(listed, files.iter().map(String::as_str).collect());
    assert!(Path::new(&dir).join("README.md").exists());
}

const MEDIA: &str = "media-server";

/// The media server's Deployment, its environment and its Services, against the agent's
/// own configuration (`media_agent::ENVIRONMENT`) and the app's variables.
fn media_problems(objects: &[Yaml], known: &[(&str, bool)]) -> Vec<String> {
    let mut problems = Vec::new();
    let deployment = object(objects, "Deployment", MEDIA);
    let containers = list(deployment, &["spec", "template", "spec", "containers"]);
    let container = &containers[0];
    let env = settings(list(container, &["env"]));
    for name in env.keys() {
        if !known.iter().any(|(k, _)| k == name) {
            problems.push(format!("the media agent reads no variable {name}"));
        }
    }
    for (name, required) in known {
        if *required && !env.contains_key(*name) {
            problems.push(format!("the media agent requires {name}"));
        }
    }
    let app = spin_app_settings(objects);
    if env.get("MEDIA_SECRET") != app.get("media_secret") {
        problems.push("MEDIA_SECRET must be the app's media_secret".into());
    }
    // The object store's settings come from one Secret (its key never in the manifest),
    // all of them or none.
    let store: Vec<_> = env
        .iter()
        .filter(|(name, _)| name.starts_with("MEDIA_STORE_"))
        .collect();
    if store.len() != 5
        || store.iter().any(|(_, setting)| {
            !matches!(setting, Setting::Secret { secret, .. } if secret == "media-store")
        })
    {
        problems.push("the media store's settings come from the Secret media-store".into());
    }
    if value(&env, "PLATFORM_URL") != Some(format!("http://{SPIN_APP}").as_str()) {
        problems.push("PLATFORM_URL must be the app's Service".into());
    }
    // The ingest's path is the RTMP application; the playback path is the HLS prefix.
    let path_of = |url: &str| {
        url.split("://")
            .nth(1)
            .and_then(|r| r.find('/').map(|i| r[i..].to_string()))
    };
    let rtmp = value(&app, "rtmp_ingest_base").and_then(path_of);
    if rtmp.as_deref().map(|p| p.trim_matches('/')) != value(&env, "RTMP_APP") {
        problems.push(format!("rtmp_ingest_base's path {rtmp:?} is not RTMP_APP"));
    }
    let hls = value(&app, "playback_hls_base").and_then(path_of);
    if hls.as_deref() != value(&env, "HLS_PREFIX") {
        problems.push(format!(
            "playback_hls_base's path {hls:?} is not HLS_PREFIX"
        ));
    }
    // Listen ports, container ports and Services agree.
    for (listen, port_name, service) in [
        ("RTMP_LISTEN", "rtmp", "media-ingest"),
        ("HTTP_LISTEN", "hls", "media-hls"),
    ] {
        let port = value(&env, listen).and_then(port_of);
        if port != Some(container_port(container, port_name)) {
            problems.push(format!("{listen} is not the container port {port_name}"));
        }
        let svc = object(objects, "Service", service);
        let ports = list(svc, &["spec", "ports"]);
        if text(svc, &["spec", "selector", "app.kubernetes.io/name"]) != Some(MEDIA)
            || text(&ports[0], &["targetPort"]) != Some(port_name)
        {
            problems.push(format!("the Service {service} does not reach {port_name}"));
        }
    }
    problems
}

#[test]
fn the_media_server_matches_the_agents_configuration_and_the_apps_addresses() {
    let objects = kubernetes();
    let problems = media_problems(&objects, media_agent::ENVIRONMENT);
    assert!(problems.is_empty(), "media-server.yaml: {problems:#?}");
    // A variable the agent renamed is caught.
    let renamed: Vec<(&str, bool)> = media_agent::ENVIRONMENT
        .iter()
        .map(|(n, r)| {
            (
                if *n == "MEDIA_SECRET" {
                    "MEDIA_KEY"
                } else {
                    *n
                },
                *r,
            )
        })
        .collect();
    let problems = media_problems(&objects, &renamed);
    assert!(
        problems.iter().any(|p| p.contains("MEDIA_SECRET")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("MEDIA_KEY")),
        "{problems:#?}"
    );

    // RTMP comes from the internet through a LoadBalancer; HLS through the Ingress, at the
    // host and path playback_hls_base names.
    let ingest = object(&objects, "Service", "media-ingest");
    assert_eq!(text(ingest, &["spec", "type"]), Some("LoadBalancer"));
    let app = spin_app_settings(&objects);
    let hls_base = value(&app, "playback_hls_base").unwrap();
    let base_url = value(&app, "base_url").unwrap();
    assert!(hls_base.starts_with(&format!("{base_url}/")), "{hls_base}");
    let ingress = object(&objects, "Ingress", SPIN_APP);
    let stream = format!(
        "{}/0b7c8e4e-1d2f-4a5b-9c6d-7e8f9a0b1c2d/index.m3u8",
        &hls_base[base_url.len()..]
    );
    assert_eq!(
        ingress_backend(ingress, &stream),
        Some(("media-hls".to_string(), 8080))
    );
    // The image's defaults are the ports the manifest uses.
    let dockerfile = read("components/media-agent/Dockerfile");
    assert!(dockerfile.contains("EXPOSE 1935 8080"), "{dockerfile}");
    assert!(dockerfile.contains("RTMP_LISTEN=0.0.0.0:1935"));
    assert!(dockerfile.contains("HTTP_LISTEN=0.0.0.0:8080"));
}

/// The delivery process as the deploy files run it (`-c webhooks` with
/// runtime-config/webhooks.toml, beside the app on the same database) cannot reach a
/// receiver on a private address, while the same delivery from a process without that
/// policy arrives: the policy, not the receiver, stopped it.
#[tokio::test(flavor = "multi_thread")]
async fn the_delivery_process_cannot_reach_private_receivers() {
    use platform_tests::{Exchange, Method};
    let p = platform_tests::Platform::start_with(&[("webhook_allow_http", "true")]).await;
    let receiver = platform_tests::webhook_receiver::Receiver::start().await;
    let tenant = p.register_client("Acme").await;
    let (status, endpoint) = p
        .as_server(
            &tenant,
            Method::POST,
            "/api/v1/webhooks",
            Some(&serde_json::json!({"url": receiver.url("/hooks"), "events": ["*"]})),
        )
        .answer()
        .await;
    assert_eq!(status, 201, "{endpoint}");
    let endpoint = endpoint["id"].as_str().unwrap().to_string();
    let (status, test) = p
        .as_server(
            &tenant,
            Method::POST,
            &format!("/api/v1/webhooks/{endpoint}/test"),
            None,
        )
        .answer()
        .await;
    assert_eq!(status, 202, "{test}");

    // The delivery process, on the app's state (database and generated secrets).
    let mut variables = vec![("webhook_allow_http".to_string(), "true".to_string())];
    if let Some(backends) = &p.backends {
        variables.extend(backends.variables());
    }
    let root = platform_tests::workspace_root();
    let delivery = edgehost::Server::start(edgehost::Options {
        manifest: root.join("spin.toml"),
        listen: "127.0.0.1:0".parse().unwrap(),
        state_dir: Some(p.state_dir().to_path_buf()),
        runtime_config_file: Some(root.join("runtime-config/webhooks.toml")),
        variables,
        components: vec!["webhooks".to_string()],
        ..Default::default()
    })
    .await
    .expect("the delivery process starts");
    let base = format!("http://{}", delivery.local_addr());
    let http = reqwest::Client::new();
    let docs = http.get(format!("{base}/docs")).send().await.unwrap();
    assert_eq!(docs.status(), 404, "only the webhooks component runs there");
    let job = http
        .post(format!("{base}/api/jobs/deliver-webhooks"))
        .bearer_auth(p.variable("jobs_token").unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(job.status(), 200, "{}", job.text().await.unwrap());
    assert!(
        receiver
            .wait_for(1, std::time::Duration::from_secs(2))
            .await
            .is_empty(),
        "a delivery reached a loopback receiver through the policy"
    );
    let deliveries = format!("/api/v1/webhooks/{endpoint}/deliveries");
    let (_, list) = p
        .as_server(&tenant, Method::GET, &deliveries, None)
        .answer()
        .await;
    let attempt = &list["items"][0];
    assert_eq!(attempt["attempts"], 1, "{list}");
    assert!(attempt["lastError"].is_string(), "{list}");
    delivery.shutdown().await.ok();

    // Retried from the app itself (no policy), it arrives.
    let retry = format!("{deliveries}/{}/retry", attempt["id"].as_str().unwrap());
    let (status, answer) = p
        .as_server(&tenant, Method::POST, &retry, None)
        .answer()
        .await;
    assert!(status.is_success(), "{answer}");
    p.run_job("deliver-webhooks").await;
    let arrived = receiver
        .wait_for(1, std::time::Duration::from_secs(10))
        .await;
    assert_eq!(arrived.len(), 1, "the retried delivery arrives");
}

/// The runtime configs the guides ship, run: `redis-kv.toml` with the components the
/// Kubernetes app runs (its Redis URL pointed at a Redis of the test's own) keeps the
/// key-value store in that Redis, answers the probes and runs every job the CronJobs send
/// it, while the job it does not serve is 404; `local.toml` gives its fixed secrets and
/// keeps the database where it says.
#[tokio::test(flavor = "multi_thread")]
async fn the_shipped_runtime_configs_run_the_app() {
    use platform_tests::backends::{OwnRedis, RedisServer, Resp};
    let root = platform_tests::workspace_root();
    let objects = kubernetes();
    let app = object(&objects, "SpinApp", SPIN_APP);
    let dir = tempfile::tempdir().unwrap();

    let redis = OwnRedis::start().await;
    let shipped = read("runtime-config/redis-kv.toml");
    let redis_url = format!("{}0", redis.url());
    let config = shipped.replace("redis://127.0.0.1:6379", &redis_url);
    assert_ne!(config, shipped, "redis-kv.toml names a Redis URL");
    let config_file = dir.path().join("redis-kv.toml");
    std::fs::write(&config_file, config).unwrap();
    let server = edgehost::Server::start(edgehost::Options {
        manifest: root.join("spin.toml"),
        listen: "127.0.0.1:0".parse().unwrap(),
        state_dir: Some(dir.path().join("state")),
        runtime_config_file: Some(config_file),
        components: components_of(app),
        ..Default::default()
    })
    .await
    .expect("the app starts with redis-kv.toml");
    let base = format!("http://{}", server.local_addr());
    let http = reqwest::Client::new();
    for probe in ["readiness", "liveness"] {
        let path = text(app, &["spec", "checks", probe, "httpGet", "path"]).unwrap();
        let status = http
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200, "{probe} {path}");
    }
    let token = server.variable("jobs_token").unwrap().to_string();
    for (job, _) in cron_jobs(&objects) {
        let answer = http
            .post(format!("{base}/api/jobs/{job}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        let served_here =
            components_of(app).contains(&component_serving(&format!("/api/jobs/{job}")));
        let expected = if served_here { 200 } else { 404 };
        assert_eq!(answer.status(), expected, "job {job}");
    }
    // A file goes to the key-value store, which is the Redis the config names.
    let post = |path: &str, key: Option<&str>, body: serde_json::Value| {
        let mut request = http.post(format!("{base}{path}")).json(&body);
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        async move {
            request
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    let registered = post(
        "/api/admin/sdk-clients",
        None,
        serde_json::json!({"name": "Acme", "contactEmail": "dev@acme.example",
            "agreeTerms": true, "agreeDataProcessing": true}),
    )
    .await;
    let key = registered["apiKey"].as_str().expect("apiKey");
    let signup = post(
        "/api/users/signup",
        Some(key),
        serde_json::json!({"username": "ada", "email": "ada@example.com",
            "password": "correct horse battery"}),
    )
    .await;
    let upload = http
        .post(format!("{base}/api/files?filename=a.txt"))
        .header("x-api-key", key)
        .bearer_auth(signup["token"].as_str().expect("token"))
        .header("content-type", "text/plain")
        .body("kept in Redis")
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 201);
    let Resp::Array(keys) = RedisServer::command(&redis_url, &[b"KEYS", b"file:*"]) else {
        panic!("KEYS")
    };
    assert!(
        !keys.is_empty(),
        "the file's chunks are in the config's Redis"
    );
    server.shutdown().await.ok();

    // local.toml: its database path is relative to the file.
    let copy = dir.path().join("project/runtime-config");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(
        root.join("runtime-config/local.toml"),
        copy.join("local.toml"),
    )
    .unwrap();
    let server = edgehost::Server::start(edgehost::Options {
        manifest: root.join("spin.toml"),
        listen: "127.0.0.1:0".parse().unwrap(),
        state_dir: Some(dir.path().join("local-state")),
        runtime_config_file: Some(copy.join("local.toml")),
        ..Default::default()
    })
    .await
    .expect("the app starts with local.toml");
    assert_eq!(server.variable("admin_token"), Some("local-admin-token"));
    assert_eq!(
        server.variable("jwt_secret"),
        Some("local-development-jwt-secret")
    );
    assert!(dir.path().join("project/.spin/sqlite_db.db").is_file());
    server.shutdown().await.ok();
}
