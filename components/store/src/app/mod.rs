//! The application's rules that need the store: what several components decide the same
//! way, written once. Handlers call these; the store below knows nothing of them.

pub mod access;
pub mod broadcasts;
pub mod rooms;
