//! The media agent: runs and drives the media server, nginx with its RTMP module.
//!
//! Encoders publish RTMP to `rtmp://host/<rtmp_app>/<stream key>`. nginx asks the agent
//! on every publish ([`hooks`]); the agent asks the platform (`POST /api/media/publish`,
//! [`platform`]) and answers nginx. The stream's ffmpeg ([`transcode`]) writes its HLS, every
//! rendition of its ladder ([`ladder`]), under its key, in `<state>/hls/<key>/`, which no
//! address reaches; before answering, the agent links
//! `<state>/hls/<stream id>` to it, so that viewers address the stream by id, never by
//! key. While the stream is live the agent reports its health ([`health`]) and restream
//! states ([`restreams`]) with every update, keeps its thumbnail ([`thumbnails`]), and
//! reports its end. HLS is served by nginx under `<hls_prefix>/<stream id>/`: openly for
//! public streams (an `open/<stream id>` marker), with a signature otherwise
//! (`domain::media::playback_signature`, checked by nginx's `secure_link`).
//!
//! [`MediaServer::start`] checks the machine, renders the configuration ([`template`]),
//! starts nginx and supervises it ([`supervisor`]) until [`MediaServer::shutdown`] or
//! drop. The `media-agent` binary runs it alone; edgehost embeds it.

pub mod address;
mod agent;
pub mod child;
pub mod clips;
pub mod config;
pub mod form;
pub mod health;
mod hooks;
pub mod ingress;
pub mod ladder;
pub mod logging;
pub mod media_store;
pub mod platform;
pub mod playlist;
pub mod replay;
pub mod restreams;
pub mod stat;
pub mod supervisor;
pub mod template;
pub mod thumbnails;
pub mod transcode;
pub mod ts;

pub use config::{
    Config, DEFAULT_HTTP_LISTEN, DEFAULT_RTMP_LISTEN, DEFAULT_STATE_DIR, ENVIRONMENT,
    is_environment_variable,
};

use agent::{Addresses, Agent, Paths};
use anyhow::{Context as _, Result};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running media server and its agent. Dropping it stops nginx and every ffmpeg
/// child; [`MediaServer::shutdown`] also lets nginx finish and tells the platform.
pub struct MediaServer {
    agent: Arc<Agent>,
    stop: watch::Sender<bool>,
    supervisor: Option<JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
}

impl MediaServer {
    /// Starts nginx with the rendered configuration and the agent's tasks; returns once
    /// nginx accepts RTMP connections. Errors say what is missing and how to fix it.
    pub async fn start(config: Config) -> Result<MediaServer> {
        MediaServer::start_holding(config, Vec::new()).await
    }

    /// [`MediaServer::start`], with listeners the caller already bound to `rtmp_listen` or
    /// `http_listen` (free ports it picked and kept): taken over instead of bound again, so
    /// that nothing can take those ports in between.
    pub async fn start_holding(
        config: Config,
        mut held: Vec<std::net::TcpListener>,
    ) -> Result<MediaServer> {
        config.check().map_err(anyhow::Error::msg)?;
        let bins = supervisor::preflight(&config)?;
        let (state_dir, work_dir) = supervisor::prepare_state_dir(&config.state_dir)?;
        let paths = Paths::new(state_dir, work_dir);
        // Until the agent owns it, the working directory is removed here on failure.
        let cleanup = scopeguard(paths.clone());
        let ports = Ports::reserve(&config, &mut held)?;
        let (hook_listener, tokens) = configure_nginx(&bins, &config, &paths, &ports).await?;
        let Tokens {
            hook: hook_token,
            stat: stat_token,
        } = tokens;

        let platform = platform::Platform::new(&config.platform_url, &config.media_secret)?;
        let Ports {
            rtmp,
            http,
            stat,
            nginx_rtmp,
        } = ports;
        let local_rtmp = nginx_rtmp.addr;
        let addresses = Addresses {
            rtmp: rtmp.addr,
            local_rtmp,
            http: http.addr,
            stat: stat.addr,
        };
        let ingress_listener = ingress_listener(rtmp)?;
        let store = media_store::open(config.media_store.clone(), &paths.media, &paths.state)?;
        let agent = Arc::new(Agent::new(
            config,
            paths,
            platform,
            bins.ffmpeg.clone(),
            addresses,
            format!("http://{}/{stat_token}/stat", stat.addr),
            store,
        ));
        let (stop, stop_rx) = watch::channel(false);
        let hooks = hooks::serve(agent.clone(), hook_listener, hook_token, stop_rx.clone());
        drop((http, stat, nginx_rtmp));
        let nginx = match start_nginx(&bins, &agent, local_rtmp).await {
            Ok(nginx) => nginx,
            Err(e) => {
                hooks.abort();
                return Err(e);
            }
        };
        let ingress = ingress::serve(
            agent.ingress.clone(),
            ingress_listener,
            local_rtmp,
            stop_rx.clone(),
        );
        cleanup.disarm();
        let supervisor = tokio::spawn(supervisor::supervise(agent.clone(), nginx, bins, stop_rx));
        let tasks = vec![
            hooks,
            ingress,
            tokio::spawn(health::run(agent.clone())),
            tokio::spawn(thumbnails::run(agent.clone())),
            tokio::spawn(sweep_replays(agent.clone())),
            tokio::spawn(sweep_clips(agent.clone())),
        ];
        Ok(MediaServer {
            agent,
            stop,
            supervisor: Some(supervisor),
            tasks,
        })
    }

    /// Starts telling the platform that the media server runs (`POST /api/media/server`,
    /// now and every minute), once the platform can take it: an embedding host calls this
    /// after the app's start-up jobs (its schema) ran.
    pub fn report_running(&mut self) {
        self.tasks
            .push(tokio::spawn(report_up(self.agent.platform.clone())));
    }

    /// Where nginx listens for RTMP (the port resolved when 0 was asked for).
    pub fn rtmp_addr(&self) -> SocketAddr {
        self.agent.addresses.rtmp
    }

    /// Where nginx serves HLS (the port resolved when 0 was asked for).
    pub fn http_addr(&self) -> SocketAddr {
        self.agent.addresses.http
    }

    /// How often nginx was restarted after exiting on its own.
    pub fn restarts(&self) -> u64 {
        self.agent.restarts.load(Ordering::SeqCst)
    }

    /// The nginx master's pid, while it runs.
    pub fn nginx_pid(&self) -> Option<u32> {
        Some(self.agent.nginx_pid.load(Ordering::SeqCst)).filter(|p| *p != 0)
    }

    /// Objects (and deletions) in the media store's local spool, not yet in the store
    /// (always 0 for the local store).
    pub fn store_pending(&self) -> usize {
        self.agent.store.pending()
    }

    /// The state directory, absolute.
    pub fn state_dir(&self) -> &Path {
        &self.agent.paths.state
    }

    /// Where nginx works (its `hls/` and `open/`), absolute: the state directory, or a
    /// directory of this run's own when nginx's workers cannot reach that one
    /// ([`supervisor::prepare_state_dir`]).
    pub fn work_dir(&self) -> &Path {
        &self.agent.paths.work
    }

    /// Stops nginx (gracefully, then for good), every restream and thumbnail run, and
    /// tells the platform the end of every publisher still live.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(supervisor) = self.supervisor.take() {
            let _ = supervisor.await;
        }
        self.agent.finish_all("the media server shut down");
        for task in self.tasks.drain(..) {
            task.abort();
        }
        report_down(&self.agent.platform, "the media server shut down", 1).await;
        self.agent.drain(Duration::from_secs(5)).await;
        self.agent.paths.remove_relocated();
    }
}

impl Drop for MediaServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(supervisor) = self.supervisor.take() {
            supervisor.abort();
            // The supervisor cannot stop nginx any more: its fast shutdown stops the
            // workers with it.
            if let Some(pid) = self.nginx_pid() {
                child::signal(pid, libc::SIGTERM, true);
            }
        }
        for task in self.tasks.drain(..) {
            task.abort();
        }
        self.agent.abandon();
        self.agent.paths.remove_relocated();
    }
}

/// Removes a relocated working directory when start-up fails after creating it.
struct WorkDirGuard(Option<Paths>);

/// The ports the media server takes, held bound until nginx binds them: two port-0 picks
/// never collide.
struct Ports {
    /// The public RTMP port, which the agent's ingress serves.
    rtmp: supervisor::Reserved,
    http: supervisor::Reserved,
    stat: supervisor::Reserved,
    /// nginx's RTMP listener, behind the agent's ingress on the public port.
    nginx_rtmp: supervisor::Reserved,
}

impl Ports {
    /// The configured ingest and playback addresses (or those of `held`), and two loopback
    /// ports of nginx's own.
    fn reserve(config: &Config, held: &mut Vec<std::net::TcpListener>) -> Result<Ports> {
        let rtmp = supervisor::reserve_or_take(
            config.rtmp_listen,
            "RTMP ingest",
            "rtmp_ingest_base",
            held,
        )?;
        let http = supervisor::reserve_or_take(
            config.http_listen,
            "HLS playback",
            "playback_hls_base",
            held,
        )?;
        Ok(Ports {
            rtmp,
            http,
            stat: supervisor::reserve_loopback()?,
            nginx_rtmp: supervisor::reserve_loopback()?,
        })
    }
}

/// The secret path segments of nginx's notifications to the agent and of its stats page.
struct Tokens {
    hook: String,
    stat: String,
}

/// The listener nginx's notifications reach the agent on, and the tokens in their paths;
/// nginx's configuration for these ports written and checked (`nginx -t`).
async fn configure_nginx(
    bins: &supervisor::Binaries,
    config: &Config,
    paths: &Paths,
    ports: &Ports,
) -> Result<(tokio::net::TcpListener, Tokens)> {
    let hook_listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .context("cannot listen on loopback for nginx's notifications")?;
    let tokens = Tokens {
        hook: domain::ids::random_hex(16),
        stat: domain::ids::random_hex(16),
    };
    let playback_key = domain::media::playback_key(&config.media_secret);
    let rendered = template::render(&template::Values {
        rtmp_module: &config.rtmp_module,
        state_dir: &paths.work,
        rtmp_listen: ports.nginx_rtmp.addr,
        rtmp_app: &config.rtmp_app,
        hook_addr: hook_listener.local_addr()?,
        hook_token: &tokens.hook,
        stat_token: &tokens.stat,
        update_secs: config.update_secs,
        http_listen: ports.http.addr,
        stat_listen: ports.stat.addr,
        hls_prefix: &config.hls_prefix,
        playback_key: &playback_key,
        media_from_reader: config.media_store.is_some(),
    })
    .map_err(anyhow::Error::msg)?;
    write_private(&paths.conf, &rendered)?;
    supervisor::test_config(&bins.nginx, &paths.work, &paths.conf).await?;
    Ok((hook_listener, tokens))
}

/// The public RTMP port, for the agent's ingress to serve.
fn ingress_listener(rtmp: supervisor::Reserved) -> Result<tokio::net::TcpListener> {
    let rtmp_listener = rtmp.into_listener();
    rtmp_listener
        .set_nonblocking(true)
        .context("cannot serve the RTMP port")?;
    tokio::net::TcpListener::from_std(rtmp_listener).context("cannot serve the RTMP port")
}

/// Starts nginx and waits until its RTMP listener (`local_rtmp`) answers; stops it when it
/// does not.
async fn start_nginx(
    bins: &supervisor::Binaries,
    agent: &Agent,
    local_rtmp: SocketAddr,
) -> Result<supervisor::Nginx> {
    let mut nginx = supervisor::spawn(&bins.nginx, &agent.paths.work, &agent.paths.conf)?;
    agent.nginx_pid.store(nginx.pid(), Ordering::SeqCst);
    if let Err(e) = nginx
        .wait_ready(local_rtmp, supervisor::START_TIMEOUT)
        .await
    {
        nginx.stop().await;
        return Err(e);
    }
    Ok(nginx)
}

fn scopeguard(paths: Paths) -> WorkDirGuard {
    WorkDirGuard(Some(paths))
}

impl WorkDirGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for WorkDirGuard {
    fn drop(&mut self) {
        if let Some(paths) = self.0.take() {
            paths.remove_relocated();
        }
    }
}

/// Asks the platform every few seconds which replays' media to delete, and deletes it.
async fn sweep_replays(agent: Arc<Agent>) {
    let mut ticks = tokio::time::interval(REPLAY_SWEEP_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        agent.sweep_replays().await;
    }
}

/// Asks the platform every second which clips to make (and delete), and does it.
async fn sweep_clips(agent: Arc<Agent>) {
    let mut ticks = tokio::time::interval(CLIP_SWEEP_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        clips::sweep(&agent).await;
    }
}

/// How often the agent asks for clips: a clip's HLS is due within seconds.
const CLIP_SWEEP_EVERY: Duration = Duration::from_secs(1);

/// How often the agent asks which replays' media to delete.
const REPLAY_SWEEP_EVERY: Duration = Duration::from_secs(5);

/// Tells the platform the media server runs: now, and every
/// [`SERVER_REPORT_EVERY_SECS`](domain::media::SERVER_REPORT_EVERY_SECS) (sooner
/// again after a report it did not take).
async fn report_up(platform: platform::Platform) {
    let up = domain::media::protocol::ServerReport::up();
    loop {
        let pause = match platform.server(&up).await {
            platform::Answer::Ok(_) => domain::media::SERVER_REPORT_EVERY_SECS,
            // A platform that does not know the call yet: again at the usual pace.
            platform::Answer::Refused { status, code } => {
                eprintln!(
                    "media-agent: the platform refused the report that the media server runs ({status} {code:?})"
                );
                domain::media::SERVER_REPORT_EVERY_SECS
            }
            platform::Answer::Unavailable(_) => 5,
        };
        tokio::time::sleep(Duration::from_secs(pause)).await;
    }
}

/// Tells the platform the media server is down and why, in up to `tries` tries a second
/// apart (a platform that is starting may not answer yet).
pub async fn report_down(platform: &platform::Platform, reason: &str, tries: usize) {
    let down = domain::media::protocol::ServerReport::down(reason);
    for attempt in 1..=tries {
        match platform.server(&down).await {
            platform::Answer::Ok(_) => return,
            other if attempt == tries => {
                eprintln!(
                    "media-agent: the platform did not take the report that the media server is down: {other:?}"
                );
            }
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// The address nginx reaches its own RTMP listener on.
fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .and_then(|()| file.write_all(text.as_bytes()))
        .with_context(|| format!("cannot write {}", path.display()))
}
