//! Spin variables. An empty value counts as unset, so optional settings can default to "".

/// The variable's value, or `None` when it is unset or empty.
pub fn var(name: &str) -> Option<String> {
    spin_sdk::variables::get(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The variable's value, or `fallback`.
pub fn var_or(name: &str, fallback: &str) -> String {
    var(name).unwrap_or_else(|| fallback.to_string())
}

/// A variable the component cannot work without; its absence is a 503 naming it.
pub fn required(name: &str) -> Result<String, domain::ApiError> {
    var(name).ok_or_else(|| {
        domain::ApiError::unavailable(
            "not_configured",
            format!("the server variable {name} is not set"),
        )
    })
}

/// `true` for "true", "1", "yes" and "on" (any case).
pub fn flag(name: &str) -> bool {
    var(name)
        .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on"))
}
