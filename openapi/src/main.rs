//! Writes the OpenAPI document (`docs/openapi.json`) from the route tables and the
//! operations the components declare. Run from anywhere: `cargo run -p openapi-doc`.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    match openapi_doc::document() {
        Ok(doc) => {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(openapi_doc::DOCUMENT_PATH);
            match std::fs::write(&path, openapi_doc::render(&doc)) {
                Ok(()) => {
                    println!("wrote {}", path.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("cannot write {}: {e}", path.display());
                    ExitCode::FAILURE
                }
            }
        }
        Err(problems) => {
            for p in problems.0 {
                eprintln!("{p}");
            }
            ExitCode::FAILURE
        }
    }
}
