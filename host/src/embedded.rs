//! The streaming platform's own servers that edgehost runs beside the app (feature
//! `platform`): the chat relay ([`crate::relay`]) and the media server ([`crate::media`]).
//! They are here so that `edgehost up` starts the whole platform with one command, the
//! tests run it in-process, and all of it stops together; production runs them as their own
//! processes (docs/deploy.md). This is the one place [`crate::Server`] calls them from.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Result, bail};

use crate::Options;
use crate::media::{HeldPorts, Started};

/// Bound before the app loads: the relay's internal listener and the media server's ports.
pub(crate) struct Bound {
    relay: Option<chat_relay::Embedded>,
    held_ports: Option<HeldPorts>,
}

/// Started with the app, until the app can take the media server's reports.
pub(crate) struct Starting {
    relay: Option<chat_relay::Embedded>,
    media: Option<Started>,
}

/// The embedded servers of a running [`crate::Server`].
#[derive(Default)]
pub(crate) struct Embedded {
    pub(crate) relay: Option<chat_relay::Embedded>,
    pub(crate) media: Option<media_agent::MediaServer>,
    /// Why the embedded media server could not start, when it could not.
    pub(crate) media_failure: Option<String>,
}

/// Binds what must be bound before the app loads, and returns the variable defaults that
/// point the app at it (`relay_url`, the media server's two URLs): the relay's sockets
/// become `opts.websocket`.
pub(crate) async fn bind(opts: &mut Options) -> Result<(Bound, Vec<(String, String)>)> {
    let mut defaults = Vec::new();
    let relay = match &opts.chat_relay {
        Some(relay_opts) => {
            if opts.websocket.is_some() {
                bail!("Options: set `websocket` or `chat_relay`, not both");
            }
            let embedded = crate::relay::bind(relay_opts).await?;
            opts.websocket = Some(embedded.handler());
            defaults.push(("relay_url".to_string(), embedded.internal_url()));
            Some(embedded)
        }
        None => None,
    };
    let mut held_ports = None;
    if opts.media.as_ref().is_some_and(|m| m.ephemeral) {
        let (media_defaults, held) = crate::media::ephemeral_defaults()?;
        defaults.extend(media_defaults);
        held_ports = Some(held);
    }
    Ok((Bound { relay, held_ports }, defaults))
}

impl Bound {
    /// Starts the relay and the media server for the app loaded at `local_addr` (before
    /// its start-up jobs have run).
    pub(crate) async fn start(
        self,
        opts: &Options,
        variables: &HashMap<String, String>,
        state_dir: &Path,
        local_addr: SocketAddr,
    ) -> Result<Starting> {
        if let (Some(embedded), Some(relay_opts)) = (&self.relay, &opts.chat_relay) {
            crate::relay::start(embedded, relay_opts, variables, local_addr);
        }
        let media = match &opts.media {
            Some(media) => Some(
                crate::media::start(media, variables, state_dir, local_addr, self.held_ports)
                    .await?,
            ),
            None => None,
        };
        Ok(Starting {
            relay: self.relay,
            media,
        })
    }
}

impl Starting {
    /// Once the app's schema is there (its start-up jobs have run): the media server's
    /// reports begin.
    pub(crate) fn report(mut self) -> Embedded {
        if let Some(started) = &mut self.media {
            started.report();
        }
        let (media, media_failure) = match self.media {
            Some(Started::Running(server)) => (Some(server), None),
            Some(Started::Failed(why, _)) => (None, Some(why)),
            Some(Started::Elsewhere) | None => (None, None),
        };
        Embedded {
            relay: self.relay,
            media,
            media_failure,
        }
    }
}

impl Embedded {
    /// Closes the relay's sockets and stops the media server.
    pub(crate) async fn shutdown(&mut self) {
        if let Some(relay) = self.relay.take() {
            relay.shutdown().await;
        }
        if let Some(media) = self.media.take() {
            media.shutdown().await;
        }
    }
}
