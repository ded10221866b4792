/* tollgate console: words in English and Traditional Chinese, and the
 * formats of amounts, times and ages. No framework: window.TG holds it all.
 * The language is the browser's (navigator.languages) until the person picks
 * one with the switch; the choice is kept in localStorage ("tg-lang", only a
 * language code: nothing secret is ever stored in the browser). */
(function () {
  'use strict';
  var TG = (window.TG = window.TG || {});

  var dict = {
    en: {
      'app.title': 'tollgate console',
      'login.token': 'Token',
      'login.submit': 'Sign in',
      'login.hint': 'Sign in with your console token (from ui.users_file) or the API token. The token is exchanged for a session cookie and is not kept in this browser.',
      'login.bad': 'This token does not sign anyone in.',
      'login.throttled': 'Too many failed sign-ins: wait a minute.',
      'login.none': 'No one can sign in: set api.token_file or ui.users_file.',
      'login.failed': 'Sign-in failed ({status}).',
      'nav.timeline': 'Timeline',
      'nav.ops': 'Operations',
      'nav.manual': 'Manual review',
      'nav.deliveries': 'Deliveries',
      'nav.status': 'Exit status',
      'nav.signout': 'Sign out',
      'who': '{user} ({role})',
      'role.operator': 'operator',
      'role.viewer': 'viewer',
      'pill.alive': 'exit running',
      'pill.held': 'provider hold',
      'pill.down': 'no dispatcher',
      'tl.title': 'The exit on one timeline',
      'tl.live': 'Live: the last hour',
      'tl.window': 'Window',
      'tl.from': 'From',
      'tl.to': 'To',
      'tl.show': 'Show',
      'tl.last': 'Last {n}',
      'tl.hint': 'Drag across a chart to zoom in, double-click to zoom out. Bands: provider holds (429/503 or a run of timeouts), owner changes, admission refusals.',
      'tl.rate': 'Starts/s and closes/s',
      'tl.flight': 'In flight, against its cap',
      'tl.oldest': 'Oldest pending operation (age, s)',
      'tl.backlog': 'Backlog by state',
      's.starts': 'starts/s',
      's.closes': 'closes/s',
      's.rate': 'configured rate',
      's.in_flight': 'in flight',
      's.cap': 'cap',
      's.oldest': 'oldest pending age',
      'band.hold': 'provider hold',
      'band.owner': 'owner change',
      'band.refused': 'admission refused',
      'tl.empty': 'No samples in this window: no dispatcher wrote any (or they are older than stats.keep_hours).',
      'tl.points': '{n} points, {step} s each',
      'ops.title': 'Operations',
      'ops.search': 'Find an operation by its id',
      'ops.find': 'Find',
      'ops.more': 'More',
      'ops.none': 'None in this state.',
      'col.operation': 'Operation',
      'col.state': 'State',
      'col.reason': 'Reason',
      'col.amount': 'Amount',
      'col.age': 'Age',
      'col.attempts': 'POSTs',
      'col.queries': 'Queries',
      'col.last': 'Last HTTP',
      'col.actions': 'Actions',
      'col.kind': 'Kind',
      'col.attempt': 'Attempt',
      'col.start': 'Wire start',
      'col.latency': 'Latency',
      'col.class': 'Class',
      'col.http': 'HTTP',
      'col.provider': 'Provider reason',
      'col.at': 'At',
      'col.action': 'Action',
      'col.operator': 'Operator',
      'col.note': 'Reason / note',
      'col.detail': 'Detail',
      'op.title': 'Operation {id}',
      'op.calls': 'Calls',
      'op.audit': 'Audit trail',
      'op.nocalls': 'No call yet.',
      'op.noaudit': 'No audit row.',
      'op.events': 'Events told to the caller',
      'op.noevents': 'No event yet: nothing to tell the caller (accepted, in flight or waiting).',
      'col.event': 'Event',
      'col.delivery': 'Delivery',
      'col.tries': 'Attempts',
      'col.last_error': 'Last error',
      'col.delivered_at': 'Delivered',
      'delivery.due': 'due',
      'delivery.delivered': 'delivered',
      'delivery.parked': 'parked',
      'dl.title': 'Failed deliveries',
      'dl.hint': 'Events the caller\'s endpoint has not acknowledged: parked (the retry budget ran out) or due again after a failed attempt. Re-deliver sends one again now, its attempts from zero.',
      'dl.empty': 'Every event was delivered or is waiting for its first attempt.',
      'dl.redeliver': 'Re-deliver',
      'dl.redelivered': 'Event {id} is due again.',
      'dl.viewer': 'You are signed in as a viewer: you can read the list, not re-deliver.',
      'op.payment': 'Payment',
      'op.accepted': 'Accepted',
      'op.deadline': 'Deadline',
      'op.pending': 'Pending at the provider',
      'op.pending_text': 'since {since}, {polls} poll(s)',
      'op.refund': 'Provider refund id',
      'op.notfound': 'No operation {id}.',
      'manual.title': 'Manual review',
      'manual.filter': 'Reason',
      'manual.all': 'any reason',
      'manual.empty': 'Nothing is waiting for review.',
      'manual.resend': 'Resend',
      'manual.resolve': 'Resolve',
      'manual.approve': 'Approve request',
      'manual.requested': '{id}: at or above the approval amount, it waits for another operator to approve.',
      'manual.approved': '{id}: the request of {who} is approved: it is {state} now.',
      'manual.confirm_resend': 'Confirm resend',
      'manual.confirm_resolve': 'Confirm resolve',
      'manual.cancel': 'Cancel',
      'manual.note': 'Note',
      'manual.note_optional': 'Note (optional)',
      'manual.outcome': 'Outcome',
      'manual.succeeded': 'succeeded (the provider refunded it)',
      'manual.failed': 'failed (the provider did not refund it)',
      'manual.viewer': 'You are signed in as a viewer: you can read the queue, not act on it.',
      'manual.resent': '{id} resent with the same key: it is {state} now.',
      'manual.resolved': '{id} resolved: {state}.',
      'manual.needs_note': 'Resolving by hand needs a note saying why.',
      'status.title': 'Exit status',
      'status.owner': 'Owner',
      'status.alive': 'a dispatcher owns the exit and wrote a sample {age} ago',
      'status.down': 'no dispatcher wrote a sample in the last 3 s',
      'status.role': 'This process',
      'status.epoch': 'Owner epoch',
      'status.shares': 'Shares',
      'status.share': 'Share',
      'status.share_alive': 'alive',
      'status.share_stale': 'silent',
      'status.split': 'Split in force',
      'status.split_text': '{shares} share(s) of {rate} starts/s and {cap} in flight',
      'status.standbys': 'A standby in another process writes nothing to the store until it owns a share, so the console knows only its own process: {role}.',
      'status.limits': 'Configured limits',
      'status.hold': 'Provider hold',
      'status.hold_none': 'none',
      'status.hold_until': 'held until {until}, then one probe',
      'status.hold_probe': 'held (probe phase)',
      'status.admission': 'Admission',
      'status.admit_yes': 'admitting new refunds',
      'status.admit_no': 'refusing new refunds ({why})',
      'status.admit_off': 'admission control is off',
      'status.projected': 'projected wait {wait} s of at most {max} s; open backlog {backlog} of at most {maxb}',
      'status.refused': 'refused in the last minute: {n}',
      'status.backlog': 'Backlog now',
      'status.oldest': 'Oldest pending',
      'status.provider_pending': 'Pending at the provider',
      'status.provider_pending_text': '{n} refund(s) accepted, not final: polled on a slow schedule, not counted by admission',
      'status.store': 'Store',
      'lim.starts_per_second': 'starts per second',
      'lim.max_in_flight': 'calls in flight at most',
      'lim.query_starts_per_second': 'query sub-quota (starts/s)',
      'lim.shares': 'shares',
      'lim.timeout_ms': 'call timeout (ms)',
      'lim.connect_timeout_ms': 'connect timeout (ms)',
      'lim.max_attempts': 'POSTs per operation',
      'lim.deadline_s': 'deadline (s)',
      'lim.max_queries': 'queries per operation',
      'lim.keep_hours': 'samples kept (hours)',
      'acct.label': 'Account',
      'acct.title': 'Run-time controls',
      'acct.paused': 'Sending',
      'acct.paused_yes': 'paused: nothing of this account is sent',
      'acct.paused_no': 'running',
      'acct.rate': 'Starts per second',
      'acct.cap': 'In flight at most',
      'acct.of': '{now} in force (configured {cfg}; set by an operator: {set})',
      'acct.unset': 'not set',
      'acct.by': 'Last change',
      'acct.changed': 'by {by} at {at}',
      'acct.not_admin': 'Changing an account\'s controls takes a sign-in with an admin credential.',
      'acct.rate_ph': 'empty: configured',
      'acct.cap_ph': 'empty: configured',
      'acct.reason_ph': 'why (required, audited)',
      'acct.need_reason': 'Give a reason: every change is audited.',
      'acct.pause': 'Pause',
      'acct.resume': 'Resume',
      'acct.apply': 'Set rate and cap',
      'acct.done': 'Account {account} changed; its dispatchers take it within a second.',
      'state.pending': 'pending',
      'state.in_flight': 'in flight',
      'state.retry_wait': 'retry wait',
      'state.unknown': 'unknown',
      'state.manual': 'manual',
      'state.succeeded': 'succeeded',
      'state.rejected': 'rejected',
      'state.cancelled': 'cancelled',
      'kind.first': 'first',
      'kind.retry': 'retry',
      'kind.query': 'query',
      'kind.manual': 'operator resend',
      'class.succeeded': 'succeeded',
      'class.rejected': 'rejected',
      'class.key_reused': 'key reused',
      'class.retryable': 'retryable',
      'class.unknown': 'unknown',
      'class.not_sent': 'not sent',
      'class.processing': 'processing',
      'class.not_found': 'not found',
      'class.no_answer': 'no answer',
      'reason.attempts_exhausted': 'attempts exhausted',
      'reason.deadline': 'deadline passed',
      'reason.query_budget': 'query budget spent',
      'reason.key_reused': 'key reused with another payload',
      'reason.key_retention': 'key past retention',
      'reason.key_expired': 'key expired before a replay',
      'reason.notification_deadline': 'no notification from the provider in time',
      'reason.pending_polls': 'still pending at the provider after every poll',
      'reason.pending_deadline': 'still pending at the provider at its deadline',
      'reason.invalid': 'invalid outbox row',
      'err.generic': 'The request failed: {message}',
      'err.signedout': 'Your session ended: sign in again.',
      'yes': 'yes',
      'no': 'no',
      'none': '—'
    },
    'zh-TW': {
      'app.title': 'tollgate 控制台',
      'login.token': '權杖',
      'login.submit': '登入',
      'login.hint': '以您的控制台權杖（ui.users_file）或 API 權杖登入。權杖會換成工作階段 Cookie，不會存放在瀏覽器中。',
      'login.bad': '此權杖無法登入。',
      'login.throttled': '登入失敗次數過多，請等一分鐘。',
      'login.none': '無人可以登入：請設定 api.token_file 或 ui.users_file。',
      'login.failed': '登入失敗（{status}）。',
      'nav.timeline': '時間軸',
      'nav.ops': '作業',
      'nav.manual': '人工審核',
      'nav.deliveries': '通知送達',
      'nav.status': '出口狀態',
      'nav.signout': '登出',
      'who': '{user}（{role}）',
      'role.operator': '操作員',
      'role.viewer': '檢視者',
      'pill.alive': '出口運作中',
      'pill.held': '供應商暫停',
      'pill.down': '沒有派送器',
      'tl.title': '出口的單一時間軸',
      'tl.live': '即時：最近一小時',
      'tl.window': '時段',
      'tl.from': '從',
      'tl.to': '到',
      'tl.show': '顯示',
      'tl.last': '最近 {n}',
      'tl.hint': '在圖上拖曳以放大，雙擊以還原。色帶：供應商暫停（429/503 或連續逾時）、擁有者變更、准入拒絕。',
      'tl.rate': '每秒發出與每秒結案',
      'tl.flight': '進行中的呼叫與上限',
      'tl.oldest': '最舊待處理作業（秒）',
      'tl.backlog': '各狀態的積壓',
      's.starts': '每秒發出',
      's.closes': '每秒結案',
      's.rate': '設定速率',
      's.in_flight': '進行中',
      's.cap': '上限',
      's.oldest': '最舊待處理時間',
      'band.hold': '供應商暫停',
      'band.owner': '擁有者變更',
      'band.refused': '准入拒絕',
      'tl.empty': '此時段沒有樣本：沒有派送器寫入（或已超過 stats.keep_hours）。',
      'tl.points': '{n} 點，每點 {step} 秒',
      'ops.title': '作業',
      'ops.search': '以作業 ID 搜尋',
      'ops.find': '搜尋',
      'ops.more': '更多',
      'ops.none': '此狀態沒有作業。',
      'col.operation': '作業',
      'col.state': '狀態',
      'col.reason': '原因',
      'col.amount': '金額',
      'col.age': '已過時間',
      'col.attempts': 'POST 次數',
      'col.queries': '查詢次數',
      'col.last': '最後 HTTP',
      'col.actions': '動作',
      'col.kind': '種類',
      'col.attempt': '次數',
      'col.start': '送出時間',
      'col.latency': '延遲',
      'col.class': '分類',
      'col.http': 'HTTP',
      'col.provider': '供應商原因',
      'col.at': '時間',
      'col.action': '動作',
      'col.operator': '操作員',
      'col.note': '原因／備註',
      'col.detail': '細節',
      'op.title': '作業 {id}',
      'op.calls': '呼叫紀錄',
      'op.audit': '稽核紀錄',
      'op.nocalls': '尚無呼叫。',
      'op.noaudit': '沒有稽核紀錄。',
      'op.events': '通知呼叫端的事件',
      'op.noevents': '尚無事件：沒有需要通知呼叫端的變化（已受理、進行中或等待中）。',
      'col.event': '事件',
      'col.delivery': '送達',
      'col.tries': '嘗試次數',
      'col.last_error': '最近錯誤',
      'col.delivered_at': '送達時間',
      'delivery.due': '待送',
      'delivery.delivered': '已送達',
      'delivery.parked': '已擱置',
      'dl.title': '送達失敗',
      'dl.hint': '呼叫端尚未確認的事件：已擱置（重試額度用完）或嘗試失敗後等待重送。「重新送達」會立即再送一次，嘗試次數從零開始。',
      'dl.empty': '每個事件都已送達，或正在等待第一次嘗試。',
      'dl.redeliver': '重新送達',
      'dl.redelivered': '事件 {id} 已重新排入送達。',
      'dl.viewer': '您以檢視者身分登入：可以閱讀清單，但不能重新送達。',
      'op.payment': '付款',
      'op.accepted': '受理時間',
      'op.deadline': '期限',
      'op.pending': '供應商處理中',
      'op.pending_text': '自 {since} 起，已輪詢 {polls} 次',
      'op.refund': '供應商退款 ID',
      'op.notfound': '沒有作業 {id}。',
      'manual.title': '人工審核',
      'manual.filter': '原因',
      'manual.all': '所有原因',
      'manual.empty': '沒有待審核的作業。',
      'manual.resend': '重新送出',
      'manual.resolve': '手動結案',
      'manual.approve': '核准請求',
      'manual.requested': '{id}：金額達到核准門檻，等待另一位操作員核准。',
      'manual.approved': '{id}：已核准 {who} 的請求：目前為{state}。',
      'manual.confirm_resend': '確認重新送出',
      'manual.confirm_resolve': '確認結案',
      'manual.cancel': '取消',
      'manual.note': '備註',
      'manual.note_optional': '備註（選填）',
      'manual.outcome': '結果',
      'manual.succeeded': '成功（供應商已退款）',
      'manual.failed': '失敗（供應商未退款）',
      'manual.viewer': '您以檢視者身分登入：可以閱讀佇列，但不能操作。',
      'manual.resent': '{id} 已以同一個金鑰重新送出：目前為{state}。',
      'manual.resolved': '{id} 已結案：{state}。',
      'manual.needs_note': '手動結案需要填寫原因。',
      'status.title': '出口狀態',
      'status.owner': '擁有者',
      'status.alive': '有派送器擁有出口，{age}前寫入樣本',
      'status.down': '最近 3 秒內沒有派送器寫入樣本',
      'status.role': '此程序',
      'status.epoch': '擁有者世代',
      'status.shares': '配額份',
      'status.share': '份',
      'status.share_alive': '運作中',
      'status.share_stale': '無回應',
      'status.split': '目前的分配',
      'status.split_text': '{shares} 份，共每秒 {rate} 次、同時 {cap} 個',
      'status.standbys': '其他程序中的備援在取得配額前不寫入儲存，因此控制台只知道自己的程序：{role}。',
      'status.limits': '設定的限制',
      'status.hold': '供應商暫停',
      'status.hold_none': '無',
      'status.hold_until': '暫停至 {until}，之後送出一個探測',
      'status.hold_probe': '暫停中（探測階段）',
      'status.admission': '准入控制',
      'status.admit_yes': '接受新的退款',
      'status.admit_no': '拒絕新的退款（{why}）',
      'status.admit_off': '准入控制已關閉',
      'status.projected': '預估等待 {wait} 秒，上限 {max} 秒；未結積壓 {backlog}，上限 {maxb}',
      'status.refused': '最近一分鐘拒絕：{n}',
      'status.backlog': '目前積壓',
      'status.oldest': '最舊待處理',
      'status.provider_pending': '供應商處理中',
      'status.provider_pending_text': '{n} 筆退款已受理、尚未完成：以慢速排程輪詢，不計入准入控制',
      'status.store': '儲存',
      'lim.starts_per_second': '每秒發出次數',
      'lim.max_in_flight': '同時進行的呼叫上限',
      'lim.query_starts_per_second': '查詢子配額（每秒）',
      'lim.shares': '配額份數',
      'lim.timeout_ms': '呼叫逾時（毫秒）',
      'lim.connect_timeout_ms': '連線逾時（毫秒）',
      'lim.max_attempts': '每個作業的 POST 次數',
      'lim.deadline_s': '期限（秒）',
      'lim.max_queries': '每個作業的查詢次數',
      'lim.keep_hours': '樣本保留（小時）',
      'acct.label': '帳號',
      'acct.title': '執行期控制',
      'acct.paused': '送出',
      'acct.paused_yes': '已暫停：此帳號不送出任何呼叫',
      'acct.paused_no': '運作中',
      'acct.rate': '每秒啟動次數',
      'acct.cap': '同時進行上限',
      'acct.of': '目前 {now}（設定值 {cfg}；操作員設定：{set}）',
      'acct.unset': '未設定',
      'acct.by': '最近一次變更',
      'acct.changed': '{by} 於 {at}',
      'acct.not_admin': '變更帳號的控制需要以管理者憑證登入。',
      'acct.rate_ph': '留空：使用設定值',
      'acct.cap_ph': '留空：使用設定值',
      'acct.reason_ph': '原因（必填，會記入稽核）',
      'acct.need_reason': '請填寫原因：每次變更都會記入稽核。',
      'acct.pause': '暫停',
      'acct.resume': '恢復',
      'acct.apply': '設定速率與上限',
      'acct.done': '帳號 {account} 已變更；其派送器會在一秒內套用。',
      'state.pending': '待處理',
      'state.in_flight': '進行中',
      'state.retry_wait': '等待重試',
      'state.unknown': '結果未知',
      'state.manual': '人工審核',
      'state.succeeded': '成功',
      'state.rejected': '已拒絕',
      'state.cancelled': '已取消',
      'kind.first': '首次',
      'kind.retry': '重試',
      'kind.query': '查詢',
      'kind.manual': '人工重送',
      'class.succeeded': '成功',
      'class.rejected': '已拒絕',
      'class.key_reused': '金鑰被重複使用',
      'class.retryable': '可重試',
      'class.unknown': '結果未知',
      'class.not_sent': '未送出',
      'class.processing': '處理中',
      'class.not_found': '查無紀錄',
      'class.no_answer': '無回應',
      'reason.attempts_exhausted': '嘗試次數用盡',
      'reason.deadline': '超過期限',
      'reason.query_budget': '查詢次數用盡',
      'reason.key_reused': '金鑰被用於不同內容',
      'reason.key_retention': '金鑰超過保留期限',
      'reason.key_expired': '重送前金鑰已過期',
      'reason.notification_deadline': '期限內未收到供應商通知',
      'reason.pending_polls': '輪詢次數用盡，供應商仍在處理',
      'reason.pending_deadline': '到期時供應商仍在處理',
      'reason.invalid': '無效的 outbox 資料',
      'err.generic': '請求失敗：{message}',
      'err.signedout': '工作階段已結束，請重新登入。',
      'yes': '是',
      'no': '否',
      'none': '—'
    }
  };

  TG.languages = [['en', 'English'], ['zh-TW', '繁體中文']];

  function pick() {
    var saved = null;
    try {
      saved = window.localStorage.getItem('tg-lang');
    } catch (e) {
      saved = null;
    }
    if (saved && dict[saved]) return saved;
    var langs = navigator.languages || [navigator.language || 'en'];
    for (var i = 0; i < langs.length; i++) {
      var l = String(langs[i]).toLowerCase();
      if (l === 'zh-tw' || l === 'zh-hant' || l.indexOf('zh-hant') === 0 || l === 'zh-hk' || l === 'zh') return 'zh-TW';
      if (l.indexOf('en') === 0) return 'en';
    }
    return 'en';
  }

  TG.lang = pick();
  TG.langListeners = [];

  TG.t = function (key, vars) {
    var s = (dict[TG.lang] && dict[TG.lang][key]) || dict.en[key] || key;
    if (vars) {
      s = s.replace(/\{(\w+)\}/g, function (m, k) {
        return vars[k] === undefined || vars[k] === null ? m : String(vars[k]);
      });
    }
    return s;
  };

  TG.applyI18n = function (root) {
    var els = (root || document).querySelectorAll('[data-i18n]');
    for (var i = 0; i < els.length; i++) els[i].textContent = TG.t(els[i].getAttribute('data-i18n'));
    document.documentElement.lang = TG.lang;
  };

  TG.setLang = function (lang) {
    if (!dict[lang]) return;
    TG.lang = lang;
    try {
      window.localStorage.setItem('tg-lang', lang);
    } catch (e) {
      /* private mode: the choice lasts for this page only */
    }
    TG.applyI18n(document);
    TG.renderLangSwitch();
    for (var i = 0; i < TG.langListeners.length; i++) TG.langListeners[i](lang);
  };

  TG.renderLangSwitch = function () {
    var box = document.getElementById('lang-switch');
    if (!box) return;
    box.textContent = '';
    TG.languages.forEach(function (l) {
      var b = document.createElement('button');
      b.type = 'button';
      b.className = 'lang' + (l[0] === TG.lang ? ' on' : '');
      b.setAttribute('data-lang', l[0]);
      b.textContent = l[1];
      b.addEventListener('click', function () {
        TG.setLang(l[0]);
      });
      box.appendChild(b);
    });
  };

  function locale() {
    return TG.lang === 'zh-TW' ? 'zh-TW' : 'en-US';
  }

  /* Amounts are integers in the currency's minor units (PROVIDER.md): 1500
   * TWD is 15.00 TWD. The number of minor digits is the currency's (ISO
   * 4217, as the browser's Intl knows it). */
  TG.fmtAmount = function (amount, currency) {
    try {
      var f = new Intl.NumberFormat(locale(), { style: 'currency', currency: currency, currencyDisplay: 'code' });
      var digits = f.resolvedOptions().maximumFractionDigits;
      return f.format(amount / Math.pow(10, digits));
    } catch (e) {
      return amount + ' ' + currency;
    }
  };

  function pad(n, w) {
    var s = String(n);
    while (s.length < (w || 2)) s = '0' + s;
    return s;
  }

  TG.fmtTime = function (ms, withMs) {
    if (ms === null || ms === undefined || ms <= 0) return TG.t('none');
    var d = new Date(ms);
    var s = d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
    return withMs ? s + '.' + pad(d.getMilliseconds(), 3) : s;
  };

  TG.fmtAge = function (s) {
    if (s === null || s === undefined) return TG.t('none');
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' m ' + (s % 60) + ' s';
    if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' m';
    return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
  };

  /* The words themselves (states, kinds, classes, reasons) are the server's
   * (src/core/names.h): the console gets them at sign-in, in the session's
   * "vocabularies", and keeps only their translations here, under
   * <prefix>.<word>. */
  var PREFIX = { states: 'state.', kinds: 'kind.', classes: 'class.', reasons: 'reason.' };
  TG.vocabularies = { states: [], kinds: [], classes: [], reasons: [] };
  TG.setVocabularies = function (v) {
    Object.keys(PREFIX).forEach(function (k) {
      TG.vocabularies[k] = (v && Array.isArray(v[k])) ? v[k].slice() : [];
    });
  };
  /* Every word of v (the session's vocabularies) without a translation in
   * some language, as "lang: key"; [] when all have one. */
  TG.missingTranslations = function (v) {
    var missing = [];
    Object.keys(PREFIX).forEach(function (k) {
      ((v && v[k]) || []).forEach(function (w) {
        Object.keys(dict).forEach(function (lang) {
          if (!dict[lang][PREFIX[k] + w]) missing.push(lang + ': ' + PREFIX[k] + w);
        });
      });
    });
    return missing;
  };
  function wordName(prefix, w) {
    if (w === null || w === undefined || w === '') return TG.t('none');
    var key = prefix + w;
    var s = TG.t(key);
    return s === key ? String(w) : s; /* a word newer than this page: itself, never its key */
  }
  TG.stateName = function (s) {
    return wordName(PREFIX.states, s);
  };
  TG.kindName = function (k) {
    return wordName(PREFIX.kinds, k);
  };
  TG.className = function (c) {
    return wordName(PREFIX.classes, c);
  };
  TG.reasonName = function (r) {
    return wordName(PREFIX.reasons, r);
  };

  /* el('td', {class: 'x'}, 'text' | node | [children]) — text is always
   * textContent: nothing from the server is ever parsed as HTML. */
  TG.el = function (tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        if (k === 'text') e.textContent = v;
        else if (k.indexOf('on') === 0 && typeof v === 'function') e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? '' : v);
      });
    }
    var add = function (c) {
      if (c === null || c === undefined || c === false) return;
      if (Array.isArray(c)) c.forEach(add);
      else if (typeof c === 'string' || typeof c === 'number') e.appendChild(document.createTextNode(String(c)));
      else e.appendChild(c);
    };
    add(children);
    return e;
  };
})();
