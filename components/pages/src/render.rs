//! Templates (minijinja, auto-escaping on for `.html`), embedded into the component.

use minijinja::{Environment, Value};

const BASE: (&str, &str) = ("base.html", include_str!("../templates/base.html"));

/// Every page template.
pub const TEMPLATES: &[(&str, &str)] = &[
    ("record.html", include_str!("../templates/record.html")),
    (
        "egress_player.html",
        include_str!("../templates/egress_player.html"),
    ),
    ("watch.html", include_str!("../templates/watch.html")),
    ("embed.html", include_str!("../templates/embed.html")),
    ("clip.html", include_str!("../templates/clip.html")),
    ("sfu_test.html", include_str!("../templates/sfu_test.html")),
    (
        "analytics.html",
        include_str!("../templates/analytics.html"),
    ),
];

/// Renders the template `name` with `context`.
pub fn render(name: &str, context: Value) -> Result<String, String> {
    let source = TEMPLATES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
        .ok_or_else(|| format!("no template {name}"))?;
    let mut env = Environment::new();
    env.add_template(BASE.0, BASE.1)
        .and_then(|()| env.add_template(name, source))
        .and_then(|()| env.get_template(name)?.render(context))
        .map_err(|e| format!("template {name}: {e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::context;

    #[test]
    fn values_are_escaped() {
        let html = render(
            "egress_player.html",
            context! {
                file => "https://a.example/x.mp3?a=1&b=\"><script>alert(1)</script>",
                media_type => "audio",
                asset => context! { css => "/static/p.css", player => "/static/p.js" },
            },
        )
        .unwrap();
        assert!(!html.contains("<script>alert"));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"));
        assert!(html.contains("a=1&amp;b=&quot;&gt;"));
    }

    #[test]
    fn every_template_renders() {
        for (name, _) in TEMPLATES {
            let html = render(
                name,
                context! { asset => context! {}, reactions => ["heart"] },
            )
            .unwrap_or_else(|e| panic!("{e}"));
            assert!(html.starts_with("<!doctype html>"), "{name}");
            assert!(html.trim_end().ends_with("</html>"), "{name}");
        }
    }
}
