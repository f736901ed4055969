/*
 * The egress player: plays `data-file` in a loop. Autoplay starts muted (browsers allow
 * that), then the player unmutes where the browser lets it; if unmuting would stop
 * playback it stays muted until the first user gesture. A browser that refuses autoplay
 * altogether gets a visible notice and playback starts on the first click or key.
 * Errors are shown on the page.
 * The state is mirrored on #state (data-state, data-loops, data-muted) for the egress
 * operator and for tests.
 */
(function () {
  'use strict';

  var media = document.getElementById('media');
  var stateEl = document.getElementById('state');
  var errorEl = document.getElementById('error');
  var loops = 0;
  var lastTime = 0;
  var unmuteTried = false;

  function show(state, text) {
    stateEl.dataset.state = state;
    stateEl.dataset.loops = String(loops);
    stateEl.dataset.muted = String(media.muted);
    stateEl.textContent = text || state;
  }

  function fail(message) {
    errorEl.textContent = message;
    errorEl.hidden = false;
    show('error', message);
    console.error('egress player: ' + message);
  }

  var MEDIA_ERRORS = {
    1: 'playback was aborted',
    2: 'a network error stopped the download',
    3: 'the file could not be decoded',
    4: 'the file or its format is not supported'
  };

  function notice(message) {
    errorEl.textContent = message;
    errorEl.hidden = !message;
  }

  function onGesture(run) {
    var once = function () {
      window.removeEventListener('pointerdown', once);
      window.removeEventListener('keydown', once);
      run();
    };
    window.addEventListener('pointerdown', once);
    window.addEventListener('keydown', once);
  }

  function unmute() {
    if (unmuteTried) return;
    unmuteTried = true;
    media.muted = false;
    // Chrome pauses autoplaying media that is unmuted without a user gesture.
    setTimeout(function () {
      if (media.paused && !media.ended) {
        media.muted = true;
        media.play().catch(function () {});
        show('playing', 'playing (muted until interaction)');
        onGesture(function () {
          media.muted = false;
          media.play().catch(function () {});
          show('playing');
        });
      } else {
        show('playing');
      }
    }, 250);
  }

  media.loop = true;
  media.addEventListener('playing', function () {
    show('playing');
    unmute();
  });
  media.addEventListener('timeupdate', function () {
    if (media.currentTime + 0.05 < lastTime) {
      loops += 1;
      show(stateEl.dataset.state === 'error' ? 'error' : 'playing');
    }
    lastTime = media.currentTime;
  });
  media.addEventListener('waiting', function () {
    show('buffering');
  });
  media.addEventListener('volumechange', function () {
    stateEl.dataset.muted = String(media.muted);
  });
  media.addEventListener('error', function () {
    var code = media.error ? media.error.code : 0;
    fail('Cannot play ' + media.dataset.file + ': ' + (MEDIA_ERRORS[code] || 'unknown error'));
  });
  media.dataset.file = document.getElementById('player').dataset.file;

  media.muted = true;
  var started = media.play();
  if (started && started.catch) {
    started.catch(function (e) {
      if (media.error) return;
      if (e && e.name === 'NotAllowedError') {
        show('blocked', 'autoplay blocked');
        notice('The browser blocked autoplay: click or press a key to start playback.');
        console.warn('egress player: autoplay was blocked by the browser');
        onGesture(function () {
          notice('');
          unmuteTried = true;
          media.muted = false;
          media.play().catch(function (err) {
            fail('Playback failed: ' + (err && err.message ? err.message : err));
          });
        });
      }
      // Other refusals come with a media error, which the 'error' handler reports.
    });
  }
})();
