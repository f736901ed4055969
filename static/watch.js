/*
 * The watch page: HLS playback with hls.js (native HLS where the browser has it), the
 * live state, the live chat read-only through the relay, and gifts (static/gifts.js).
 * hls.js picks the rendition by the measured bandwidth ("Auto"); the quality menu pins
 * one, and the bar shows how far behind live the picture is (from the segments'
 * program date-time: the wall time the media server received them).
 * Once the broadcast has ended the chat is closed: the page shows its last messages (the
 * relay's history) and lets the socket go.
 * The embed page (data-embed) runs the same player without the page around it (no title,
 * badge, chat or gifts): the relay only moves its state; it starts playing only with
 * autoplay=1 (data-autoplay) and shows the quality menu only with controls (data-controls).
 *
 * The live state is honest (data-live on #watch): "live" while the playlist advances;
 * "reconnecting" once it has not for two and a half target durations, or on a fatal
 * network error (the picture on screen is no longer live: the player lets it go); "ended"
 * when the relay says the broadcast ended. While reconnecting the page reads the playlist
 * every 2 s and loads the stream afresh, at its live edge, once it has a segment newer
 * than the last one it saw.
 *
 * Views are reported to the platform (POST /api/views, data-broadcast names the broadcast):
 * "start" when the page begins loading the stream, "heartbeat" every 10 s, "end" on
 * pagehide (navigator.sendBeacon), with the startup time, the seconds played, the stalls
 * after the first frame, the rendition on screen and the last fatal error.
 */
(function () {
  'use strict';

  var root = document.getElementById('watch');
  var video = document.getElementById('video');
  var message = document.getElementById('player-message');
  var badge = document.getElementById('status');
  var viewers = document.getElementById('viewers');
  var chat = document.getElementById('chat');
  var chatHeading = document.getElementById('chat-heading');
  var chatState = document.getElementById('chat-state');
  var relay = null;
  var chatClosed = false;
  var giftsEl = document.getElementById('gifts');
  var bar = document.getElementById('player-bar');
  var quality = document.getElementById('quality');
  var latencyEl = document.getElementById('latency');
  var hlsUrl = root.dataset.hlsUrl;
  var lowLatency = root.dataset.latencyMode === 'low';
  var latencyTimer = null;
  var embedded = root.dataset.embed === 'true';
  var autoplay = !embedded || root.dataset.autoplay === 'true';
  var controls = !embedded || root.dataset.controls === 'true';
  var replayUrl = root.dataset.replayUrl;
  var replayType = root.dataset.replayType;
  var hls = null;
  var retryTimer = null;
  /* The live state: what the player knows of the source. */
  var liveState = null;
  var edgeSN = null; // the newest segment's number the playlist listed
  var edgeChangedAt = 0; // when (this clock) that number last moved
  var targetDuration = 2;
  var staleSN = null; // the newest segment when the source stopped
  var watchdog = null;
  var PROBE_MS = 2000;
  var RECONNECTING = 'Reconnecting…';
  var beacon = null;
  var LABELS = { live: 'Live', upcoming: 'Starting soon', ended: 'Ended' };
  var MESSAGES = { upcoming: 'The broadcast has not started yet.', ended: 'This broadcast has ended.' };
  var REPLAY_LABEL = 'Replay';
  var MAX_CHAT = 200;
  var CHAT_CLOSED = 'Chat closed: the broadcast has ended';

  /* The broadcast has ended: no more live chat. */
  function closeChat() {
    chatClosed = true;
    if (relay) relay.close();
    if (!chat) return;
    chatHeading.textContent = 'Chat';
    chatState.textContent = CHAT_CLOSED;
  }

  function setStatus(status) {
    if (!LABELS[status]) return;
    root.dataset.status = status;
    if (badge) {
      badge.className = 'badge badge-' + status;
      badge.textContent = LABELS[status];
    }
    if (status === 'live') {
      message.hidden = true;
      play();
    } else {
      stop();
      message.textContent = MESSAGES[status];
      message.hidden = false;
    }
    if (status === 'ended') {
      setLive('ended');
      closeChat();
    }
  }

  /* The player's live state: live, reconnecting or ended (data-live on #watch). */
  function setLive(state) {
    if (liveState === state) return;
    liveState = state;
    root.dataset.live = state;
    if (state === 'reconnecting') {
      if (badge) {
        badge.className = 'badge badge-reconnecting';
        badge.textContent = RECONNECTING;
      }
      showProblem(RECONNECTING);
    } else if (state === 'live') {
      if (badge) {
        badge.className = 'badge badge-live';
        badge.textContent = LABELS.live;
      }
      message.hidden = true;
    }
  }

  /* The source stopped (the playlist no longer advances, or a fatal network error): the
   * frame on screen is let go, and the playlist is read until it moves on. */
  function reconnect() {
    if (root.dataset.status !== 'live' || liveState === 'ended') return;
    staleSN = edgeSN;
    stop();
    setLive('reconnecting');
    retryTimer = setTimeout(probe, PROBE_MS);
  }

  function probe() {
    if (root.dataset.status !== 'live' || liveState !== 'reconnecting') return;
    newestSegment(hlsUrl).then(function (sn) {
      if (liveState !== 'reconnecting') return;
      if (sn !== null && (staleSN === null || sn > staleSN)) play();
      else retryTimer = setTimeout(probe, PROBE_MS);
    }, function () {
      if (liveState === 'reconnecting') retryTimer = setTimeout(probe, PROBE_MS);
    });
  }

  /* The newest segment's number in the stream's first media playlist (null if none). */
  function newestSegment(url) {
    function text(u) {
      return fetch(u, { cache: 'no-store' }).then(function (r) {
        if (!r.ok) throw new Error('HTTP ' + r.status);
        return r.text();
      });
    }
    return text(url).then(function (master) {
      if (master.indexOf('#EXT-X-STREAM-INF') < 0) return master;
      var lines = master.split(/\r?\n/);
      for (var i = 0; i < lines.length; i++) {
        if (lines[i].indexOf('#EXT-X-STREAM-INF') === 0) {
          for (var j = i + 1; j < lines.length; j++) {
            var uri = lines[j].trim();
            if (uri && uri.charAt(0) !== '#') return text(new URL(uri, url).href);
          }
        }
      }
      return '';
    }).then(function (media) {
      var seq = /#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(media);
      var count = media.split(/\r?\n/).filter(function (l) {
        l = l.trim();
        return l && l.charAt(0) !== '#';
      }).length;
      return seq && count ? parseInt(seq[1], 10) + count - 1 : null;
    });
  }

  /* Called every second while live: a playlist that stopped advancing is a stopped source. */
  function checkEdge() {
    if (liveState !== 'live' || !edgeChangedAt) return;
    var limit = Math.max(2.5 * targetDuration, 4) * 1000;
    if (Date.now() - edgeChangedAt > limit) reconnect();
  }

  function onPlaylist(details) {
    if (!details || !details.live) return;
    if (details.targetduration) targetDuration = details.targetduration;
    if (details.endSN !== edgeSN) {
      edgeSN = details.endSN;
      edgeChangedAt = Date.now();
    }
  }

  function showProblem(text) {
    message.textContent = text;
    message.hidden = false;
  }

  function stop() {
    clearTimeout(retryTimer);
    clearInterval(latencyTimer);
    clearInterval(watchdog);
    edgeChangedAt = 0;
    bar.hidden = true;
    if (hls) {
      hls.destroy();
      hls = null;
    }
  }

  function play() {
    load(hlsUrl, true);
  }

  /* The broadcast has ended and a recording is ready: play it from the start. */
  function replay() {
    root.dataset.replay = 'true';
    if (badge) badge.textContent = REPLAY_LABEL;
    message.hidden = true;
    if (replayType === 'mp4') {
      stop();
      video.src = replayUrl;
      start();
    } else {
      load(replayUrl, false);
    }
  }

  /* Plays once the media is there, unless an embed without autoplay waits for its viewer. */
  function start() {
    if (autoplay) video.play().catch(function () {});
  }

  function load(url, live) {
    stop();
    if (!url) {
      showProblem('Playback is not configured.');
      return;
    }
    if (beacon) beacon.loading();
    if (window.Hls && window.Hls.isSupported()) {
      hls = new window.Hls(playerConfig(live));
      hls.on(window.Hls.Events.ERROR, function (_, data) {
        if (!data.fatal) return;
        if (beacon) beacon.failed(errorReason(data));
        if (!live) {
          showProblem('The recording cannot be played.');
          stop();
          return;
        }
        reconnect();
      });
      hls.on(window.Hls.Events.MANIFEST_PARSED, function () {
        if (live && liveState !== 'reconnecting') message.hidden = true;
        if (live && controls) showQualities();
        start();
      });
      if (live) {
        hls.on(window.Hls.Events.LEVEL_LOADED, function (_, data) {
          onPlaylist(data.details);
        });
        // Live again once a fragment of the fresh load is in: the live edge, not a stale frame.
        hls.on(window.Hls.Events.FRAG_BUFFERED, function () {
          if (liveState !== 'ended') setLive('live');
        });
        watchdog = setInterval(checkEdge, 1000);
      }
      hls.on(window.Hls.Events.LEVEL_SWITCHED, function () {
        if (live) labelAuto();
      });
      hls.loadSource(url);
      hls.attachMedia(video);
    } else if (video.canPlayType('application/vnd.apple.mpegurl')) {
      video.src = url;
      start();
    } else {
      showProblem('This browser cannot play HLS.');
    }
  }

  /* Standard: two and a half segments (5 s) behind the edge. Low: a second and a half
   * behind, caught up by playing slightly faster when the player falls back. */
  function playerConfig(live) {
    var config = { enableWorker: false, lowLatencyMode: live, capLevelToPlayerSize: false };
    // hls.js refuses a segment count mixed with durations: one or the other.
    if (live && !lowLatency) config.liveSyncDurationCount = 2.5;
    if (live && lowLatency) {
      config.liveSyncDuration = 1.5;
      config.liveMaxLatencyDuration = 5;
      config.maxLiveSyncPlaybackRate = 1.2;
      config.backBufferLength = 10;
    }
    return config;
  }

  function levelName(level) {
    var name = level.height ? level.height + 'p' : 'Source';
    var rate = level.bitrate ? ' (' + (level.bitrate / 1e6).toFixed(1) + ' Mbit/s)' : '';
    return name + rate;
  }

  /* The quality menu: Auto, then each rendition, highest first. */
  function showQualities() {
    quality.textContent = '';
    var auto = document.createElement('option');
    auto.value = '-1';
    auto.textContent = 'Auto';
    quality.appendChild(auto);
    var order = hls.levels.map(function (level, i) { return i; });
    order.sort(function (a, b) { return hls.levels[b].bitrate - hls.levels[a].bitrate; });
    order.forEach(function (i) {
      var option = document.createElement('option');
      option.value = String(i);
      option.textContent = levelName(hls.levels[i]);
      quality.appendChild(option);
    });
    quality.value = '-1';
    bar.hidden = false;
    clearInterval(latencyTimer);
    latencyTimer = setInterval(showLatency, 1000);
  }

  function labelAuto() {
    var auto = quality.querySelector('option[value="-1"]');
    var level = hls && hls.levels[hls.currentLevel];
    if (auto) auto.textContent = hls.autoLevelEnabled && level ? 'Auto (' + levelName(level) + ')' : 'Auto';
  }

  /* Seconds between the wall time of the frame on screen and now. */
  function latency() {
    if (!hls) return null;
    var date = hls.playingDate;
    if (date && !isNaN(date.getTime())) return Math.max(0, (Date.now() - date.getTime()) / 1000);
    return typeof hls.latency === 'number' && isFinite(hls.latency) ? hls.latency : null;
  }

  function showLatency() {
    var seconds = latency();
    latencyEl.textContent = seconds === null ? '' : seconds.toFixed(1) + ' s behind live';
  }

  quality.addEventListener('change', function () {
    if (!hls) return;
    var level = parseInt(quality.value, 10);
    // Auto hands the choice back to hls.js; a rendition is switched to at once.
    hls.currentLevel = isNaN(level) ? -1 : level;
    labelAuto();
  });

  function author(m) {
    var sender = m.sender || m.user || {};
    return m.senderName || m.username || m.userName || sender.username || sender.name || 'viewer';
  }

  function addMessage(m) {
    if (!chat || !m || typeof m !== 'object') return;
    var item = document.createElement('li');
    var who = document.createElement('span');
    who.className = 'author';
    who.textContent = author(m);
    var text = document.createElement('span');
    text.textContent = typeof m.message === 'string' ? m.message : m.text || m.content || '';
    item.appendChild(who);
    item.appendChild(text);
    chat.appendChild(item);
    while (chat.children.length > MAX_CHAT) chat.removeChild(chat.firstChild);
    chat.scrollTop = chat.scrollHeight;
  }

  function onFrame(frame) {
    if (frame.type === 'history' && Array.isArray(frame.messages)) {
      if (chat) chat.textContent = '';
      frame.messages.forEach(addMessage);
      // An ended broadcast's page came for these last messages only.
      if (root.dataset.status === 'ended') closeChat();
    } else if (frame.type === 'message') {
      addMessage(frame.message);
    } else if (frame.type === 'event' && frame.event) {
      var e = frame.event;
      if (e.kind === 'status') {
        var s = e.status === 'active' ? 'live' : e.status === 'pending' ? 'upcoming' : 'ended';
        setStatus(s);
      } else if (e.kind === 'viewers' && viewers && typeof e.viewerCount === 'number') {
        viewers.textContent = e.viewerCount + ' watching';
        viewers.hidden = false;
      } else if (e.kind === 'gift' && giftsEl) {
        window.GiftOverlay.show(giftsEl, e);
      }
    }
  }

  /* The contract's reason for a fatal hls.js error. */
  function errorReason(data) {
    var code = data.response && data.response.code;
    if (code === 401 || code === 403) return 'not_allowed';
    if (/^manifest/i.test(data.details || '')) return 'manifest';
    if (data.type === 'networkError') return 'network';
    if (data.type === 'mediaError' || data.type === 'muxError') return 'media';
    return 'other';
  }

  /* The rendition on screen by its ladder name: v0 is the source, the others by height. */
  function rendition() {
    var level = hls && hls.levels[hls.currentLevel];
    if (!level) return null;
    var url = String(level.url || level.uri || '');
    if (/(^|\/)v0\.m3u8(\?|$)/.test(url)) return 'source';
    return level.height ? level.height + 'p' : null;
  }

  /* A random id of `bytes` bytes, base64url. */
  function randomId(bytes) {
    var b = new Uint8Array(bytes);
    window.crypto.getRandomValues(b);
    return btoa(String.fromCharCode.apply(null, b)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  /* An id kept in `storage` under `key` (a fresh one when storage is unavailable). */
  function keptId(storage, key) {
    try {
      var id = storage.getItem(key);
      if (!id || !/^[A-Za-z0-9_-]{16,64}$/.test(id)) {
        id = randomId(16);
        storage.setItem(key, id);
      }
      return id;
    } catch (e) {
      return randomId(16);
    }
  }

  /* The view of one broadcast by this tab, reported to `endpoint` (the view beacon). */
  function ViewBeacon(endpoint, broadcast, playUrl) {
    var self = this;
    var state = {
      viewId: keptId(window.sessionStorage, 'livePlatform.view.' + broadcast),
      viewerId: keptId(window.localStorage, 'livePlatform.viewer'),
      broadcast: broadcast
    };
    try {
      var query = new URL(playUrl, window.location.href).searchParams;
      if (query.get('exp') && query.get('sig')) {
        state.exp = query.get('exp');
        state.sig = query.get('sig');
      }
    } catch (e) {}
    var askedAt = null;
    var startupMs = null;
    var played = 0;
    var lastTime = null;
    var stalls = 0;
    var stalled = 0;
    var stallStart = null;
    var error = null;
    var started = false;
    var timer = null;

    function now() {
      return window.performance ? window.performance.now() : Date.now();
    }
    function send(event) {
      var body = {
        event: event,
        startupMs: startupMs,
        playedSeconds: Math.round(played * 1000) / 1000,
        rebufferCount: stalls,
        rebufferSeconds: Math.round((stalled + (stallStart === null ? 0 : (now() - stallStart) / 1000)) * 1000) / 1000,
        rendition: rendition(),
        error: error
      };
      for (var k in state) body[k] = state[k];
      var text = JSON.stringify(body);
      if (navigator.sendBeacon && navigator.sendBeacon(endpoint, text)) return;
      try {
        fetch(endpoint, { method: 'POST', body: text, keepalive: true, mode: 'no-cors' }).catch(function () {});
      } catch (e) {}
    }
    function begin() {
      if (started) return;
      started = true;
      send('start');
      timer = setInterval(function () { send('heartbeat'); }, 10000);
    }
    /* The player asks for the stream. */
    self.loading = function () {
      if (askedAt === null) askedAt = now();
      begin();
    };
    self.failed = function (reason) {
      error = reason;
    };
    video.addEventListener('loadeddata', function () {
      if (startupMs === null && askedAt !== null) startupMs = Math.round(now() - askedAt);
    });
    video.addEventListener('timeupdate', function () {
      var t = video.currentTime;
      if (lastTime !== null && !video.seeking) {
        var delta = t - lastTime;
        if (delta > 0 && delta < 2) played += delta;
      }
      lastTime = t;
    });
    video.addEventListener('seeking', function () {
      lastTime = null;
    });
    video.addEventListener('emptied', function () {
      lastTime = null;
      if (stallStart !== null) stalled += (now() - stallStart) / 1000;
      stallStart = null;
    });
    video.addEventListener('waiting', function () {
      if (startupMs === null || video.seeking || stallStart !== null) return;
      stalls += 1;
      stallStart = now();
    });
    video.addEventListener('playing', function () {
      if (stallStart !== null) stalled += (now() - stallStart) / 1000;
      stallStart = null;
    });
    window.addEventListener('pagehide', function () {
      if (!started) return;
      send('end');
      clearInterval(timer);
      started = false;
    });
    window.addEventListener('pageshow', function (e) {
      if (e.persisted && askedAt !== null) begin();
    });
    /* What the next beacon says (for tests and the page's own use). */
    self.report = function () {
      return { startupMs: startupMs, playedSeconds: played, rebufferCount: stalls, rebufferSeconds: stalled, rendition: rendition(), error: error };
    };
  }

  if (root.dataset.broadcast) beacon = new ViewBeacon('/api/views', root.dataset.broadcast, hlsUrl);

  window.watchPage = {
    relayFrame: onFrame,
    /* What plays: the renditions, the one on screen, whether hls.js chooses, latency. */
    player: function () {
      if (!hls) return null;
      var level = hls.levels[hls.currentLevel];
      return {
        levels: hls.levels.map(function (l) {
          return { width: l.width, height: l.height, bitrate: l.bitrate };
        }),
        currentLevel: hls.currentLevel,
        bitrate: level ? level.bitrate : null,
        height: level ? level.height : null,
        auto: hls.autoLevelEnabled,
        bandwidthEstimate: hls.bandwidthEstimate,
        latency: latency(),
        currentTime: video.currentTime
      };
    },
    views: function () {
      return beacon ? beacon.report() : null;
    },
    gifts: function () {
      return giftsEl ? window.GiftOverlay.report(giftsEl) : null;
    }
  };
  relay = window.StreamRelay.connect(root.dataset.streamId, onFrame, function (s) {
    if (chatClosed || !chat) return;
    if (root.dataset.status === 'ended') chatState.textContent = CHAT_CLOSED;
    else chatState.textContent = s === 'open' ? 'Chat connected' : 'Chat unavailable, retrying';
  }, root.dataset.clientId);
  if (root.dataset.status === 'live') play();
  else if (root.dataset.status === 'ended' && replayUrl) replay();
})();
