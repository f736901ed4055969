/*
 * The watch page: the player, the live state, the live chat read-only through the relay,
 * and gifts (static/gifts.js). The player is the SDK's <live-player> element
 * (static/live-player.js, the build of sdk/typescript/src/player: one player for the
 * platform's pages and the tenants' own): hls.js, the quality menu from the ladder, the
 * latency, the honest live state (live, "Reconnecting…" when the source stops, live again
 * at the live edge when it returns) and the view beacon. This page starts it when the
 * broadcast is live, replays the recording after the show, and ends it when the relay
 * says the broadcast ended; the badge and data-live on #watch follow its state.
 * Once the broadcast has ended the chat is closed: the page shows its last messages (the
 * relay's history) and lets the socket go.
 * The embed page (data-embed) runs the same player without the page around it (no title,
 * badge, chat or gifts): the relay only moves its state.
 */
(function () {
  'use strict';

  var root = document.getElementById('watch');
  var player = document.getElementById('player');
  var message = document.getElementById('player-message');
  var badge = document.getElementById('status');
  var viewers = document.getElementById('viewers');
  var chat = document.getElementById('chat');
  var chatHeading = document.getElementById('chat-heading');
  var chatState = document.getElementById('chat-state');
  var relay = null;
  var chatClosed = false;
  var giftsEl = document.getElementById('gifts');
  var hlsUrl = root.dataset.hlsUrl;
  var replayUrl = root.dataset.replayUrl;
  var LABELS = { live: 'Live', upcoming: 'Starting soon', ended: 'Ended', reconnecting: 'Reconnecting…' };
  var MESSAGES = { upcoming: 'The broadcast has not started yet.', ended: 'This broadcast has ended.' };
  var REPLAY_LABEL = 'Replay';
  var MAX_CHAT = 200;
  var CHAT_CLOSED = 'Chat closed: the broadcast has ended';

  /* Runs `f` with the player once its element is defined (its module loads after this script). */
  function withPlayer(f) {
    if (window.customElements) window.customElements.whenDefined('live-player').then(f);
  }

  /* The broadcast has ended: no more live chat. */
  function closeChat() {
    chatClosed = true;
    if (relay) relay.close();
    if (!chat) return;
    chatHeading.textContent = 'Chat';
    chatState.textContent = CHAT_CLOSED;
  }

  function showBadge(key) {
    if (!badge) return;
    badge.className = 'badge badge-' + key;
    badge.textContent = LABELS[key];
  }

  function setStatus(status) {
    if (!LABELS[status] || status === 'reconnecting') return;
    var was = root.dataset.status;
    root.dataset.status = status;
    showBadge(status);
    if (status === 'live') {
      message.hidden = true;
      play();
    } else if (status === 'ended' && was === 'live') {
      // The player says it (and its state moves to ended).
      message.hidden = true;
      withPlayer(function () { player.end(); });
    } else {
      message.textContent = MESSAGES[status];
      message.hidden = false;
    }
    if (status === 'ended') closeChat();
  }

  function play() {
    if (!hlsUrl) {
      message.textContent = 'Playback is not configured.';
      message.hidden = false;
      return;
    }
    player.removeAttribute('recording');
    player.setAttribute('src', hlsUrl);
  }

  /* The broadcast has ended and a recording is ready: play it from the start, or from the
   * embed's `t` (data-start, seconds). */
  function replay() {
    root.dataset.replay = 'true';
    if (badge) badge.textContent = REPLAY_LABEL;
    message.hidden = true;
    player.setAttribute('recording', '');
    if (Number(root.dataset.start) > 0) player.setAttribute('start', root.dataset.start);
    player.setAttribute('src', replayUrl);
  }

  /* The badge and data-live follow the player's live state. */
  player.addEventListener('statechange', function (e) {
    var state = e.detail.state;
    root.dataset.live = state;
    if (root.dataset.replay !== 'true' && state !== 'connecting') showBadge(state);
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
        if (s !== root.dataset.status) setStatus(s);
      } else if (e.kind === 'viewers' && viewers && typeof e.viewerCount === 'number') {
        viewers.textContent = e.viewerCount + ' watching';
        viewers.hidden = false;
      } else if (e.kind === 'gift' && giftsEl) {
        window.GiftOverlay.show(giftsEl, e);
      }
    }
  }

  window.watchPage = {
    relayFrame: onFrame,
    /* What plays: the renditions, the one on screen, whether hls.js chooses, latency. */
    player: function () {
      return player.stats || null;
    },
    /* What the view beacon says next. */
    views: function () {
      return player.report || null;
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
