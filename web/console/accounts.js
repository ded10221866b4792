/* tollgate console: the provider accounts (issue 26 §5, §6). With more than
 * one account configured, a switcher in the header chooses the account
 * whose exit the timeline, the exit status and the manual desk show (the
 * choice is kept for the browser tab). The status view shows the account's
 * run-time controls — its configured rate and cap, what an operator set,
 * what is in force — and a session signed in with an admin credential may
 * pause, resume, slow down or lower the cap from there: the same change as
 * POST /v1/accounts/{account}, audited as the signed-in user, taken by the
 * account's dispatchers within a second. */
(function () {
  'use strict';
  var TG = window.TG;
  var el = TG.el;
  var KEY = 'tollgate.account';

  TG.account = null; /* the chosen account; null with one account */

  /* "&account=NAME" for the reads that take it; "" with one account. */
  TG.accountArg = function () {
    return TG.account ? '&account=' + encodeURIComponent(TG.account) : '';
  };

  /* The header's switcher over the session's account names; onChange()
   * after another account is chosen. Hidden with one account. */
  TG.renderAccountSwitch = function (names, onChange) {
    var box = document.getElementById('account-switch');
    if (!box) return;
    box.textContent = '';
    if (!names || names.length < 2) {
      TG.account = null;
      box.hidden = true;
      return;
    }
    var kept = null;
    try {
      kept = window.sessionStorage.getItem(KEY);
    } catch (e) {
      kept = null;
    }
    if (names.indexOf(TG.account) < 0) TG.account = names.indexOf(kept) >= 0 ? kept : names[0];
    var sel = el('select', {
      id: 'account-select',
      onchange: function () {
        TG.account = sel.value;
        try {
          window.sessionStorage.setItem(KEY, sel.value);
        } catch (e) {
          /* private mode: the choice lasts for the page */
        }
        onChange();
      }
    }, names.map(function (n) {
      return el('option', { value: n, selected: n === TG.account }, n);
    }));
    box.appendChild(el('label', {}, [TG.t('acct.label') + ' ', sel]));
    box.hidden = false;
  };

  function num(v) {
    return v === null || v === undefined ? TG.t('acct.unset') : String(v);
  }

  /* The controls of status s (its "controls": configured, controls,
   * in_force) as facts, refreshed with every status. */
  TG.controlsFacts = function (s) {
    var c = s.controls;
    if (!c) return null;
    var set = c.controls;
    var by = set.changed_by ? TG.t('acct.changed', { by: set.changed_by, at: TG.fmtTime(set.changed_at, true) }) : TG.t('none');
    function fact(k, v, id) {
      return [el('dt', { text: TG.t(k) }), el('dd', id ? { id: id } : {}, v)];
    }
    return el('dl', { class: 'facts', id: 'account-controls', 'data-account': c.account, 'data-paused': c.in_force.paused ? '1' : '0' }, [
      fact('acct.paused', c.in_force.paused ? TG.t('acct.paused_yes') : TG.t('acct.paused_no'), 'acct-paused'),
      fact('acct.rate', TG.t('acct.of', { now: c.in_force.starts_per_second, cfg: c.configured.starts_per_second, set: num(set.starts_per_second) }), 'acct-rate'),
      fact('acct.cap', TG.t('acct.of', { now: c.in_force.max_in_flight, cfg: c.configured.max_in_flight, set: num(set.max_in_flight) }), 'acct-cap'),
      fact('acct.by', by)
    ]);
  };

  /* An admin's form for the account chosen now: pause or resume, a rate
   * and a cap (empty: the configured value again), a reason (required).
   * done() after a change the daemon took; toast(text, bad) tells. */
  TG.controlsForm = function (session, api, toast, errText, done) {
    if (!session || !session.admin) return el('p', { class: 'muted', id: 'acct-not-admin', text: TG.t('acct.not_admin') });
    var rate = el('input', { type: 'number', id: 'acct-rate-in', min: '0', step: 'any', placeholder: TG.t('acct.rate_ph') });
    var cap = el('input', { type: 'number', id: 'acct-cap-in', min: '1', step: '1', placeholder: TG.t('acct.cap_ph') });
    var reason = el('input', { type: 'text', id: 'acct-reason', maxlength: '200', placeholder: TG.t('acct.reason_ph') });
    function send(body) {
      var name = TG.account || (TG.state.live && TG.state.live.account);
      if (!reason.value.trim()) {
        toast(TG.t('acct.need_reason'), true);
        return;
      }
      body.reason = reason.value.trim();
      api('POST', 'accounts/' + encodeURIComponent(name), body).then(function (res) {
        if (!res.ok) return toast(errText(res), true);
        toast(TG.t('acct.done', { account: name }));
        reason.value = '';
        done(res.data);
      });
    }
    return el('div', { class: 'toolbar', id: 'acct-form' }, [
      el('button', { type: 'button', id: 'acct-pause', onclick: function () { send({ paused: true }); } }, TG.t('acct.pause')),
      el('button', { type: 'button', id: 'acct-resume', onclick: function () { send({ paused: false }); } }, TG.t('acct.resume')),
      el('label', {}, [TG.t('acct.rate') + ' ', rate]),
      el('label', {}, [TG.t('acct.cap') + ' ', cap]),
      el('label', {}, [TG.t('col.note') + ' ', reason]),
      el('button', {
        type: 'button',
        id: 'acct-apply',
        onclick: function () {
          send({
            starts_per_second: rate.value === '' ? null : Number(rate.value),
            max_in_flight: cap.value === '' ? null : Number(cap.value)
          });
        }
      }, TG.t('acct.apply'))
    ]);
  };
})();
