/* tollgate console: the app. One page, its views chosen by the URL's hash:
 *   #/timeline  the live timeline (or a past window)
 *   #/ops       operations by state, and search by operation id
 *   #/op/ID     one operation: its calls, its events and their deliveries,
 *               and its audit trail
 *   #/manual    the manual-review desk: resend, resolve
 *   #/deliveries the events whose delivery failed (parked, or due after a
 *               failed attempt), each with a re-deliver button
 *   #/status    the exit: owner, shares, limits, hold, admission
 * Live data: one poll of api/live a second while the page is visible (the
 * daemon answers every dashboard from one cache; docs/design.md). Every
 * POST carries the session's CSRF token; the token that signed in was never
 * kept, and the session cookie is HttpOnly. */
(function () {
  'use strict';
  var TG = window.TG;
  var el = TG.el;
  var POLL_MS = 1000;

  var state = {
    session: null,
    view: null,
    timeline: null,
    live: null, /* the newest status */
    liveSince: 0,
    livePaused: false, /* a past window is shown */
    pollTimer: null,
    viewCleanup: null
  };
  TG.state = state;

  /* ---- talking to the daemon ------------------------------------------- */

  function signedOut() {
    window.location.reload(); /* the daemon answers /ui with the sign-in page */
  }

  TG.api = function (method, path, body) {
    var opts = { method: method, credentials: 'same-origin', headers: {} };
    if (method !== 'GET') {
      opts.headers['Content-Type'] = 'application/json';
      opts.headers['X-CSRF-Token'] = state.session ? state.session.csrf : '';
      opts.body = JSON.stringify(body || {});
    }
    return fetch('/ui/api/' + path, opts).then(function (r) {
      return r.text().then(function (text) {
        var data = null;
        try {
          data = text ? JSON.parse(text) : null;
        } catch (e) {
          data = null;
        }
        if (r.status === 401) {
          toast(TG.t('err.signedout'), true);
          setTimeout(signedOut, 800);
        }
        return { status: r.status, ok: r.ok, data: data };
      });
    });
  };

  function errText(res) {
    var m = res.data && res.data.error ? res.data.error.message : 'HTTP ' + res.status;
    return TG.t('err.generic', { message: m });
  }

  function toast(msg, bad) {
    var t = document.getElementById('toast');
    t.textContent = msg;
    t.className = 'toast' + (bad ? ' bad' : '');
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(function () {
      t.hidden = true;
    }, 6000);
  }

  /* ---- the live poll ------------------------------------------------------- */

  function poll() {
    clearTimeout(state.pollTimer);
    if (document.hidden) {
      state.pollTimer = setTimeout(poll, POLL_MS);
      return;
    }
    var asked = TG.account;
    TG.api('GET', 'live?since=' + state.liveSince * 1000 + TG.accountArg()).then(
      function (res) {
        /* an answer about the account shown before a switch is dropped */
        if (res.ok && res.data && asked === TG.account) {
          state.live = res.data.status;
          var s = res.data.series;
          if (s && s.t && s.t.length) state.liveSince = s.t[s.t.length - 1];
          pill();
          if (state.timeline && !state.livePaused) state.timeline.append(s);
          if (state.view === 'status') renderStatusBody();
        }
        state.pollTimer = setTimeout(poll, POLL_MS);
      },
      function () {
        state.pollTimer = setTimeout(poll, POLL_MS * 3);
      }
    );
  }

  function pill() {
    var p = document.getElementById('exit-pill');
    var s = state.live;
    if (!p || !s) return;
    var key = !s.owner_alive ? 'pill.down' : s.held ? 'pill.held' : 'pill.alive';
    p.textContent = TG.t(key);
    p.className = 'pill ' + (!s.owner_alive ? 'down' : s.held ? 'held' : 'alive');
    p.setAttribute('data-state', key.slice(5));
  }

  /* ---- views ------------------------------------------------------------------- */

  function view() {
    return document.getElementById('view');
  }

  function setView(name) {
    state.view = name;
    if (state.viewCleanup) state.viewCleanup();
    state.viewCleanup = null;
    var v = view();
    v.textContent = '';
    v.setAttribute('data-view', name);
    var links = document.querySelectorAll('#nav a');
    for (var i = 0; i < links.length; i++) links[i].className = links[i].getAttribute('data-view') === name ? 'on' : '';
    return v;
  }

  function table(head, rows, attrs) {
    return el('table', attrs || { class: 'grid' }, [
      el('thead', {}, el('tr', {}, head.map(function (h) {
        return el('th', { text: TG.t(h) });
      }))),
      el('tbody', {}, rows)
    ]);
  }

  function opLink(id) {
    return el('a', { href: '#/op/' + encodeURIComponent(id), class: 'mono' }, id);
  }

  /* -- timeline -- */

  function toLocalInput(ms) {
    var d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
    return d.toISOString().slice(0, 16);
  }

  function renderTimeline() {
    var v = setView('timeline');
    var from = el('input', { type: 'datetime-local', id: 'tl-from', value: toLocalInput(Date.now() - 3600000) });
    var to = el('input', { type: 'datetime-local', id: 'tl-to', value: toLocalInput(Date.now()) });
    var charts = el('div', { id: 'charts', class: 'charts' });
    var mode = el('span', { id: 'tl-mode', class: 'muted' });
    var quick = function (label, secs) {
      return el('button', {
        type: 'button',
        class: 'quick',
        onclick: function () {
          showWindow(Date.now() - secs * 1000, Date.now());
        }
      }, TG.t('tl.last', { n: label }));
    };
    v.appendChild(el('h2', { text: TG.t('tl.title') }));
    v.appendChild(
      el('div', { class: 'toolbar' }, [
        el('button', { type: 'button', id: 'tl-live', onclick: goLive }, TG.t('tl.live')),
        quick('15 min', 900),
        quick('6 h', 21600),
        quick('24 h', 86400),
        el('label', {}, [TG.t('tl.from') + ' ', from]),
        el('label', {}, [TG.t('tl.to') + ' ', to]),
        el('button', {
          type: 'button',
          id: 'tl-show',
          onclick: function () {
            var f = new Date(from.value).getTime();
            var t = new Date(to.value).getTime();
            if (f < t) showWindow(f, t);
          }
        }, TG.t('tl.show')),
        mode
      ])
    );
    v.appendChild(el('p', { class: 'muted', text: TG.t('tl.hint') }));
    v.appendChild(charts);
    state.timeline = new TG.Timeline(charts);
    state.viewCleanup = function () {
      if (state.timeline) state.timeline.destroy();
      state.timeline = null;
    };

    function load(f, t, live) {
      return TG.api('GET', 'timeline?from=' + Math.floor(f) + '&to=' + Math.floor(t) + TG.accountArg()).then(function (res) {
        if (!res.ok) {
          toast(errText(res), true);
          return;
        }
        if (!state.timeline) return;
        state.livePaused = !live;
        state.timeline.set(res.data);
        if (live && res.data.t.length) state.liveSince = Math.max(state.liveSince, res.data.t[res.data.t.length - 1]);
        mode.textContent = live ? TG.t('tl.live') : TG.fmtTime(f) + ' – ' + TG.fmtTime(t);
        mode.setAttribute('data-live', live ? '1' : '0');
      });
    }
    function goLive() {
      /* The last hour from the store, then the poll appends. */
      state.liveSince = 0;
      load(Date.now() - 3600000, Date.now() + 1000, true);
    }
    function showWindow(f, t) {
      load(f, t, t >= Date.now() - 2000 && t - f <= 3600000 + 1000);
    }
    goLive();
  }

  /* -- operations -- */

  function renderOps(params) {
    var v = setView('ops');
    var states = TG.vocabularies.states;
    var st = params.state && states.indexOf(params.state) >= 0 ? params.state : states[0];
    var input = el('input', { type: 'search', id: 'op-search', placeholder: TG.t('ops.search'), spellcheck: 'false' });
    v.appendChild(el('h2', { text: TG.t('ops.title') }));
    v.appendChild(
      el('form', {
        class: 'toolbar',
        id: 'op-search-form',
        onsubmit: function (ev) {
          ev.preventDefault();
          var id = input.value.trim();
          if (id) window.location.hash = '#/op/' + encodeURIComponent(id);
        }
      }, [input, el('button', { type: 'submit' }, TG.t('ops.find'))])
    );
    v.appendChild(
      el('div', { class: 'tabs', id: 'state-tabs' }, states.map(function (s) {
        return el('a', { href: '#/ops?state=' + s, class: s === st ? 'on' : '', 'data-state': s }, TG.stateName(s));
      }))
    );
    var body = el('tbody', { id: 'ops-rows' });
    var more = el('button', { type: 'button', id: 'ops-more', hidden: true }, TG.t('ops.more'));
    v.appendChild(el('table', { class: 'grid' }, [
      el('thead', {}, el('tr', {}, ['col.operation', 'col.state', 'col.amount', 'col.age', 'col.attempts', 'col.queries', 'col.last'].map(function (h) {
        return el('th', { text: TG.t(h) });
      }))),
      body
    ]));
    v.appendChild(more);
    var after = 0;
    function page() {
      TG.api('GET', 'ops?state=' + st + '&after=' + after).then(function (res) {
        if (!res.ok) return toast(errText(res), true);
        res.data.items.forEach(function (o) {
          body.appendChild(el('tr', { 'data-op': o.operation_id }, [
            el('td', {}, opLink(o.operation_id)),
            el('td', { text: TG.stateName(o.state) }),
            el('td', { class: 'num', title: o.amount + ' ' + o.currency }, TG.fmtAmount(o.amount, o.currency)),
            el('td', { text: TG.fmtAge(o.age_s) }),
            el('td', { class: 'num', text: o.attempts_made + ' / ' + o.attempt_limit }),
            el('td', { class: 'num', text: o.queries_made + ' / ' + o.query_limit }),
            el('td', { class: 'num', text: o.last_http_status === null ? TG.t('none') : o.last_http_status })
          ]));
        });
        if (!body.children.length) body.appendChild(el('tr', {}, el('td', { colspan: '7', class: 'muted', text: TG.t('ops.none') })));
        after = res.data.next_after || 0;
        more.hidden = !res.data.next_after;
      });
    }
    more.addEventListener('click', page);
    page();
  }

  /* -- the actions, shared by the desk and an operation's page -- */

  function actions(op, done) {
    if (!state.session || state.session.role !== 'operator') return null;
    var box = el('div', { class: 'actions', 'data-op': op.operation_id });
    function reset() {
      box.textContent = '';
      box.appendChild(el('button', { type: 'button', class: 'resend', 'data-op': op.operation_id, onclick: askResend }, TG.t('manual.resend')));
      box.appendChild(el('button', { type: 'button', class: 'resolve', 'data-op': op.operation_id, onclick: askResolve }, TG.t('manual.resolve')));
      // four-eyes (manual.approval_above): carry out another operator's request
      box.appendChild(el('button', { type: 'button', class: 'approve', 'data-op': op.operation_id, onclick: function () { send('approve', {}); } }, TG.t('manual.approve')));
    }
    function askResend() {
      box.textContent = '';
      var note = el('input', { type: 'text', class: 'note', maxlength: '200', placeholder: TG.t('manual.note_optional') });
      box.appendChild(note);
      box.appendChild(el('button', {
        type: 'button',
        class: 'confirm-resend primary',
        onclick: function () {
          send('resend', { note: note.value.trim() || undefined });
        }
      }, TG.t('manual.confirm_resend')));
      box.appendChild(el('button', { type: 'button', class: 'cancel', onclick: reset }, TG.t('manual.cancel')));
    }
    function askResolve() {
      box.textContent = '';
      var outcome = el('select', { class: 'outcome' }, [
        el('option', { value: 'succeeded' }, TG.t('manual.succeeded')),
        el('option', { value: 'failed' }, TG.t('manual.failed'))
      ]);
      var note = el('input', { type: 'text', class: 'note', maxlength: '200', required: true, placeholder: TG.t('manual.note') });
      box.appendChild(outcome);
      box.appendChild(note);
      box.appendChild(el('button', {
        type: 'button',
        class: 'confirm-resolve primary',
        onclick: function () {
          if (!note.value.trim()) return toast(TG.t('manual.needs_note'), true);
          send('resolve', { outcome: outcome.value, note: note.value.trim() });
        }
      }, TG.t('manual.confirm_resolve')));
      box.appendChild(el('button', { type: 'button', class: 'cancel', onclick: reset }, TG.t('manual.cancel')));
    }
    function send(what, body) {
      var buttons = box.querySelectorAll('button');
      for (var i = 0; i < buttons.length; i++) buttons[i].disabled = true;
      TG.api('POST', 'ops/' + encodeURIComponent(op.operation_id) + '/' + what, body).then(function (res) {
        if (!res.ok) {
          toast(errText(res), true);
          reset();
          return;
        }
        var approval = res.data.approval;
        if (approval && approval.status === 'requested') {
          toast(TG.t('manual.requested', { id: op.operation_id }));
        } else if (approval) {
          toast(TG.t('manual.approved', { id: op.operation_id, who: approval.requested_by, state: TG.stateName(res.data.state) }));
        } else {
          toast(TG.t(what === 'resend' ? 'manual.resent' : 'manual.resolved', { id: op.operation_id, state: TG.stateName(res.data.state) }));
        }
        if (done) done(res.data);
      });
    }
    reset();
    return box;
  }

  /* -- one operation -- */

  function field(label, value) {
    return [el('dt', { text: TG.t(label) }), el('dd', {}, value)];
  }

  function renderOp(id) {
    var v = setView('op');
    TG.api('GET', 'ops/' + encodeURIComponent(id)).then(function (res) {
      if (state.view !== 'op') return;
      v.textContent = '';
      if (res.status === 404) {
        v.appendChild(el('p', { class: 'error', text: TG.t('op.notfound', { id: id }) }));
        return;
      }
      if (!res.ok) return toast(errText(res), true);
      var o = res.data;
      v.appendChild(el('h2', { class: 'mono', text: TG.t('op.title', { id: o.operation_id }) }));
      v.appendChild(el('dl', { class: 'facts', id: 'op-facts' }, [
        field('col.state', el('span', { class: 'state ' + o.state, id: 'op-state', 'data-state': o.state }, TG.stateName(o.state))),
        o.reason ? field('col.reason', TG.reasonName(o.reason)) : null,
        field('col.amount', TG.fmtAmount(o.amount, o.currency)),
        field('op.payment', el('span', { class: 'mono' }, o.payment_id)),
        field('op.accepted', TG.fmtTime(o.accepted_at) + ' (' + TG.fmtAge(o.age_s) + ')'),
        field('op.deadline', TG.fmtTime(o.deadline_at)),
        field('col.attempts', o.attempts_made + ' / ' + o.attempt_limit),
        field('col.queries', o.queries_made + ' / ' + o.query_limit),
        o.pending_since ? field('op.pending', el('span', { id: 'op-pending' }, TG.t('op.pending_text', { since: TG.fmtTime(o.pending_since), polls: o.pending_polls_made }))) : null,
        field('op.refund', o.refund_id || TG.t('none'))
      ]));
      if (o.state === 'manual') {
        var a = actions(o, function () {
          renderOp(id);
        });
        if (a) v.appendChild(a);
      }
      v.appendChild(el('h3', { text: TG.t('op.calls') }));
      v.appendChild(o.attempts.length ? table(['col.kind', 'col.attempt', 'col.start', 'col.latency', 'col.class', 'col.http', 'col.provider'], o.attempts.map(function (c) {
        return el('tr', { 'data-call': c.id }, [
          el('td', { text: TG.kindName(c.kind) }),
          el('td', { class: 'num', text: c.attempt }),
          el('td', { class: 'mono', text: TG.fmtTime(c.start_wall, true) }),
          el('td', { class: 'num', text: c.latency_ms === null ? TG.t('none') : c.latency_ms + ' ms' }),
          el('td', { text: TG.className(c['class']) }),
          el('td', { class: 'num', text: c.http_status === null ? TG.t('none') : c.http_status }),
          el('td', { text: c.error || TG.t('none') })
        ]);
      }), { class: 'grid', id: 'op-calls' }) : el('p', { class: 'muted', text: TG.t('op.nocalls') }));
      v.appendChild(el('h3', { text: TG.t('op.events') }));
      var events = o.events || [];
      v.appendChild(events.length ? table(EVENT_HEAD.concat(['col.actions']), events.map(function (e) {
        return el('tr', { 'data-event': e.id }, eventCells(e).concat([
          el('td', {}, e.delivery === 'due' && !e.attempts ? null : redeliverButton(e, function () {
            renderOp(id);
          }))
        ]));
      }), { class: 'grid', id: 'op-events' }) : el('p', { class: 'muted', id: 'op-noevents', text: TG.t('op.noevents') }));
      v.appendChild(el('h3', { text: TG.t('op.audit') }));
      v.appendChild(o.audit.length ? table(['col.at', 'col.action', 'col.operator', 'col.note', 'col.detail'], o.audit.map(function (a) {
        return el('tr', { 'data-audit': a.id }, [
          el('td', { class: 'mono', text: TG.fmtTime(a.at) }),
          el('td', { text: a.action }),
          el('td', { class: 'operator', text: a.operator }),
          el('td', { text: a.reason }),
          el('td', { text: a.detail })
        ]);
      }), { class: 'grid', id: 'op-audit' }) : el('p', { class: 'muted', text: TG.t('op.noaudit') }));
    });
  }

  /* -- the manual-review desk -- */

  function renderManual(params) {
    var v = setView('manual');
    var reasons = TG.vocabularies.reasons;
    var reason = params.reason && reasons.indexOf(params.reason) >= 0 ? params.reason : '';
    v.appendChild(el('h2', { text: TG.t('manual.title') }));
    var sel = el('select', {
      id: 'manual-reason',
      onchange: function () {
        window.location.hash = '#/manual' + (sel.value ? '?reason=' + sel.value : '');
      }
    }, [el('option', { value: '' }, TG.t('manual.all'))].concat(reasons.map(function (r) {
      return el('option', { value: r, selected: r === reason }, TG.reasonName(r));
    })));
    v.appendChild(el('div', { class: 'toolbar' }, [el('label', {}, [TG.t('manual.filter') + ' ', sel])]));
    if (state.session.role !== 'operator') v.appendChild(el('p', { class: 'note-box', id: 'viewer-note', text: TG.t('manual.viewer') }));
    var body = el('tbody', { id: 'manual-rows' });
    var more = el('button', { type: 'button', id: 'manual-more', hidden: true }, TG.t('ops.more'));
    v.appendChild(el('table', { class: 'grid', id: 'manual-table' }, [
      el('thead', {}, el('tr', {}, ['col.operation', 'col.reason', 'col.age', 'col.amount', 'col.attempts', 'col.last', 'col.actions'].map(function (h) {
        return el('th', { text: TG.t(h) });
      }))),
      body
    ]));
    v.appendChild(more);
    var after = 0;
    function page() {
      TG.api('GET', 'manual?after=' + after + (reason ? '&reason=' + reason : '') + TG.accountArg()).then(function (res) {
        if (!res.ok) return toast(errText(res), true);
        res.data.items.forEach(function (o) {
          var row = el('tr', { 'data-op': o.operation_id }, [
            el('td', {}, opLink(o.operation_id)),
            el('td', { text: TG.reasonName(o.reason) }),
            el('td', { text: TG.fmtAge(o.age_s) }),
            el('td', { class: 'num', title: o.amount + ' ' + o.currency }, TG.fmtAmount(o.amount, o.currency)),
            el('td', { class: 'num', text: o.attempts_made + ' / ' + o.attempt_limit }),
            el('td', { class: 'num', text: o.last_http_status === null ? TG.t('none') : o.last_http_status }),
            el('td', {}, actions(o, function (after) {
              row.className = 'done';
              row.lastChild.textContent = TG.stateName(after.state);
            }))
          ]);
          body.appendChild(row);
        });
        if (!body.children.length) body.appendChild(el('tr', {}, el('td', { colspan: '7', class: 'muted', text: TG.t('manual.empty') })));
        after = res.data.next_after || 0;
        more.hidden = !res.data.next_after;
      });
    }
    more.addEventListener('click', page);
    page();
  }

  /* -- the exit's status -- */

  function renderStatus() {
    var v = setView('status');
    v.appendChild(el('h2', { text: TG.t('status.title') + (TG.account ? ' — ' + TG.account : '') }));
    v.appendChild(el('div', { id: 'status-body' }));
    /* the account's controls: the facts come with every status, the form once */
    v.appendChild(el('h3', { text: TG.t('acct.title') }));
    v.appendChild(el('div', { id: 'controls-body' }));
    v.appendChild(TG.controlsForm(state.session, TG.api, toast, errText, function () {
      state.liveSince = 0; /* the next poll reads the status again */
    }));
    renderStatusBody();
  }

  function renderStatusBody() {
    var box = document.getElementById('status-body');
    var s = state.live;
    if (!box || !s) return;
    box.textContent = '';
    var hold;
    if (!s.held) hold = TG.t('status.hold_none');
    else if (s.hold_until && s.hold_until > s.now) hold = TG.t('status.hold_until', { until: TG.fmtTime(s.hold_until, true) });
    else hold = TG.t('status.hold_probe');
    var adm = s.admission;
    var admText = !adm.enabled ? TG.t('status.admit_off') : adm.would_admit ? TG.t('status.admit_yes') : TG.t('status.admit_no', { why: adm.why });
    var youngest = null;
    (s.shares || []).forEach(function (sh) {
      if (youngest === null || sh.age_ms < youngest) youngest = sh.age_ms;
    });
    box.appendChild(el('dl', { class: 'facts', id: 'status-facts' }, [
      field('status.owner', el('span', { id: 'status-owner', 'data-alive': s.owner_alive ? '1' : '0' }, s.owner_alive ? TG.t('status.alive', { age: TG.fmtAge((youngest || 0) / 1000) }) : TG.t('status.down'))),
      field('status.epoch', String(s.owner_epoch || TG.t('none'))),
      field('status.role', s.role),
      field('status.split', s.split ? TG.t('status.split_text', { shares: s.split.shares, rate: s.split.starts_per_second, cap: s.split.max_in_flight }) : TG.t('none')),
      field('status.hold', el('span', { id: 'status-hold', 'data-held': s.held ? '1' : '0' }, hold)),
      field('status.admission', el('span', { id: 'status-admission' }, [admText, el('br'), TG.t('status.projected', { wait: adm.projected_wait_s, max: adm.max_wait_s, backlog: adm.backlog, maxb: adm.max_backlog }), el('br'), TG.t('status.refused', { n: adm.refused_last_minute })])),
      field('status.oldest', s.oldest_pending_age_s === null ? TG.t('none') : TG.fmtAge(s.oldest_pending_age_s)),
      field('status.provider_pending', el('span', { id: 'status-provider-pending' }, TG.t('status.provider_pending_text', { n: s.provider_pending || 0 }))),
      field('status.store', s.store)
    ]));
    box.appendChild(el('p', { class: 'muted', text: TG.t('status.standbys', { role: s.role }) }));
    var cb = document.getElementById('controls-body');
    if (cb) {
      cb.textContent = '';
      var facts = TG.controlsFacts(s);
      if (facts) cb.appendChild(facts);
    }
    box.appendChild(el('h3', { text: TG.t('status.shares') }));
    box.appendChild(table(['status.share', 'status.epoch', 'col.state', 's.in_flight', 'status.hold'], (s.shares || []).map(function (sh) {
      return el('tr', { 'data-share': sh.share }, [
        el('td', { class: 'num', text: sh.share }),
        el('td', { class: 'num', text: sh.epoch }),
        el('td', { text: TG.t(sh.alive ? 'status.share_alive' : 'status.share_stale') + ' (' + TG.fmtAge(sh.age_ms / 1000) + ')' }),
        el('td', { class: 'num', text: sh.in_flight }),
        el('td', { text: sh.held ? TG.t('yes') : TG.t('no') })
      ]);
    }), { class: 'grid', id: 'status-shares' }));
    box.appendChild(el('h3', { text: TG.t('status.backlog') }));
    box.appendChild(el('dl', { class: 'facts', id: 'status-backlog' }, Object.keys(s.backlog || {}).map(function (k) {
      return [el('dt', { text: TG.stateName(k), 'data-state': k }), el('dd', {}, String(s.backlog[k]))];
    })));
    box.appendChild(el('h3', { text: TG.t('status.limits') }));
    box.appendChild(el('dl', { class: 'facts', id: 'status-limits' }, Object.keys(s.limits || {}).map(function (k) {
      return field('lim.' + k, String(s.limits[k]));
    })));
  }

  /* -- events and their deliveries -- */

  function deliveryCell(e) {
    return el('span', { class: 'delivery ' + e.delivery, 'data-delivery': e.delivery }, TG.t('delivery.' + e.delivery));
  }

  /* An operator's re-deliver button for event e; done(event) after it. */
  function redeliverButton(e, done) {
    if (!state.session || state.session.role !== 'operator') return null;
    var b = el('button', {
      type: 'button',
      class: 'redeliver',
      'data-event': e.id,
      onclick: function () {
        b.disabled = true;
        TG.api('POST', 'events/' + e.id + '/redeliver', {}).then(function (res) {
          if (!res.ok) {
            b.disabled = false;
            return toast(errText(res), true);
          }
          toast(TG.t('dl.redelivered', { id: e.id }));
          if (done) done(res.data);
        });
      }
    }, TG.t('dl.redeliver'));
    return b;
  }

  function eventCells(e) {
    return [
      el('td', { class: 'num mono', text: e.id }),
      el('td', { text: TG.stateName(e.state) }),
      el('td', {}, deliveryCell(e)),
      el('td', { class: 'num attempts', text: e.attempts }),
      el('td', { class: 'last-error', text: e.last_error || TG.t('none') }),
      el('td', { class: 'mono', text: e.delivered_at ? TG.fmtTime(e.delivered_at) : TG.t('none') })
    ];
  }

  var EVENT_HEAD = ['col.event', 'col.state', 'col.delivery', 'col.tries', 'col.last_error', 'col.delivered_at'];

  function renderDeliveries() {
    var v = setView('deliveries');
    v.appendChild(el('h2', { text: TG.t('dl.title') }));
    v.appendChild(el('p', { class: 'muted', text: TG.t('dl.hint') }));
    if (state.session.role !== 'operator') v.appendChild(el('p', { class: 'note-box', id: 'viewer-note', text: TG.t('dl.viewer') }));
    var body = el('tbody', { id: 'deliveries-rows' });
    var more = el('button', { type: 'button', id: 'deliveries-more', hidden: true }, TG.t('ops.more'));
    v.appendChild(el('table', { class: 'grid', id: 'deliveries-table' }, [
      el('thead', {}, el('tr', {}, ['col.operation'].concat(EVENT_HEAD, ['col.actions']).map(function (h) {
        return el('th', { text: TG.t(h) });
      }))),
      body
    ]));
    v.appendChild(more);
    var after = 0;
    function page() {
      TG.api('GET', 'deliveries?after=' + after).then(function (res) {
        if (!res.ok) return toast(errText(res), true);
        res.data.items.forEach(function (e) {
          var row = el('tr', { 'data-event': e.id }, [el('td', {}, opLink(e.operation_id))].concat(eventCells(e), [
            el('td', {}, redeliverButton(e, function (now) {
              row.className = 'done';
              row.querySelector('.delivery').replaceWith(deliveryCell(now));
              row.querySelector('.attempts').textContent = now.attempts;
            }))
          ]));
          body.appendChild(row);
        });
        if (!body.children.length) body.appendChild(el('tr', {}, el('td', { colspan: '8', class: 'muted', text: TG.t('dl.empty') })));
        after = res.data.next_after || 0;
        more.hidden = !res.data.next_after;
      });
    }
    more.addEventListener('click', page);
    page();
  }

  /* ---- routing ---------------------------------------------------------------- */

  function route() {
    var h = window.location.hash || '#/timeline';
    var q = h.indexOf('?');
    var path = q >= 0 ? h.slice(0, q) : h;
    var params = {};
    if (q >= 0) {
      h.slice(q + 1).split('&').forEach(function (kv) {
        var p = kv.split('=');
        params[decodeURIComponent(p[0])] = decodeURIComponent(p[1] || '');
      });
    }
    state.livePaused = false;
    if (path.indexOf('#/op/') === 0) return renderOp(decodeURIComponent(path.slice(5)));
    if (path === '#/ops') return renderOps(params);
    if (path === '#/manual') return renderManual(params);
    if (path === '#/deliveries') return renderDeliveries();
    if (path === '#/status') return renderStatus();
    return renderTimeline();
  }

  function start() {
    TG.applyI18n(document);
    TG.renderLangSwitch();
    TG.langListeners.push(function () {
      who();
      pill();
      route();
    });
    document.getElementById('signout').addEventListener('click', function () {
      TG.api('POST', 'logout', {}).then(signedOut, signedOut);
    });
    TG.api('GET', 'session').then(function (res) {
      if (!res.ok) return signedOut();
      state.session = res.data;
      TG.setVocabularies(res.data.vocabularies);
      document.body.setAttribute('data-role', res.data.role);
      TG.renderAccountSwitch(res.data.accounts, function () {
        state.live = null;
        state.liveSince = 0;
        route(); /* the next poll (within a second) reads the new account */
      });
      who();
      window.addEventListener('hashchange', route);
      route();
      poll();
    });
  }

  function who() {
    var s = state.session;
    if (!s) return;
    var w = document.getElementById('who');
    w.textContent = TG.t('who', { user: s.user, role: TG.t('role.' + s.role) });
    w.setAttribute('data-user', s.user);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
