//! The agent's shared state: the publishers the platform accepted, their health and
//! restreams, the open-playback markers and the links from stream ids to the HLS nginx
//! writes under keys, and the end of a publish (which must reach the platform even when
//! it is briefly away).

use crate::config::Config;
use crate::logging::key_hint;
use crate::media_store::{MediaStore, replay_prefix};
use crate::platform::{Answer, Platform};
use crate::playlist;
use crate::replay::{self, Archive};
use crate::restreams::{self, RestreamSet};
use crate::transcode::{self, Transcoder};
use domain::media::protocol::{
    Accepted, PublishDone, Replay, ReplayAction, ReplayReport, RestreamReport,
};
use domain::media::{HealthSample, LiveLadder, Playback};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Pauses between the tries of a publish-done the platform did not take (about a minute
/// in all): a lost one would leave the broadcast live until the platform notices silence.
const DONE_RETRIES: [u64; 6] = [1, 2, 5, 10, 15, 30];

/// How long a publisher's ffmpeg may take to write its last segment when it leaves.
const FINISH_WAIT: Duration = Duration::from_secs(8);

/// Where the media server keeps its files.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The state directory (absolute): the configuration.
    pub state: PathBuf,
    /// Where nginx works (absolute): its pid, temp files, `hls/` and `open/`. The state
    /// directory itself, unless nginx's workers cannot reach it
    /// (`supervisor::prepare_state_dir`).
    pub work: PathBuf,
    /// `work` is a directory of this run's own, removed when it stops.
    pub relocated: bool,
    pub hls: PathBuf,
    pub open: PathBuf,
    pub conf: PathBuf,
    /// The media store's directory (replays), which nginx serves read-only.
    pub media: PathBuf,
}

impl Paths {
    pub fn new(state: PathBuf, work: PathBuf) -> Paths {
        Paths {
            hls: work.join("hls"),
            open: work.join("open"),
            media: work.join("media"),
            conf: state.join("nginx.conf"),
            relocated: work != state,
            state,
            work,
        }
    }

    /// Removes the working directory of this run's own, if it has one.
    pub fn remove_relocated(&self) {
        if self.relocated {
            let _ = std::fs::remove_dir_all(&self.work);
            let _ = std::fs::remove_file(self.state.join(crate::supervisor::WORK_POINTER));
        }
    }
}

/// A publisher the platform accepted.
pub struct Publisher {
    pub key: String,
    pub stream_id: String,
    /// nginx's client id (in `/stat` and in its notifications).
    pub client_id: u64,
    pub accepted_at: Instant,
    pub restreams: RestreamSet,
    /// Writes the stream's HLS (every rendition); stopped when the publisher goes.
    pub transcoder: Transcoder,
}

/// What the periodic tasks need to know of a publisher.
#[derive(Clone)]
pub struct Live {
    pub connection: String,
    pub stream_id: String,
    /// The stream's name in nginx (its `/stat`, its HLS directory).
    pub key: String,
    pub client_id: u64,
    pub accepted_at: Instant,
}

impl std::fmt::Debug for Live {
    /// The key's hint, never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("connection", &self.connection)
            .field("stream_id", &self.stream_id)
            .field("key", &key_hint(&self.key))
            .field("client_id", &self.client_id)
            .field("accepted_at", &self.accepted_at)
            .finish()
    }
}

/// Where nginx listens, ports resolved.
#[derive(Debug, Clone, Copy)]
pub struct Addresses {
    pub rtmp: SocketAddr,
    /// nginx's RTMP listener on loopback: the ingress relays to it, the restreams play
    /// from it.
    pub local_rtmp: SocketAddr,
    pub http: SocketAddr,
    /// The statistics server (loopback).
    pub stat: SocketAddr,
}

pub struct Agent {
    pub config: Config,
    pub paths: Paths,
    pub platform: Platform,
    pub ffmpeg: PathBuf,
    pub addresses: Addresses,
    /// nginx's statistics, under the agent's token.
    pub stat_url: String,
    /// Who holds the RTMP port's connections (and which client each relayed one is).
    pub ingress: Arc<crate::ingress::Ingress>,
    restream_context: Arc<restreams::Context>,
    transcode_context: Arc<transcode::Context>,
    /// Where replays are kept.
    pub store: Arc<dyn MediaStore>,
    /// The replays being kept, by stream id: from a publish whose broadcast keeps one
    /// until the replay is written (or deleted).
    replays: Mutex<HashMap<String, Arc<Mutex<Archive>>>>,
    /// The streams whose end the agent is asking the platform about.
    watching: Mutex<HashSet<String>>,
    /// The clips being made.
    pub clips: crate::clips::Clips,
    /// Names this run of nginx: its client ids start again at 1 on every start.
    boot: Mutex<String>,
    publishers: Mutex<HashMap<String, Publisher>>,
    /// Held while a publish is accepted (marker, link, registration) and while an ended
    /// stream's files go, so that neither sees half of the other.
    files: Mutex<()>,
    health: Mutex<HashMap<String, HealthSample>>,
    background: Mutex<JoinSet<()>>,
    pub restarts: AtomicU64,
    /// The running nginx master's pid (0: none).
    pub nginx_pid: AtomicU32,
}

impl Agent {
    pub fn new(
        config: Config,
        paths: Paths,
        platform: Platform,
        ffmpeg: PathBuf,
        addresses: Addresses,
        stat_url: String,
        store: Arc<dyn MediaStore>,
    ) -> Agent {
        let restream_context = Arc::new(restreams::Context {
            ffmpeg: ffmpeg.clone(),
            source_base: format!("rtmp://{}/{}", addresses.local_rtmp, config.rtmp_app),
            allow_private: config.allow_private_restreams,
            network: config
                .restream_network
                .clone()
                .unwrap_or_else(|| Arc::new(restreams::SystemNetwork)),
            tls: restreams::system_tls(),
        });
        let ingress = crate::ingress::Ingress::new(crate::ingress::Limits {
            per_address: config.rtmp_per_address,
            total: config.rtmp_connections,
            handshake: Duration::from_secs(config.rtmp_handshake_secs),
            idle: Duration::from_secs(config.rtmp_idle_secs),
        });
        let transcode_context = Arc::new(transcode::Context {
            ffmpeg: ffmpeg.clone(),
            source_base: restream_context.source_base.clone(),
            rtmp_app: config.rtmp_app.clone(),
            stat_url: stat_url.clone(),
            hls_dir: paths.hls.clone(),
            fragment_secs: config.fragment_secs,
            playlist_secs: config.playlist_secs,
            encoder: config.transcode_encoder,
            preset: config.transcode_preset.clone(),
            costs: config.transcode_costs,
            budget: transcode::Budget::new(config.transcode_cores),
            store: store.clone(),
        });
        Agent {
            stat_url,
            ingress,
            config,
            paths,
            platform,
            ffmpeg,
            addresses,
            restream_context,
            transcode_context,
            store,
            replays: Mutex::default(),
            watching: Mutex::default(),
            clips: crate::clips::Clips::default(),
            boot: Mutex::new(new_boot_id()),
            publishers: Mutex::default(),
            files: Mutex::default(),
            health: Mutex::default(),
            background: Mutex::new(JoinSet::new()),
            restarts: AtomicU64::new(0),
            nginx_pid: AtomicU32::new(0),
        }
    }

    /// A new name for a new run of nginx.
    pub fn new_boot(&self) {
        *lock(&self.boot) = new_boot_id();
    }

    /// The platform's name for nginx client `client_id` of this run.
    pub fn connection(&self, client_id: u64) -> String {
        format!("{}-{client_id}", lock(&self.boot))
    }

    /// Readies an accepted publish before nginx hears the answer: the stream's playback
    /// marker, and its link `hls/<stream id>` to the directory nginx will write,
    /// `hls/<key>`; then records the publisher ([`Agent::register`]). Answers why not.
    pub fn accept(
        &self,
        connection: &str,
        key: &str,
        client_id: u64,
        accepted: &Accepted,
        restream_delay: Duration,
    ) -> Result<(), String> {
        let _files = lock(&self.files);
        self.set_marker(&accepted.stream_id, accepted.playback)
            .map_err(|e| format!("cannot set the stream's playback marker: {e}"))?;
        playlist::link(&self.paths.hls, &accepted.stream_id, key)
            .map_err(|e| format!("cannot link the stream's HLS directory: {e}"))?;
        self.register(connection, key, client_id, accepted, restream_delay);
        Ok(())
    }

    /// Records an accepted publisher and starts its restreams (after `restream_delay`:
    /// the stream exists only once nginx has taken the answer).
    pub fn register(
        &self,
        connection: &str,
        key: &str,
        client_id: u64,
        accepted: &Accepted,
        restream_delay: Duration,
    ) {
        let mut restreams = RestreamSet::new(self.restream_context.clone(), key);
        restreams.reconcile(&accepted.restreams, restream_delay);
        // Every publish of a broadcast that keeps a replay adds to the one archive: this
        // run's, or the one an earlier run of the agent left in the store (a restart
        // mid-show).
        let archive = accepted.replay.then(|| {
            let archive = lock(&self.replays)
                .entry(accepted.stream_id.clone())
                .or_insert_with(|| {
                    let restored = Archive::restore(&*self.store, &accepted.stream_id);
                    if restored.is_some() {
                        eprintln!(
                            "media-agent: the replay of stream {} continues from its stored playlists",
                            accepted.stream_id
                        );
                    }
                    Arc::new(Mutex::new(
                        restored.unwrap_or_else(|| Archive::new(&accepted.stream_id)),
                    ))
                })
                .clone();
            lock(&archive).dvr_window = accepted.dvr_window as f64;
            archive
        });
        let transcoder = Transcoder::start(
            self.transcode_context.clone(),
            key,
            client_id,
            accepted.ladder,
            accepted.latency_mode,
            archive,
        );
        let old = lock(&self.publishers).insert(
            connection.to_string(),
            Publisher {
                key: key.to_string(),
                stream_id: accepted.stream_id.clone(),
                client_id,
                accepted_at: Instant::now(),
                restreams,
                transcoder,
            },
        );
        if let Some(old) = old {
            // nginx never reuses a client id within a run; if it did, end the old one.
            self.report_done(connection, &old.key);
        }
    }

    /// The key and stream id of `connection`.
    pub fn publisher(&self, connection: &str) -> Option<(String, String)> {
        lock(&self.publishers)
            .get(connection)
            .map(|p| (p.key.clone(), p.stream_id.clone()))
    }

    /// Whether some accepted publisher streams as `stream_id`.
    pub fn is_live(&self, stream_id: &str) -> bool {
        lock(&self.publishers)
            .values()
            .any(|p| p.stream_id == stream_id)
    }

    /// Whether some accepted publisher streams under `key`.
    fn is_key_live(&self, key: &str) -> bool {
        lock(&self.publishers).values().any(|p| p.key == key)
    }

    pub fn live(&self) -> Vec<Live> {
        lock(&self.publishers)
            .iter()
            .map(|(connection, p)| Live {
                connection: connection.clone(),
                stream_id: p.stream_id.clone(),
                key: p.key.clone(),
                client_id: p.client_id,
                accepted_at: p.accepted_at,
            })
            .collect()
    }

    /// The restream targets' states of `connection`.
    pub fn restream_reports(&self, connection: &str) -> Vec<RestreamReport> {
        lock(&self.publishers)
            .get(connection)
            .map(|p| p.restreams.reports())
            .unwrap_or_default()
    }

    /// Applies an update's answer: playback (the marker), restream targets and the DVR
    /// window.
    pub fn apply(&self, connection: &str, accepted: &Accepted) -> std::io::Result<()> {
        let mut publishers = lock(&self.publishers);
        let Some(p) = publishers.get_mut(connection) else {
            return Ok(());
        };
        p.restreams.reconcile(&accepted.restreams, Duration::ZERO);
        let stream_id = p.stream_id.clone();
        drop(publishers);
        if let Some(archive) = self.archive(&stream_id) {
            lock(&archive).dvr_window = accepted.dvr_window as f64;
        }
        self.set_marker(&stream_id, accepted.playback)
    }

    /// Seconds of `stream_id` viewers can rewind now (none: its replay is not kept).
    pub fn dvr_seconds(&self, stream_id: &str) -> Option<f64> {
        let archive = self.archive(stream_id)?;
        let seconds = lock(&archive).dvr_seconds();
        Some((seconds * 1000.0).round() / 1000.0)
    }

    pub fn stop_restreams(&self, connection: &str) {
        if let Some(p) = lock(&self.publishers).get_mut(connection) {
            p.restreams.stop_all();
        }
    }

    /// Records `connection`'s latest sample (unless it ended meanwhile).
    pub fn set_health(&self, connection: &str, sample: HealthSample) {
        if lock(&self.publishers).contains_key(connection) {
            lock(&self.health).insert(connection.to_string(), sample);
        }
    }

    pub fn health(&self, connection: &str) -> Option<HealthSample> {
        lock(&self.health).get(connection).cloned()
    }

    /// The renditions `connection` is served in, as last measured.
    pub fn ladder(&self, connection: &str) -> Option<LiveLadder> {
        lock(&self.publishers)
            .get(connection)
            .and_then(|p| p.transcoder.ladder())
    }

    /// Open streams play without a signature while `open/<stream id>` exists: written
    /// for [`Playback::Open`], removed for [`Playback::Signed`].
    pub fn set_marker(&self, stream_id: &str, playback: Playback) -> std::io::Result<()> {
        let marker = self.paths.open.join(stream_id);
        match playback {
            Playback::Open => {
                std::fs::write(&marker, b"")?;
                // nginx's workers may run as another user (nobody, under root).
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&marker, std::fs::Permissions::from_mode(0o644))
            }
            Playback::Signed => match std::fs::remove_file(&marker) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
        }
    }

    /// The end of `connection`'s publish: stops its restreams, forgets it, and tells the
    /// platform (in the background, retried). Nothing happens for an unknown connection,
    /// so nginx's notification and the agent's own detection may both call it.
    pub fn finish(self: &Arc<Self>, connection: &str, why: &str) {
        let Some(publisher) = lock(&self.publishers).remove(connection) else {
            return;
        };
        lock(&self.health).remove(connection);
        eprintln!(
            "media-agent: stream {} ended ({why}; key {}, connection {connection})",
            publisher.stream_id,
            key_hint(&publisher.key)
        );
        let stream_id = publisher.stream_id.clone();
        let key = publisher.key.clone();
        let Publisher {
            transcoder,
            restreams,
            ..
        } = publisher;
        drop(restreams);
        self.report_done(connection, &key);
        // ffmpeg writes its last segment and the replay keeps it; then the platform is
        // asked whether the broadcast ended.
        let this = Arc::downgrade(self);
        let ended = stream_id.clone();
        self.spawn(async move {
            transcoder.finish(FINISH_WAIT).await;
            if let Some(agent) = this.upgrade() {
                agent.watch_replay(&ended);
            }
        });
        // Viewers finish the last segments; then an open stream's marker and the link to
        // its key's directory go, unless the stream came back meanwhile (a new publish
        // under another key has its own link), and the key's directory goes unless the
        // key came back.
        let agent = Arc::downgrade(self);
        let grace = Duration::from_secs(self.config.playlist_secs.saturating_mul(3).max(30));
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let Some(agent) = agent.upgrade() else {
                return;
            };
            let _files = lock(&agent.files);
            if !agent.is_live(&stream_id) {
                let _ = agent.set_marker(&stream_id, Playback::Signed);
                if let Err(e) = playlist::unlink(&agent.paths.hls, &stream_id, &key) {
                    eprintln!("media-agent: cannot remove the HLS link of stream {stream_id}: {e}");
                }
            }
            // The key's directory goes with its segments (ffmpeg wrote them, and nothing
            // removes them but this), unless the key came back.
            if !agent.is_key_live(&key) {
                let _ = std::fs::remove_dir_all(agent.paths.hls.join(&key));
            }
        });
    }

    /// Asks the platform, until it says, whether `stream_id`'s broadcast ended (its
    /// replay is then written) or may still come back (its reconnect window); stops
    /// asking while a publisher streams it again (its end asks anew). One watcher per
    /// stream.
    fn watch_replay(self: &Arc<Self>, stream_id: &str) {
        if !lock(&self.replays).contains_key(stream_id)
            || !lock(&self.watching).insert(stream_id.to_string())
        {
            return;
        }
        let this = Arc::downgrade(self);
        let stream_id = stream_id.to_string();
        self.spawn(async move {
            let started = Instant::now();
            loop {
                let Some(agent) = this.upgrade() else {
                    return;
                };
                if agent.is_live(&stream_id) {
                    {
                    lock(&agent.watching).remove(&stream_id);
                    break;
                }
                }
                let asked = Replay {
                    stream_id: stream_id.clone(),
                    state: ReplayReport::Waiting,
                    duration: None,
                    renditions: None,
                    error: None,
                };
                match agent.platform.replay(&asked).await {
                    Answer::Ok(answer) => match answer.action {
                        ReplayAction::Wait => {}
                        ReplayAction::Finish => {
                            agent.write_replay(&stream_id).await;
                            {
                    lock(&agent.watching).remove(&stream_id);
                    break;
                }
                        }
                        ReplayAction::Delete | ReplayAction::Done => {
                            if answer.action == ReplayAction::Delete {
                                agent.delete_replay(&stream_id).await;
                            }
                            lock(&agent.replays).remove(&stream_id);
                            {
                    lock(&agent.watching).remove(&stream_id);
                    break;
                }
                        }
                    },
                    Answer::Refused { status, code } => {
                        eprintln!(
                            "media-agent: the platform refused the replay of stream {stream_id} ({status}{})",
                            code.map(|c| format!(" {c}")).unwrap_or_default()
                        );
                    }
                    Answer::Unavailable(_) => {}
                }
                drop(agent);
                // Every second while a reconnect window may run, then less often.
                let pause = match started.elapsed().as_secs() {
                    0..120 => 1,
                    120..600 => 10,
                    _ => 60,
                };
                tokio::time::sleep(Duration::from_secs(pause)).await;
            }
        });
    }

    /// Writes the replay of `stream_id` (VOD playlists, thumbnail) and tells the platform.
    async fn write_replay(&self, stream_id: &str) {
        let Some(archive) = lock(&self.replays).remove(stream_id) else {
            return;
        };
        let (written, thumbnail) = {
            let mut archive = lock(&archive);
            let written = archive.write_vod(&*self.store);
            (written, archive.thumbnail_segment().map(|k| k.name.clone()))
        };
        // Ready means playable from the store itself: a replay still in the spool (the
        // store is down) stays `processing` until it is uploaded. The thumbnail's segment
        // may be in the store only: it is read once the store is there.
        if written.is_ok() {
            self.until_flushed(&replay_prefix(stream_id)).await;
        }
        if written.is_ok()
            && let Some(segment) = thumbnail
            && let Err(e) =
                replay::write_thumbnail(&self.ffmpeg, &*self.store, stream_id, &segment).await
        {
            eprintln!("media-agent: no thumbnail for the replay of stream {stream_id}: {e}");
        }
        if written.is_ok() {
            self.until_flushed(&replay_prefix(stream_id)).await;
        }
        let report = match written {
            Ok((duration, renditions)) => Replay {
                stream_id: stream_id.to_string(),
                state: ReplayReport::Ready,
                duration: Some((duration * 1000.0).round() / 1000.0),
                renditions: Some(renditions),
                error: None,
            },
            Err(e) => {
                eprintln!("media-agent: the replay of stream {stream_id} failed: {e}");
                Replay {
                    stream_id: stream_id.to_string(),
                    state: ReplayReport::Failed,
                    duration: None,
                    renditions: None,
                    error: Some(e),
                }
            }
        };
        self.report_replay(report).await;
    }

    /// Waits until everything written under `prefix` is in the media store (at once for
    /// the local store); says so while a store that is down holds it up.
    async fn until_flushed(&self, prefix: &str) {
        let started = Instant::now();
        let mut said = Duration::ZERO;
        while !self.store.flushed(prefix) {
            if started.elapsed() >= said + Duration::from_secs(30) {
                said = started.elapsed();
                eprintln!(
                    "media-agent: {prefix} waits for the media store ({} objects spooled, {:.0} s)",
                    self.store.pending(),
                    said.as_secs_f64()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What the agent keeps of `stream_id` in memory (live, or in its reconnect window).
    pub fn archive(&self, stream_id: &str) -> Option<Arc<Mutex<Archive>>> {
        lock(&self.replays).get(stream_id).cloned()
    }

    /// Runs `task` in the background (drained when the agent stops).
    pub fn spawn_task(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.spawn(task);
    }

    /// Deletes the stored media of `stream_id`'s replay.
    pub async fn delete_replay(&self, stream_id: &str) {
        if let Err(e) = self.store.delete_prefix(&replay_prefix(stream_id)) {
            eprintln!("media-agent: cannot delete the replay of stream {stream_id}: {e}");
        }
    }

    /// Deletes the media of the replays the platform asks to (expired, deleted by their
    /// owner or with their broadcast), and says so.
    pub async fn sweep_replays(&self) {
        let Answer::Ok(due) = self.platform.replay_deletions().await else {
            return;
        };
        for stream_id in due.stream_ids {
            if !crate::logging::is_stream_id(&stream_id) {
                continue;
            }
            lock(&self.replays).remove(&stream_id);
            self.delete_replay(&stream_id).await;
            self.report_replay(Replay {
                stream_id,
                state: ReplayReport::Deleted,
                duration: None,
                renditions: None,
                error: None,
            })
            .await;
        }
    }

    /// Tells the platform where a replay stands, retried while it is unreachable; deletes
    /// the media when the platform answers so (a failed replay's).
    async fn report_replay(&self, report: Replay) {
        for pause in DONE_RETRIES {
            match self.platform.replay(&report).await {
                Answer::Ok(answer)
                    if answer.action == ReplayAction::Delete
                        && report.state != ReplayReport::Deleted =>
                {
                    self.delete_replay(&report.stream_id).await;
                    let deleted = Replay {
                        state: ReplayReport::Deleted,
                        error: None,
                        ..report
                    };
                    let _ = self.platform.replay(&deleted).await;
                    return;
                }
                Answer::Unavailable(_) => {
                    tokio::time::sleep(Duration::from_secs(pause)).await;
                }
                Answer::Refused { status, code } => {
                    eprintln!(
                        "media-agent: the platform refused the replay report of stream {} ({status}{})",
                        report.stream_id,
                        code.map(|c| format!(" {c}")).unwrap_or_default()
                    );
                    return;
                }
                Answer::Ok(_) => return,
            }
        }
    }

    /// Ends every publisher (nginx went away).
    pub fn finish_all(self: &Arc<Self>, why: &str) {
        let connections: Vec<String> = lock(&self.publishers).keys().cloned().collect();
        for connection in connections {
            self.finish(&connection, why);
        }
    }

    /// Sends `publish-done`, retried in the background while the platform is unreachable
    /// or failing.
    pub fn report_done(&self, connection: &str, key: &str) {
        let platform = self.platform.clone();
        let body = PublishDone {
            connection: connection.to_string(),
            key: key.to_string(),
        };
        self.spawn(async move {
            let mut pauses = DONE_RETRIES.iter();
            loop {
                match platform.publish_done(&body).await {
                    Answer::Ok(()) => return,
                    Answer::Refused { status, code } => {
                        eprintln!(
                            "media-agent: the platform refused the end of connection {} ({status}{})",
                            body.connection,
                            code.map(|c| format!(" {c}")).unwrap_or_default()
                        );
                        return;
                    }
                    Answer::Unavailable(why) => match pauses.next() {
                        Some(pause) => {
                            eprintln!(
                                "media-agent: could not report the end of connection {} ({why}); retrying in {pause}s",
                                body.connection
                            );
                            tokio::time::sleep(Duration::from_secs(*pause)).await;
                        }
                        None => {
                            eprintln!(
                                "media-agent: gave up reporting the end of connection {} ({why})",
                                body.connection
                            );
                            return;
                        }
                    },
                }
            }
        });
    }

    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut background = lock(&self.background);
        // Reap what finished, so the set does not grow with the agent's age.
        while background.try_join_next().is_some() {}
        background.spawn(task);
    }

    /// Waits up to `limit` for the background tasks (publish-done reports), then stops
    /// those left.
    pub async fn drain(&self, limit: Duration) {
        let mut background = std::mem::take(&mut *lock(&self.background));
        let _ = tokio::time::timeout(limit, async {
            while background.join_next().await.is_some() {}
        })
        .await;
        background.abort_all();
    }

    /// Stops every restream and forgets every publisher without telling the platform
    /// (the agent is being dropped without a shutdown).
    pub fn abandon(&self) {
        lock(&self.publishers).clear();
        lock(&self.background).abort_all();
    }
}

fn new_boot_id() -> String {
    domain::ids::random_hex(4)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
