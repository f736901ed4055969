/*
 * The watch page: HLS playback with hls.js (native HLS where the browser has it), the
 * live state, the live chat read-only through the relay, and gifts (static/gifts.js).
 * Once the broadcast has ended the chat is closed: the page shows its last messages (the
 * relay's history) and lets the socket go.
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
  var hlsUrl = root.dataset.hlsUrl;
  var replayUrl = root.dataset.replayUrl;
  var replayType = root.dataset.replayType;
  var hls = null;
  var retryTimer = null;
  var LABELS = { live: 'Live', upcoming: 'Starting soon', ended: 'Ended' };
  var MESSAGES = { upcoming: 'The broadcast has not started yet.', ended: 'This broadcast has ended.' };
  var REPLAY_LABEL = 'Replay';
  var MAX_CHAT = 200;
  var CHAT_CLOSED = 'Chat closed: the broadcast has ended';

  /* The broadcast has ended: no more live chat. */
  function closeChat() {
    chatClosed = true;
    chatHeading.textContent = 'Chat';
    chatState.textContent = CHAT_CLOSED;
    if (relay) relay.close();
  }

  function setStatus(status) {
    if (!LABELS[status]) return;
    root.dataset.status = status;
    badge.className = 'badge badge-' + status;
    badge.textContent = LABELS[status];
    if (status === 'live') {
      message.hidden = true;
      play();
    } else {
      stop();
      message.textContent = MESSAGES[status];
      message.hidden = false;
    }
    if (status === 'ended') closeChat();
  }

  function showProblem(text) {
    message.textContent = text;
    message.hidden = false;
  }

  function stop() {
    clearTimeout(retryTimer);
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
    badge.textContent = REPLAY_LABEL;
    message.hidden = true;
    if (replayType === 'mp4') {
      stop();
      video.src = replayUrl;
      video.play().catch(function () {});
    } else {
      load(replayUrl, false);
    }
  }

  function load(url, live) {
    stop();
    if (!url) {
      showProblem('Playback is not configured.');
      return;
    }
    if (window.Hls && window.Hls.isSupported()) {
      hls = new window.Hls({ enableWorker: false, lowLatencyMode: live });
      hls.on(window.Hls.Events.ERROR, function (_, data) {
        if (!data.fatal) return;
        if (!live) {
          showProblem('The recording cannot be played.');
          stop();
          return;
        }
        showProblem('The stream is not available right now. Retrying…');
        stop();
        retryTimer = setTimeout(function () {
          if (root.dataset.status === 'live') play();
        }, 5000);
      });
      hls.on(window.Hls.Events.MANIFEST_PARSED, function () {
        message.hidden = true;
        video.play().catch(function () {});
      });
      hls.loadSource(url);
      hls.attachMedia(video);
    } else if (video.canPlayType('application/vnd.apple.mpegurl')) {
      video.src = url;
      video.play().catch(function () {});
    } else {
      showProblem('This browser cannot play HLS.');
    }
  }

  function author(m) {
    var sender = m.sender || m.user || {};
    return m.senderName || m.username || m.userName || sender.username || sender.name || 'viewer';
  }

  function addMessage(m) {
    if (!m || typeof m !== 'object') return;
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
      chat.textContent = '';
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
      } else if (e.kind === 'viewers' && typeof e.viewerCount === 'number') {
        viewers.textContent = e.viewerCount + ' watching';
        viewers.hidden = false;
      } else if (e.kind === 'gift') {
        window.GiftOverlay.show(giftsEl, e);
      }
    }
  }

  window.watchPage = {
    relayFrame: onFrame,
    gifts: function () {
      return window.GiftOverlay.report(giftsEl);
    }
  };
  relay = window.StreamRelay.connect(root.dataset.streamId, onFrame, function (s) {
    if (chatClosed) return;
    if (root.dataset.status === 'ended') chatState.textContent = CHAT_CLOSED;
    else chatState.textContent = s === 'open' ? 'Chat connected' : 'Chat unavailable, retrying';
  }, root.dataset.clientId);
  if (root.dataset.status === 'live') play();
  else if (root.dataset.status === 'ended' && replayUrl) replay();
})();
