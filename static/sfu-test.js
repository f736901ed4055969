/*
 * The SFU test page: connect, publish camera and microphone, subscribe, showing the
 * result of each step.
 */
(function () {
  'use strict';

  var form = document.getElementById('form');
  var media = document.getElementById('media');
  var room = null;

  function step(name, result, detail) {
    var el = document.querySelector('[data-step="' + name + '"] .result');
    el.dataset.result = result;
    el.textContent = detail ? result + ' (' + detail + ')' : result;
  }

  function why(e) {
    return e && e.message ? e.message : String(e);
  }

  var LK = window.LivekitClient;
  if (LK && LK.Room) {
    step('load', 'ok', 'livekit-client ' + (LK.version || ''));
  } else {
    step('load', 'failed', 'the library did not load');
  }

  function show(track) {
    var el = track.attach();
    media.appendChild(el);
  }

  async function run(url, token) {
    if (room) await room.disconnect();
    ['connect', 'publish-camera', 'publish-microphone', 'subscribe'].forEach(function (s) {
      step(s, 'pending');
    });
    room = new LK.Room();
    room.on(LK.RoomEvent.TrackSubscribed, function (track, _pub, participant) {
      show(track);
      step('subscribe', 'ok', track.kind + ' of ' + participant.identity);
    });
    try {
      await room.connect(url, token);
      step('connect', 'ok', room.name);
    } catch (e) {
      step('connect', 'failed', why(e));
      return;
    }
    try {
      var cam = await room.localParticipant.setCameraEnabled(true);
      if (cam && cam.track) show(cam.track);
      step('publish-camera', 'ok');
    } catch (e) {
      step('publish-camera', 'failed', why(e));
    }
    try {
      await room.localParticipant.setMicrophoneEnabled(true);
      step('publish-microphone', 'ok');
    } catch (e) {
      step('publish-microphone', 'failed', why(e));
    }
    if (room.remoteParticipants.size === 0) {
      step('subscribe', 'waiting', 'no other participant yet');
    }
  }

  form.addEventListener('submit', function (event) {
    event.preventDefault();
    if (!LK || !LK.Room) return;
    run(document.getElementById('url').value.trim(), document.getElementById('token').value.trim());
  });
})();
