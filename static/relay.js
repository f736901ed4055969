/*
 * Read-only connection to a stream's real-time channel on the relay
 * (`/ws/streams/{streamId}/chat`, same origin). Best effort: when the relay is missing or
 * refuses, the page works without it and retries with a growing delay.
 *
 * Frames: {"type":"history","messages":[...]}, {"type":"message","message":{...}} and
 * {"type":"event","event":{"kind":"reaction"|"status"|"cohost"|"layout"|"viewers",...}}.
 * The socket asks for batches (?batch=1): {"type":"batch","frames":[...]} carries frames that
 * arrived together, handed to onFrame one by one, in order.
 */
(function (root) {
  'use strict';

  /* Anonymous sockets are read-only; the relay needs the stream's tenant (clientId) to
   * read a public stream's history. */
  function relayUrl(streamId, clientId) {
    var scheme = root.location.protocol === 'https:' ? 'wss:' : 'ws:';
    var url = scheme + '//' + root.location.host + '/ws/streams/' + encodeURIComponent(streamId) + '/chat?batch=1';
    return clientId ? url + '&clientId=' + encodeURIComponent(clientId) : url;
  }

  /* connect(streamId, onFrame, onState, clientId) → { close() }; onState('open'|'closed') */
  function connect(streamId, onFrame, onState, clientId) {
    var delay = 1000;
    var socket = null;
    var stopped = false;
    var timer = null;
    function open() {
      if (stopped || typeof root.WebSocket !== 'function') {
        return;
      }
      try {
        socket = new root.WebSocket(relayUrl(streamId, clientId));
      } catch (e) {
        retry();
        return;
      }
      socket.onopen = function () {
        delay = 1000;
        if (onState) onState('open');
      };
      socket.onmessage = function (message) {
        var frame;
        try {
          frame = JSON.parse(message.data);
        } catch (e) {
          return;
        }
        if (frame && frame.type === 'batch' && Array.isArray(frame.frames)) {
          frame.frames.forEach(function (f) {
            if (f && typeof f === 'object') onFrame(f);
          });
        } else if (frame && typeof frame === 'object') {
          onFrame(frame);
        }
      };
      socket.onclose = function () {
        if (onState) onState('closed');
        retry();
      };
    }
    function retry() {
      if (stopped) return;
      timer = root.setTimeout(open, delay);
      delay = Math.min(delay * 2, 30000);
    }
    open();
    return {
      close: function () {
        stopped = true;
        root.clearTimeout(timer);
        if (socket) socket.close();
      }
    };
  }

  root.StreamRelay = { connect: connect, url: relayUrl };
})(typeof self !== 'undefined' ? self : this);
