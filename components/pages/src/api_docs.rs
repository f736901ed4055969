//! `/docs`: the API reference, RapiDoc (vendored from npm under `static/vendor/`) reading the
//! OpenAPI document the api component serves at `/api/openapi.json`, with "try it" against
//! this origin.

use crate::{assets, render, web};
use edge::spin::http::PublicCtx;
use minijinja::context;
use spin_sdk::http::Response;

/// The page's policy: the viewer fetches the document and tries requests on this origin
/// only; its components style themselves inline, so styles may be inline (scripts may not).
fn policy() -> String {
    web::csp(&["connect-src 'self'"])
        .replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
}

/// `GET /docs`
pub fn page(ctx: &PublicCtx) -> Response {
    let csp = policy();
    let tag = web::etag(&[assets::BUILD_ID, "api-docs"]);
    let headers = web::PageHeaders {
        etag: &tag,
        cache_control: web::CACHE_NONE,
        csp: &csp,
    };
    web::conditional_html(ctx.header("if-none-match"), &headers, || {
        render::render(
            "api_docs.html",
            context! {
                asset => context! {
                    css => assets::url_value("pages.css"),
                    rapidoc => assets::url_value("vendor/rapidoc-min.js"),
                },
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_inline_styles_and_no_inline_scripts() {
        let policy = policy();
        assert!(policy.contains("style-src 'self' 'unsafe-inline'"));
        assert!(policy.contains("script-src 'self';"));
        assert!(policy.contains("connect-src 'self'"));
    }

    #[test]
    fn the_page_loads_the_vendored_viewer_on_the_document() {
        let html = render::render(
            "api_docs.html",
            context! { asset => context! {
                css => minijinja::Value::from_safe_string("/static/p.css".into()),
                rapidoc => minijinja::Value::from_safe_string("/static/vendor/r.js".into()),
            } },
        )
        .expect("renders");
        assert!(html.contains(r#"spec-url="/api/openapi.json""#));
        assert!(html.contains(r#"<script src="/static/vendor/r.js"></script>"#));
        assert!(html.contains(r#"allow-try="true""#));
    }
}
