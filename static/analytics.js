// The analytics dashboard: draws the series the page embeds (data-series) with uPlot.
// No network access: the page holds everything it shows.
(function () {
  'use strict';

  var root = document.getElementById('dashboard');
  var data = JSON.parse(root.getAttribute('data-series'));

  function width(el) {
    return Math.max(280, Math.floor(el.clientWidth || 600));
  }

  /* Axes, ticks and grid lines light on the pages' dark background. */
  function axis(options) {
    options.stroke = '#c8c8d0';
    options.grid = { stroke: 'rgba(255,255,255,0.08)', width: 1 };
    options.ticks = { stroke: 'rgba(255,255,255,0.2)', width: 1 };
    return options;
  }

  function draw(id, series, columns) {
    var el = document.getElementById(id);
    var options = {
      width: width(el),
      height: 220,
      scales: { x: { time: true } },
      series: [{}].concat(series),
      axes: [axis({}), axis({ size: 50 })]
    };
    return new uPlot(options, [data.time].concat(columns), el);
  }

  var charts = [
    draw('chart-viewers', [
      { label: 'Mean', stroke: '#60a5fa', width: 2 },
      { label: 'Peak', stroke: '#93c5fd', width: 1, dash: [4, 4] }
    ], [data.viewersMean, data.viewersMax]),
    draw('chart-engagement', [
      { label: 'Messages', stroke: '#16a34a', width: 2 },
      { label: 'Reactions', stroke: '#db2777', width: 2 }
    ], [data.messages, data.reactions]),
    draw('chart-gifts', [
      { label: 'Gift tokens', stroke: '#d97706', width: 2, fill: 'rgba(217,119,6,0.15)' }
    ], [data.giftTokens])
  ];

  window.addEventListener('resize', function () {
    charts.forEach(function (chart) {
      chart.setSize({ width: width(chart.root.parentNode), height: 220 });
    });
  });

  /* The broadcast's time range in the reader's time zone and language (the page says it in
   * UTC until then). */
  function showRange() {
    var el = document.getElementById('range');
    var from = Date.parse(el.getAttribute('data-from') || '');
    var to = Date.parse(el.getAttribute('data-to') || '');
    if (isNaN(from) || isNaN(to) || typeof Intl !== 'object') return;
    var format = new Intl.DateTimeFormat(undefined, {
      year: 'numeric', month: 'short', day: 'numeric',
      hour: 'numeric', minute: '2-digit', timeZoneName: 'short'
    });
    el.textContent = format.formatRange ? format.formatRange(from, to) :
      format.format(from) + ' to ' + format.format(to);
  }
  showRange();

  window.analyticsDashboard = { data: data, charts: charts };
})();
