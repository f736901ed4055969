//! What several suites share: a headless Chromium driver and a stand-in for LiveKit's
//! Egress API.

pub mod browser;
pub mod livekit_egress;
