/* tollgate console: the sign-in page. The token goes to POST api/login in
 * the body (never in a URL), is exchanged for an HttpOnly session cookie,
 * and is cleared from the form; then the page reloads into the app. */
(function () {
  'use strict';
  var TG = window.TG;

  function show(msg) {
    var p = document.getElementById('signin-error');
    p.textContent = msg;
    p.hidden = false;
  }

  function start() {
    TG.applyI18n(document);
    TG.renderLangSwitch();
    var form = document.getElementById('signin-form');
    var input = document.getElementById('token');
    input.focus();
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var token = input.value.trim();
      input.value = '';
      if (!token) return;
      fetch('/ui/api/login', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token: token })
      })
        .then(function (r) {
          if (r.ok) {
            window.location.replace('/ui#/timeline');
            window.location.reload();
            return;
          }
          if (r.status === 401) show(TG.t('login.bad'));
          else if (r.status === 429) show(TG.t('login.throttled'));
          else if (r.status === 403) show(TG.t('login.none'));
          else show(TG.t('login.failed', { status: r.status }));
        })
        .catch(function (e) {
          show(TG.t('login.failed', { status: String(e) }));
        });
    });
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
