/* tollgate report --config F --from T --to T: the console's timeline drawn
 * from the data written into the page itself (a <script type=
 * "application/json"> block), so the page stands alone: no daemon, no
 * network. */
(function () {
  'use strict';
  var TG = window.TG;

  function start() {
    var data = JSON.parse(document.getElementById('tg-data').textContent);
    var tl = null;
    function draw() {
      TG.applyI18n(document);
      TG.renderLangSwitch();
      var box = document.getElementById('charts');
      if (tl) tl.destroy();
      tl = new TG.Timeline(box);
      tl.set(data.series);
      var w = document.getElementById('window');
      w.textContent = TG.fmtTime(data.from) + ' – ' + TG.fmtTime(data.to);
    }
    TG.langListeners.push(draw);
    draw();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
