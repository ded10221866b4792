/* tollgate console: the seed's one picture. Four uPlot charts on one time
 * axis (starts/s and closes/s with the configured rate; in flight against
 * its cap; the oldest pending age; the backlog by state), their cursors and
 * zoom kept together, and behind every chart the bands: provider holds
 * (429/503 or a run of timeouts), owner changes and admission refusals.
 *
 * Data comes as columns from the daemon (GET api/timeline, api/live, or the
 * page `tollgate report` writes): t in seconds, one value per column per
 * point, a bin of step_s seconds each; a time without a point is a gap.
 * TG.Timeline(container) then .set(series) / .append(series) / .destroy(). */
(function () {
  'use strict';
  var TG = (window.TG = window.TG || {});

  var COLORS = {
    starts: '#1f77b4',
    closes: '#2ca02c',
    rate: '#888888',
    in_flight: '#d95f02',
    cap: '#b00020',
    oldest: '#8c564b',
    pending: '#1b9e77',
    in_flight_ops: '#d95f02',
    retry_wait: '#7570b3',
    unknown: '#e7298a',
    manual: '#444444',
    hold: 'rgba(214, 39, 40, 0.16)',
    refused: 'rgba(255, 159, 0, 0.22)',
    owner: '#6a3d9a'
  };
  var KEEP_S = 3600; /* the live view keeps the last hour */
  var COLS = ['t', 'starts', 'closes', 'in_flight', 'oldest_age_s', 'held', 'epoch', 'pending', 'in_flight_ops', 'retry_wait', 'unknown', 'manual', 'refused'];

  function Timeline(container, opts) {
    this.box = container;
    this.opts = opts || {};
    this.cols = {};
    COLS.forEach(function (c) {
      this.cols[c] = [];
    }, this);
    this.step = 1;
    this.cap = 0;
    this.rate = 0;
    this.charts = [];
    this.zoomed = false;
    this.syncing = false;
  }

  Timeline.prototype.set = function (s) {
    var self = this;
    this.step = s.step_s || 1;
    this.cap = s.cap || 0;
    this.rate = s.rate || 0;
    COLS.forEach(function (c) {
      self.cols[c] = (s[c] || []).slice();
    });
    this.zoomed = false;
    this.render();
  };

  /* New points from api/live: those after the last one kept, then the last
   * hour only (a live view). */
  Timeline.prototype.append = function (s) {
    var self = this;
    var t = this.cols.t;
    var last = t.length ? t[t.length - 1] : -Infinity;
    var added = 0;
    for (var i = 0; i < (s.t || []).length; i++) {
      if (s.t[i] <= last) continue;
      COLS.forEach(function (c) {
        self.cols[c].push(s[c] ? s[c][i] : null);
      });
      added++;
    }
    if (!added) return 0;
    var cut = 0;
    var newest = t[t.length - 1];
    while (cut < t.length && t[cut] < newest - KEEP_S) cut++;
    if (cut) {
      COLS.forEach(function (c) {
        self.cols[c].splice(0, cut);
      });
    }
    if (s.cap) this.cap = s.cap;
    if (s.rate) this.rate = s.rate;
    this.update();
    return added;
  };

  Timeline.prototype.points = function () {
    return this.cols.t.length;
  };

  /* The columns with a null row wherever time jumps by more than two steps
   * (no dispatcher wrote): uPlot leaves such a gap open. */
  Timeline.prototype.gapped = function () {
    var t = this.cols.t;
    var out = {};
    COLS.forEach(function (c) {
      out[c] = [];
    });
    for (var i = 0; i < t.length; i++) {
      if (i > 0 && t[i] - t[i - 1] > 2 * this.step) {
        out.t.push(t[i - 1] + this.step);
        COLS.forEach(function (c) {
          if (c !== 't') out[c].push(null);
        });
      }
      COLS.forEach(function (c) {
        out[c].push(this.cols[c][i]);
      }, this);
    }
    return out;
  };

  /* Holds and refusals as [from, to) runs; owner changes as instants. */
  Timeline.prototype.bands = function () {
    var t = this.cols.t;
    var step = this.step;
    var b = { hold: [], refused: [], owner: [] };
    var run = function (list, on, i) {
      var cur = list.length ? list[list.length - 1] : null;
      if (!on) return;
      if (cur && cur[1] >= t[i] - 0.001) cur[1] = t[i] + step;
      else list.push([t[i], t[i] + step]);
    };
    var prev = null;
    for (var i = 0; i < t.length; i++) {
      run(b.hold, this.cols.held[i] === 1, i);
      run(b.refused, (this.cols.refused[i] || 0) > 0, i);
      var e = this.cols.epoch[i];
      if (e !== null && e !== undefined && e > 0) {
        if (prev !== null && e !== prev) b.owner.push(t[i]);
        prev = e;
      }
    }
    return b;
  };

  function bandsPlugin(tl) {
    return {
      hooks: {
        drawClear: function (u) {
          var ctx = u.ctx;
          var top = u.bbox.top;
          var h = u.bbox.height;
          var left = u.bbox.left;
          var right = left + u.bbox.width;
          var b = tl.currentBands;
          if (!b) return;
          ctx.save();
          var fill = function (list, color) {
            ctx.fillStyle = color;
            list.forEach(function (r) {
              var x0 = Math.max(left, u.valToPos(r[0], 'x', true));
              var x1 = Math.min(right, u.valToPos(r[1], 'x', true));
              /* a run at the right edge (the newest second) still shows */
              if (x1 - x0 < 4 && x0 <= right && x1 >= left) x0 = Math.max(left, x1 - 4);
              if (x1 > x0) ctx.fillRect(x0, top, x1 - x0, h);
            });
          };
          fill(b.hold, COLORS.hold);
          fill(b.refused, COLORS.refused);
          ctx.strokeStyle = COLORS.owner;
          ctx.lineWidth = 2 * (window.devicePixelRatio || 1);
          ctx.setLineDash([6, 4]);
          b.owner.forEach(function (x) {
            var px = u.valToPos(x, 'x', true);
            if (px < left || px > right) return;
            ctx.beginPath();
            ctx.moveTo(px, top);
            ctx.lineTo(px, top + h);
            ctx.stroke();
          });
          ctx.restore();
        }
      }
    };
  }

  function constant(t, v) {
    return t.map(function (x, i) {
      return v;
    });
  }

  Timeline.prototype.chartDefs = function (d) {
    var t = TG.t;
    return [
      {
        id: 'chart-rate',
        title: t('tl.rate'),
        series: [
          { label: t('s.starts'), stroke: COLORS.starts, data: d.starts, width: 1.5 },
          { label: t('s.closes'), stroke: COLORS.closes, data: d.closes, width: 1.5 },
          { label: t('s.rate'), stroke: COLORS.rate, data: constant(d.t, this.rate), dash: [4, 4], width: 1 }
        ]
      },
      {
        id: 'chart-flight',
        title: t('tl.flight'),
        series: [
          { label: t('s.in_flight'), stroke: COLORS.in_flight, data: d.in_flight, width: 1.5 },
          { label: t('s.cap'), stroke: COLORS.cap, data: constant(d.t, this.cap), dash: [4, 4], width: 1 }
        ]
      },
      {
        id: 'chart-oldest',
        title: t('tl.oldest'),
        series: [{ label: t('s.oldest'), stroke: COLORS.oldest, data: d.oldest_age_s, width: 1.5, fill: 'rgba(140,86,75,0.08)' }]
      },
      {
        id: 'chart-backlog',
        title: t('tl.backlog'),
        series: ['pending', 'in_flight_ops', 'retry_wait', 'unknown', 'manual'].map(function (k) {
          return { label: TG.stateName(k === 'in_flight_ops' ? 'in_flight' : k), stroke: COLORS[k], data: d[k], width: 1.5 };
        })
      }
    ];
  };

  Timeline.prototype.width = function () {
    return Math.max(320, (this.box.clientWidth || 960) - 8);
  };

  Timeline.prototype.destroy = function () {
    this.charts.forEach(function (c) {
      c.u.destroy();
    });
    this.charts = [];
    if (this.onResize) window.removeEventListener('resize', this.onResize);
    this.onResize = null;
    this.box.textContent = '';
  };

  Timeline.prototype.legend = function () {
    var b = this.currentBands;
    var box = this.bandBox;
    if (!box) return;
    box.textContent = '';
    var item = function (id, cls, label, n) {
      return TG.el('span', { id: id, class: 'band-key ' + cls, 'data-count': String(n) }, [TG.el('i', {}), label + ' ×' + n]);
    };
    box.appendChild(item('band-hold', 'hold', TG.t('band.hold'), b.hold.length));
    box.appendChild(item('band-owner', 'owner', TG.t('band.owner'), b.owner.length));
    box.appendChild(item('band-refused', 'refused', TG.t('band.refused'), b.refused.length));
    var info = this.infoBox;
    if (info) {
      info.textContent = this.points() ? TG.t('tl.points', { n: this.points(), step: this.step }) : TG.t('tl.empty');
      info.setAttribute('data-points', String(this.points()));
    }
  };

  Timeline.prototype.render = function () {
    var self = this;
    this.destroy();
    var d = this.gapped();
    this.currentBands = this.bands();
    this.bandBox = TG.el('div', { class: 'bands', id: 'bands' });
    this.infoBox = TG.el('p', { class: 'muted', id: 'timeline-info' });
    this.box.appendChild(this.bandBox);
    this.box.appendChild(this.infoBox);
    this.legend();
    var sync = uPlot.sync('tg-' + Math.random().toString(36).slice(2));
    var defs = this.chartDefs(d);
    defs.forEach(function (def) {
      var wrap = TG.el('section', { class: 'chart', id: def.id }, [TG.el('h3', { text: def.title })]);
      self.box.appendChild(wrap);
      var series = [{}].concat(
        def.series.map(function (s) {
          return { label: s.label, stroke: s.stroke, width: s.width, dash: s.dash, fill: s.fill, spanGaps: false, points: { show: false } };
        })
      );
      var data = [d.t].concat(
        def.series.map(function (s) {
          return s.data;
        })
      );
      var u = new uPlot(
        {
          width: self.width(),
          height: 170,
          series: series,
          scales: { x: { time: true }, y: { range: function (u, lo, hi) { return [0, Math.max(1, hi * 1.1)]; } } },
          axes: [{}, { size: 50 }],
          cursor: { sync: { key: sync.key, setSeries: false }, drag: { x: true, y: false } },
          legend: { live: true },
          plugins: [bandsPlugin(self)],
          hooks: {
            setScale: [
              function (u, key) {
                if (key !== 'x' || self.syncing) return;
                self.syncing = true;
                var min = u.scales.x.min;
                var max = u.scales.x.max;
                var full = self.cols.t;
                self.zoomed = full.length > 1 && (min > full[0] + 0.5 || max < full[full.length - 1] - 0.5);
                self.charts.forEach(function (c) {
                  if (c.u !== u) c.u.setScale('x', { min: min, max: max });
                });
                self.syncing = false;
              }
            ]
          }
        },
        data,
        wrap
      );
      self.charts.push({ u: u, def: def });
    });
    this.onResize = function () {
      var w = self.width();
      self.charts.forEach(function (c) {
        c.u.setSize({ width: w, height: 170 });
      });
    };
    window.addEventListener('resize', this.onResize);
  };

  /* New data into the same charts; a zoomed view keeps its window. */
  Timeline.prototype.update = function () {
    if (!this.charts.length) return this.render();
    var d = this.gapped();
    this.currentBands = this.bands();
    var defs = this.chartDefs(d);
    var keep = this.zoomed;
    var self = this;
    this.charts.forEach(function (c, i) {
      var data = [d.t].concat(
        defs[i].series.map(function (s) {
          return s.data;
        })
      );
      if (keep) {
        var min = c.u.scales.x.min;
        var max = c.u.scales.x.max;
        self.syncing = true;
        c.u.setData(data, false);
        c.u.setScale('x', { min: min, max: max });
        self.syncing = false;
      } else {
        c.u.setData(data, true);
      }
    });
    this.legend();
  };

  TG.Timeline = Timeline;
})();
