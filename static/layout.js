/*
 * The recording page's layout engine: where each participant's tile goes, in whole
 * pixels, for a frame of exactly width x height. Plain functions, no DOM: the page applies
 * the rectangles, and tests call `compute` with simulated participant counts.
 *
 * Participants are ordered host first, then co-hosts, then the others.
 *
 *   default  host fills the frame; the others float in a strip along the bottom
 *   grid3x3  3x3 grid, the host is one tile (at most 9 tiles)
 *   grid4x4  4x4 grid, the host is one tile (at most 16 tiles)
 *   battle   host and first participant side by side; the others in columns at the sides
 *   onebig   host in a large rectangle, the others in a strip below
 *   active   the active speaker in the large rectangle, the others in a strip below
 *
 * Loaded as a classic script it defines `StreamLayout`; under CommonJS it is the export.
 */
(function (root, factory) {
  if (typeof module === 'object' && module.exports) {
    module.exports = factory();
  } else {
    root.StreamLayout = factory();
  }
})(typeof self !== 'undefined' ? self : this, function () {
  'use strict';

  var LAYOUTS = ['default', 'grid3x3', 'grid4x4', 'battle', 'onebig', 'active'];

  function rect(x, y, w, h) {
    return { x: x, y: y, w: w, h: h };
  }

  /* `parts` consecutive integer spans that exactly cover `total` starting at `start`. */
  function spans(start, total, parts) {
    var out = [];
    for (var i = 0; i < parts; i++) {
      var a = Math.round((i * total) / parts);
      var b = Math.round(((i + 1) * total) / parts);
      out.push([start + a, b - a]);
    }
    return out;
  }

  /* `count` tiles side by side exactly filling the area. */
  function row(count, area) {
    return spans(area.x, area.w, count).map(function (s) {
      return rect(s[0], area.y, s[1], area.h);
    });
  }

  /* `count` tiles stacked exactly filling the area. */
  function column(count, area) {
    return spans(area.y, area.h, count).map(function (s) {
      return rect(area.x, s[0], area.w, s[1]);
    });
  }

  /* Height of the participant strip below (or over) the main picture. */
  function stripHeight(width, height) {
    return Math.round(height * (height > width ? 0.16 : 0.22));
  }

  function grid(n, size, width, height) {
    var cols = spans(0, width, size);
    var rows = spans(0, height, size);
    var tiles = [];
    for (var i = 0; i < Math.min(n, size * size); i++) {
      var c = cols[i % size];
      var r = rows[Math.floor(i / size)];
      tiles.push(rect(c[0], r[0], c[1], r[1]));
    }
    return { tiles: tiles, main: n > 0 ? 0 : -1, overflow: Math.max(0, n - size * size) };
  }

  /* Host over the whole frame; the others in a strip floating along the bottom edge. */
  function floatingStrip(n, width, height) {
    var tiles = [rect(0, 0, width, height)];
    var k = n - 1;
    if (k > 0) {
      var margin = Math.max(4, Math.round(Math.min(width, height) * 0.02));
      var strip = stripHeight(width, height);
      var room = width - 2 * margin - (k - 1) * margin;
      var tileWidth = Math.max(1, Math.min(Math.floor(room / k), Math.round((strip * 3) / 4)));
      var tileHeight = strip;
      var used = k * tileWidth + (k - 1) * margin;
      var x = Math.floor((width - used) / 2);
      var y = height - margin - tileHeight;
      for (var i = 0; i < k; i++) {
        tiles.push(rect(x + i * (tileWidth + margin), y, tileWidth, tileHeight));
      }
    }
    return { tiles: tiles, main: 0, overflow: 0 };
  }

  /* One participant (`main`) in the large rectangle, everyone else in a strip below. */
  function bigAndStrip(n, main, width, height) {
    if (n === 1) {
      return { tiles: [rect(0, 0, width, height)], main: 0, overflow: 0 };
    }
    var strip = stripHeight(width, height);
    var others = row(n - 1, rect(0, height - strip, width, strip));
    var tiles = [];
    for (var i = 0, j = 0; i < n; i++) {
      tiles.push(i === main ? rect(0, 0, width, height - strip) : others[j++]);
    }
    return { tiles: tiles, main: main, overflow: 0 };
  }

  function battle(n, width, height) {
    if (n === 1) {
      return { tiles: [rect(0, 0, width, height)], main: 0, overflow: 0 };
    }
    var side = n > 2 ? Math.round(width * 0.16) : 0;
    var halves = row(2, rect(side, 0, width - 2 * side, height));
    var rest = n - 2;
    var left = column(Math.ceil(rest / 2), rect(0, 0, side, height));
    var right = column(Math.floor(rest / 2), rect(width - side, 0, side, height));
    var tiles = [halves[0], halves[1]];
    for (var i = 0; i < rest; i++) {
      tiles.push(i % 2 === 0 ? left[i / 2] : right[(i - 1) / 2]);
    }
    return { tiles: tiles, main: 0, overflow: 0 };
  }

  /*
   * compute(layout, n, width, height, options) → { tiles, main, overflow }
   *   tiles[i]  the rectangle {x, y, w, h} of participant i, or absent when it has no room
   *   main      the index shown largest (-1 when nobody is there)
   *   overflow  participants without a tile
   * options.active: index of the active speaker (layout `active`), default 0.
   */
  function compute(layout, n, width, height, options) {
    var opts = options || {};
    n = Math.max(0, Math.floor(n));
    if (n === 0) {
      return { tiles: [], main: -1, overflow: 0 };
    }
    switch (layout) {
      case 'grid3x3':
        return grid(n, 3, width, height);
      case 'grid4x4':
        return grid(n, 4, width, height);
      case 'battle':
        return battle(n, width, height);
      case 'onebig':
        return bigAndStrip(n, 0, width, height);
      case 'active': {
        var active = opts.active >= 0 && opts.active < n ? opts.active : 0;
        return bigAndStrip(n, active, width, height);
      }
      default:
        return floatingStrip(n, width, height);
    }
  }

  return { LAYOUTS: LAYOUTS, compute: compute };
});
