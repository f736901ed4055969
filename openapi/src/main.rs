//! Writes the OpenAPI document (`docs/openapi.json`) and the README's route table from the
//! route tables and the operations the components declare. Run from anywhere:
//! `cargo run -p openapi-doc`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn write(path: PathBuf, text: &str) -> bool {
    match std::fs::write(&path, text) {
        Ok(()) => {
            println!("wrote {}", path.display());
            true
        }
        Err(e) => {
            eprintln!("cannot write {}: {e}", path.display());
            false
        }
    }
}

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = match openapi_doc::document() {
        Ok(doc) => doc,
        Err(problems) => {
            for p in problems.0 {
                eprintln!("{p}");
            }
            return ExitCode::FAILURE;
        }
    };
    let readme_path = root.join(openapi_doc::readme::README_PATH);
    let readme = std::fs::read_to_string(&readme_path).unwrap_or_default();
    let Some(readme) = openapi_doc::readme::generated(&readme) else {
        eprintln!("{} has no route table to write", readme_path.display());
        return ExitCode::FAILURE;
    };
    let written = write(
        root.join(openapi_doc::DOCUMENT_PATH),
        &openapi_doc::render(&doc),
    ) && write(readme_path, &readme);
    if written {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
