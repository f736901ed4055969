//! `edgehost build`: runs each component's `[component.X.build]` commands, like `spin build`.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};

use crate::manifest::Manifest;

/// Runs every `[component.X.build]` command with `sh -c`, in the manifest directory or the
/// build's `workdir`. Fails, naming the component, on the first non-zero exit.
pub fn build_components(manifest: &Path) -> Result<()> {
    let m = Manifest::load(manifest)?;
    for (id, c) in &m.components {
        let Some(build) = &c.build else { continue };
        let dir = match &build.workdir {
            Some(w) => m.dir.join(w),
            None => m.dir.clone(),
        };
        for cmd in build.command.commands() {
            eprintln!("edgehost: building component `{id}`: {cmd}");
            let status = Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .current_dir(&dir)
                .status()
                .with_context(|| format!("cannot run the build of component `{id}`: {cmd}"))?;
            ensure!(
                status.success(),
                "build of component `{id}` failed ({status}): {cmd} (in {})",
                dir.display()
            );
        }
    }
    Ok(())
}

/// The imports and exports of each component of a manifest, as (component id,
/// imports, exports) in id order. Compiles (or loads from cache) each component.
pub async fn component_interfaces(
    manifest: &Path,
) -> Result<Vec<(String, Vec<String>, Vec<String>)>> {
    let m = Manifest::load(manifest)?;
    let engine = crate::cache::engine()?;
    let mut out = Vec::new();
    for id in m.components.keys() {
        let Some(path) = m.source_path(id) else {
            continue;
        };
        let component = crate::cache::load_component(engine, &path, &m.dir).await?;
        let ty = component.component_type();
        let imports = ty
            .imports(engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let exports = ty
            .exports(engine)
            .map(|(name, _)| name.to_string())
            .collect();
        out.push((id.clone(), imports, exports));
    }
    Ok(out)
}
