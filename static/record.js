/*
 * The recording page (LiveKit web-egress template contract).
 *
 * - Reads `url` and `token` from the query string and joins the room as a subscriber
 *   (the egress token makes it hidden); it never publishes.
 * - Logs START_RECORDING once media is playing and END_RECORDING when the room ends.
 * - Lays out every participant with StreamLayout at the page's exact size and re-lays out
 *   when participants join or leave and when the active speaker changes.
 * - Shows viewer reactions and gifts (static/gifts.js) from the relay as animated overlays.
 *
 * Without `url`/`token` it waits. `?simulate=N` replaces the room with N local
 * participants whose video comes from canvases (for tests and for a look at a layout),
 * `&speaker=I` makes participant I the active speaker, `&react=1` plays the four reactions
 * and `&end=MS` ends the simulated room after MS milliseconds. `window.recordPage`
 * exposes the state for tests.
 */
(function () {
  'use strict';

  var stage = document.getElementById('stage');
  var tilesEl = document.getElementById('tiles');
  var waitingEl = document.getElementById('waiting');
  var overflowEl = document.getElementById('overflow');
  var reactionsEl = document.getElementById('reactions');
  var giftsEl = document.getElementById('gifts');
  var audioEl = document.getElementById('audio');
  var glyphs = document.getElementById('reaction-glyphs');

  var config = {
    streamId: stage.dataset.streamId,
    clientId: stage.dataset.clientId,
    width: parseInt(stage.dataset.width, 10),
    height: parseInt(stage.dataset.height, 10),
    resolution: stage.dataset.resolution,
    layout: stage.dataset.layout
  };
  var query = new URLSearchParams(window.location.search);
  var HOST_ROLES = ['host', 'owner', 'broadcaster'];
  var COHOST_ROLES = ['co_host', 'cohost', 'publisher'];
  var REACTIONS = ['heart', 'sparkle', 'thumbs_up', 'surprised'];

  var state = {
    participants: [], // {id, name, role, joined, tile, video}
    activeId: null,
    layout: config.layout,
    started: false,
    ended: false,
    joinCounter: 0,
    lastLayout: null,
    relay: 'closed',
    error: null
  };

  document.documentElement.classList.add('record-root');
  stage.style.width = config.width + 'px';
  stage.style.height = config.height + 'px';

  /* ---- recording contract ---- */

  function startRecording() {
    if (state.started || state.ended) return;
    state.started = true;
    stage.dataset.recording = 'started';
    console.log('START_RECORDING');
  }

  function endRecording() {
    if (state.ended) return;
    state.ended = true;
    stage.dataset.recording = 'ended';
    console.log('END_RECORDING');
  }

  function watchPlaying(media) {
    media.addEventListener('playing', startRecording);
    if (!media.paused && media.readyState >= 3) startRecording();
  }

  /* ---- participants and layout ---- */

  function rank(p) {
    if (HOST_ROLES.indexOf(p.role) >= 0) return 0;
    if (COHOST_ROLES.indexOf(p.role) >= 0) return 1;
    return 2;
  }

  function ordered() {
    return state.participants.slice().sort(function (a, b) {
      return rank(a) - rank(b) || a.joined - b.joined;
    });
  }

  function find(id) {
    for (var i = 0; i < state.participants.length; i++) {
      if (state.participants[i].id === id) return state.participants[i];
    }
    return null;
  }

  function addParticipant(id, name, role) {
    var existing = find(id);
    if (existing) return existing;
    var tile = document.createElement('div');
    tile.className = 'tile';
    tile.dataset.participant = id;
    var label = document.createElement('span');
    label.className = 'tile-name';
    label.textContent = name || id;
    tile.appendChild(label);
    tilesEl.appendChild(tile);
    var p = { id: id, name: name || id, role: role || '', joined: state.joinCounter++, tile: tile, video: null };
    state.participants.push(p);
    relayout();
    return p;
  }

  function removeParticipant(id) {
    var p = find(id);
    if (!p) return;
    state.participants.splice(state.participants.indexOf(p), 1);
    p.tile.remove();
    if (state.activeId === id) state.activeId = null;
    relayout();
  }

  function setVideo(id, video) {
    var p = find(id);
    if (!p) return;
    if (p.video && p.video !== video) p.video.remove();
    p.video = video;
    video.classList.add('tile-video');
    video.muted = true;
    video.playsInline = true;
    video.autoplay = true;
    p.tile.insertBefore(video, p.tile.firstChild);
    watchPlaying(video);
  }

  function setActive(id) {
    if (state.activeId === id) return;
    state.activeId = id;
    relayout();
  }

  function relayout() {
    var list = ordered();
    var active = -1;
    for (var i = 0; i < list.length; i++) {
      if (list[i].id === state.activeId) active = i;
    }
    var result = window.StreamLayout.compute(state.layout, list.length, config.width, config.height, {
      active: active
    });
    state.lastLayout = result;
    list.forEach(function (p, index) {
      var r = result.tiles[index];
      p.tile.hidden = !r;
      p.tile.classList.toggle('tile-main', index === result.main);
      p.tile.classList.toggle('tile-active', p.id === state.activeId);
      if (r) {
        p.tile.style.left = r.x + 'px';
        p.tile.style.top = r.y + 'px';
        p.tile.style.width = r.w + 'px';
        p.tile.style.height = r.h + 'px';
        p.tile.style.zIndex = index === result.main ? '1' : '2';
      }
    });
    waitingEl.hidden = list.length > 0;
    overflowEl.hidden = result.overflow === 0;
    overflowEl.textContent = '+' + result.overflow;
    stage.className = 'stage layout-' + state.layout;
    stage.dataset.participants = String(list.length);
  }

  /* ---- reactions ---- */

  function showReaction(kind) {
    if (REACTIONS.indexOf(kind) < 0) return;
    var source = glyphs.content.querySelector('[data-reaction="' + kind + '"]');
    if (!source) return;
    var item = document.createElement('div');
    item.className = 'reaction reaction-' + kind;
    item.dataset.reaction = kind;
    item.appendChild(source.cloneNode(true));
    var size = Math.round(Math.min(config.width, config.height) * 0.08);
    item.style.width = size + 'px';
    item.style.height = size + 'px';
    item.style.right = Math.round(config.width * (0.03 + Math.random() * 0.2)) + 'px';
    item.style.bottom = Math.round(config.height * 0.2) + 'px';
    item.addEventListener('animationend', function () {
      item.remove();
    });
    reactionsEl.appendChild(item);
  }

  /* ---- relay frames ---- */

  function onRelayFrame(frame) {
    if (frame.type !== 'event' || !frame.event) return;
    var event = frame.event;
    switch (event.kind) {
      case 'reaction':
        showReaction(event.reaction || event.type || event.name);
        break;
      case 'layout':
        if (window.StreamLayout.LAYOUTS.indexOf(event.layout) >= 0) {
          state.layout = event.layout;
        }
        relayout();
        break;
      case 'cohost':
        relayout();
        break;
      case 'gift':
        window.GiftOverlay.show(giftsEl, event);
        break;
      default:
        break;
    }
  }

  /* ---- the SFU room (livekit-client) ---- */

  function roleOf(participant) {
    try {
      var meta = participant.metadata ? JSON.parse(participant.metadata) : {};
      return (meta && meta.role) || '';
    } catch (e) {
      return '';
    }
  }

  function preferredSize() {
    return config.resolution === '720p' ? { width: 1280, height: 720 } : { width: 1920, height: 1080 };
  }

  function connectRoom(url, token) {
    var LK = window.LivekitClient;
    if (!LK || !LK.Room) {
      fail('the SFU client library did not load');
      return;
    }
    var room = new LK.Room({ adaptiveStream: false, dynacast: false });
    var E = LK.RoomEvent;
    function join(p) {
      if (p.permissions && p.permissions.hidden) return;
      addParticipant(p.identity, p.name || p.identity, roleOf(p));
    }
    function subscribed(track, publication, participant) {
      join(participant);
      if (track.kind === 'video') {
        if (publication.setVideoDimensions) publication.setVideoDimensions(preferredSize());
        setVideo(participant.identity, track.attach());
      } else if (track.kind === 'audio') {
        var el = track.attach();
        audioEl.appendChild(el);
        watchPlaying(el);
      }
    }
    room
      .on(E.ParticipantConnected, join)
      .on(E.ParticipantDisconnected, function (p) {
        removeParticipant(p.identity);
      })
      .on(E.ParticipantMetadataChanged, function (_, p) {
        var known = p && find(p.identity);
        if (known) {
          known.role = roleOf(p);
          relayout();
        }
      })
      .on(E.TrackSubscribed, subscribed)
      .on(E.TrackUnsubscribed, function (track) {
        track.detach().forEach(function (el) {
          el.remove();
        });
      })
      .on(E.ActiveSpeakersChanged, function (speakers) {
        var remote = speakers.filter(function (s) {
          return s !== room.localParticipant;
        });
        if (remote.length) setActive(remote[0].identity);
      })
      .on(E.Disconnected, endRecording);
    room
      .connect(url, token, { autoSubscribe: true })
      .then(function () {
        stage.dataset.room = 'connected';
        room.remoteParticipants.forEach(function (p) {
          join(p);
          p.trackPublications.forEach(function (pub) {
            if (pub.track && pub.isSubscribed) subscribed(pub.track, pub, p);
          });
        });
      })
      .catch(function (e) {
        fail('could not connect to the room: ' + (e && e.message ? e.message : e));
      });
    return room;
  }

  function fail(message) {
    state.error = message;
    stage.dataset.room = 'error';
    console.error(message);
  }

  /* ---- simulated participants (tests, previews) ---- */

  function canvasVideo(index, name) {
    var canvas = document.createElement('canvas');
    canvas.width = 320;
    canvas.height = 180;
    var g = canvas.getContext('2d');
    var frame = 0;
    function paint() {
      g.fillStyle = 'hsl(' + ((index * 47) % 360) + ', 55%, 42%)';
      g.fillRect(0, 0, canvas.width, canvas.height);
      g.fillStyle = '#fff';
      g.font = 'bold 64px sans-serif';
      g.textAlign = 'center';
      g.fillText(name, canvas.width / 2, 110);
      g.fillRect((frame++ * 4) % canvas.width, 160, 20, 10);
    }
    paint();
    setInterval(paint, 100);
    var video = document.createElement('video');
    video.srcObject = canvas.captureStream(10);
    return video;
  }

  var simulated = 0;

  function simulateJoin() {
    var i = simulated++;
    var id = 'sim-' + i;
    var role = i === 0 ? 'host' : i < 3 ? 'co_host' : '';
    addParticipant(id, i === 0 ? 'Host' : 'Guest ' + i, role);
    setVideo(id, canvasVideo(i, i === 0 ? 'H' : String(i)));
    return id;
  }

  function simulate(count) {
    stage.dataset.room = 'simulated';
    for (var i = 0; i < count; i++) simulateJoin();
    var speaker = parseInt(query.get('speaker') || '', 10);
    if (speaker >= 0 && speaker < count) setActive('sim-' + speaker);
    if (query.get('react') === '1') {
      REACTIONS.forEach(function (kind) {
        onRelayFrame({ type: 'event', event: { kind: 'reaction', reaction: kind } });
      });
    }
    var end = parseInt(query.get('end') || '', 10);
    if (end >= 0) setTimeout(endRecording, end);
  }

  /* ---- state for tests ---- */

  function box(el) {
    var r = el.getBoundingClientRect();
    return { x: Math.round(r.left), y: Math.round(r.top), w: Math.round(r.width), h: Math.round(r.height) };
  }

  function report() {
    var list = ordered();
    return {
      layout: state.layout,
      width: config.width,
      height: config.height,
      stage: box(stage),
      recording: stage.dataset.recording,
      room: stage.dataset.room || 'waiting',
      error: state.error,
      overflow: state.lastLayout ? state.lastLayout.overflow : 0,
      overflowShown: !overflowEl.hidden,
      waitingShown: !waitingEl.hidden,
      main: state.lastLayout ? state.lastLayout.main : -1,
      tiles: list.map(function (p, i) {
        return {
          id: p.id,
          role: p.role,
          visible: !p.tile.hidden,
          active: p.tile.classList.contains('tile-active'),
          expected: state.lastLayout ? state.lastLayout.tiles[i] || null : null,
          measured: p.tile.hidden ? null : box(p.tile),
          playing: !!(p.video && !p.video.paused && p.video.readyState >= 2)
        };
      }),
      reactions: Array.prototype.map.call(reactionsEl.querySelectorAll('.reaction'), function (el) {
        var glyph = el.querySelector('svg');
        return { kind: el.dataset.reaction, box: box(el), glyph: glyph ? glyph.dataset.reaction : null };
      }),
      gifts: window.GiftOverlay.report(giftsEl),
      relay: state.relay
    };
  }

  window.recordPage = {
    report: report,
    relayFrame: onRelayFrame,
    simulateJoin: simulateJoin,
    leave: removeParticipant,
    setActive: setActive
  };

  relayout();
  window.StreamRelay.connect(config.streamId, onRelayFrame, function (s) {
    state.relay = s;
  }, config.clientId);

  var simulateCount = parseInt(query.get('simulate') || '', 10);
  var url = query.get('url');
  var token = query.get('token');
  if (simulateCount >= 0) {
    simulate(Math.min(simulateCount, 64));
  } else if (url && token) {
    connectRoom(url, token);
  }
})();
