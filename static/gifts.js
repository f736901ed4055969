/*
 * Gift animations for the recording and watch pages: a relay event
 * {kind: 'gift', giftId, name, animation: small|large|fullscreen, quantity, combo,
 * senderName?} becomes a banner that rises and fades over the video. Text only (never
 * HTML from the event); an anonymous gift names no sender.
 */
(function () {
  'use strict';

  var SIZES = ['small', 'large', 'fullscreen'];

  function show(container, event) {
    if (!container || !event) return null;
    var size = SIZES.indexOf(event.animation) >= 0 ? event.animation : 'small';
    var quantity = typeof event.quantity === 'number' && event.quantity > 1 ? event.quantity : 1;
    var combo = typeof event.combo === 'number' && event.combo > 1 ? event.combo : 1;
    var item = document.createElement('div');
    item.className = 'gift gift-' + size;
    item.dataset.gift = String(event.giftId || '');
    item.dataset.size = size;
    item.dataset.combo = String(combo);
    var label = document.createElement('span');
    label.className = 'gift-label';
    label.textContent =
      (event.senderName ? String(event.senderName) : 'Someone') +
      ' sent ' + String(event.name || 'a gift') + (quantity > 1 ? ' \u00d7' + quantity : '');
    item.appendChild(label);
    if (combo > 1) {
      var count = document.createElement('span');
      count.className = 'gift-combo';
      count.textContent = 'combo \u00d7' + combo;
      item.appendChild(count);
    }
    item.addEventListener('animationend', function () {
      item.remove();
    });
    container.appendChild(item);
    return item;
  }

  /* What a page's test report lists for the gifts on screen. */
  function report(container) {
    return Array.prototype.map.call(container.querySelectorAll('.gift'), function (el) {
      var r = el.getBoundingClientRect();
      return {
        gift: el.dataset.gift,
        size: el.dataset.size,
        combo: Number(el.dataset.combo),
        text: el.textContent,
        box: { x: Math.round(r.left), y: Math.round(r.top), w: Math.round(r.width), h: Math.round(r.height) }
      };
    });
  }

  window.GiftOverlay = { show: show, report: report };
})();
