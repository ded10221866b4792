/*
 * store_sqlite_schema — the embedded store's schema as its ordered
 * migrations (store_sqlite.c runs them, one transaction each, and counts
 * the steps in PRAGMA user_version). Append only: a migration that has
 * shipped is never edited, since a store already past it never runs it
 * again.
 */
#include "store/sqlite_int.h"

/* Ordered migrations: migrations[i] takes user_version i to i+1. Append only;
 * never edit one that has shipped. */
const char *const store_sqlite_migrations[] = {
    /* 1: the initial schema. */
    "CREATE TABLE operations ("
    "  id INTEGER PRIMARY KEY,"
    "  operation_id TEXT NOT NULL UNIQUE,"
    /* the request payload, column by column: same body = all equal */
    "  payment_id TEXT NOT NULL,"
    "  amount INTEGER NOT NULL CHECK (amount > 0),"
    "  currency TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('pending','in_flight','retry_wait',"
    "    'unknown','succeeded','rejected','manual')),"
    "  reason TEXT NOT NULL DEFAULT 'none',"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  attempt_limit INTEGER NOT NULL,"
    "  queries INTEGER NOT NULL DEFAULT 0,"
    "  query_limit INTEGER NOT NULL,"
    "  accepted_at INTEGER NOT NULL,"
    "  deadline_at INTEGER NOT NULL,"
    "  key_first_used INTEGER NOT NULL DEFAULT 0,"
    "  next_run_at INTEGER NOT NULL DEFAULT 0,"
    "  updated_at INTEGER NOT NULL,"
    "  last_wait_ms INTEGER NOT NULL DEFAULT 0,"
    "  operator_resend INTEGER NOT NULL DEFAULT 0 CHECK (operator_resend IN (0, 1)),"
    "  epoch INTEGER NOT NULL DEFAULT 0,"
    "  refund_id TEXT NOT NULL DEFAULT '',"
    "  last_http_status INTEGER NOT NULL DEFAULT 0,"
    "  last_class TEXT NOT NULL DEFAULT 'unknown',"
    "  source TEXT NOT NULL DEFAULT 'api'"
    ");"
    /* group first (pending by accepted_at), manual list, counts by state,
         * in_flight for recovery, oldest open per state */
    "CREATE INDEX ops_state_accepted ON operations(state, accepted_at);"
    /* group again: walk by (accepted_at, id); the due test and the state are
     * answered from the index itself (covering), never from the table */
    "CREATE INDEX ops_again_accepted ON operations(accepted_at, id, next_run_at, state)"
    "  WHERE state IN ('retry_wait','unknown');"
    /* earliest next_run_at of the again group */
    "CREATE INDEX ops_again_due ON operations(next_run_at)"
    "  WHERE state IN ('retry_wait','unknown');"
    /* the deadline sweep */
    "CREATE INDEX ops_open_deadline ON operations(deadline_at)"
    "  WHERE state IN ('pending','retry_wait','unknown');"
    "CREATE TABLE calls ("
    "  id INTEGER PRIMARY KEY,"
    "  op_id INTEGER NOT NULL REFERENCES operations(id),"
    "  operation_id TEXT NOT NULL,"
    "  kind TEXT NOT NULL CHECK (kind IN ('first','retry','query','manual')),"
    "  attempt INTEGER NOT NULL,"
    "  request_id TEXT NOT NULL,"
    "  epoch INTEGER NOT NULL,"
    "  start_mono INTEGER NOT NULL,"
    "  start_wall INTEGER NOT NULL,"
    "  in_flight_at_start INTEGER NOT NULL,"
    "  ended INTEGER NOT NULL DEFAULT 0 CHECK (ended IN (0, 1)),"
    "  end_mono INTEGER NOT NULL DEFAULT 0,"
    "  end_wall INTEGER NOT NULL DEFAULT 0,"
    "  sent INTEGER NOT NULL DEFAULT 0,"
    "  cls TEXT NOT NULL DEFAULT 'unknown',"
    "  http_status INTEGER NOT NULL DEFAULT 0,"
    "  latency_us INTEGER NOT NULL DEFAULT 0,"
    "  error TEXT NOT NULL DEFAULT ''"
    ");"
    "CREATE INDEX calls_op ON calls(op_id, id);"
    "CREATE TABLE owner ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  epoch INTEGER NOT NULL"
    ");"
    "INSERT INTO owner(id, epoch) VALUES (1, 0);"
    "CREATE TABLE audit ("
    "  id INTEGER PRIMARY KEY,"
    "  op_id INTEGER NOT NULL REFERENCES operations(id),"
    "  at INTEGER NOT NULL,"
    "  action TEXT NOT NULL,"
    "  operator_name TEXT NOT NULL,"
    "  reason TEXT NOT NULL,"
    "  detail TEXT NOT NULL"
    ");"
    "CREATE INDEX audit_op ON audit(op_id, id);"
    /* nothing is ever deleted; the audit log is append-only */
    "CREATE TRIGGER operations_no_delete BEFORE DELETE ON operations"
    "  BEGIN SELECT RAISE(ABORT, 'operations are never deleted'); END;"
    "CREATE TRIGGER calls_no_delete BEFORE DELETE ON calls"
    "  BEGIN SELECT RAISE(ABORT, 'calls are never deleted'); END;"
    "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit"
    "  BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;"
    "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit"
    "  BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;",
    /* 2: the key-retention sweep walks only re-sends, by key age */
    "CREATE INDEX ops_retry_key ON operations(key_first_used) WHERE state = 'retry_wait';",
    /* 3: the running exit's per-second samples (operational data, pruned) */
    "CREATE TABLE exit_samples ("
    "  at INTEGER PRIMARY KEY,"
    "  epoch INTEGER NOT NULL,"
    "  in_flight INTEGER NOT NULL,"
    "  starts INTEGER NOT NULL,"
    "  call_ends INTEGER NOT NULL,"
    "  op_closes INTEGER NOT NULL,"
    "  held INTEGER NOT NULL CHECK (held IN (0, 1)),"
    "  oldest_open INTEGER,"
    "  figures TEXT NOT NULL DEFAULT ''"
    ");",
    /* 4: shares of the account quota (more than one dispatcher): the split
     * in force, each share's current epoch (the counter stays owner.epoch),
     * and the share every claim was made under */
    "CREATE TABLE exit_split ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  shares INTEGER NOT NULL,"
    "  starts_per_second REAL NOT NULL,"
    "  max_in_flight INTEGER NOT NULL"
    ");"
    "CREATE TABLE exit_shares ("
    "  share INTEGER PRIMARY KEY,"
    "  epoch INTEGER NOT NULL"
    ");"
    "CREATE INDEX shares_epoch ON exit_shares(epoch);"
    "INSERT INTO exit_shares (share, epoch) SELECT 0, epoch FROM owner WHERE id = 1;"
    "ALTER TABLE operations ADD COLUMN share INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE calls ADD COLUMN share INTEGER NOT NULL DEFAULT 0;",
    /* 5: exit samples per share: every dispatcher writes its own second, so
     * the key is (at, share); the rows so far were share 0's */
    "CREATE TABLE exit_samples_5 ("
    "  at INTEGER NOT NULL,"
    "  share INTEGER NOT NULL DEFAULT 0,"
    "  epoch INTEGER NOT NULL,"
    "  in_flight INTEGER NOT NULL,"
    "  starts INTEGER NOT NULL,"
    "  call_ends INTEGER NOT NULL,"
    "  op_closes INTEGER NOT NULL,"
    "  held INTEGER NOT NULL CHECK (held IN (0, 1)),"
    "  oldest_open INTEGER,"
    "  figures TEXT NOT NULL DEFAULT '',"
    "  PRIMARY KEY (at, share)"
    ");"
    "INSERT INTO exit_samples_5 (at, share, epoch, in_flight, starts, call_ends, op_closes,"
    "  held, oldest_open, figures) SELECT at, 0, epoch, in_flight, starts, call_ends,"
    "  op_closes, held, oldest_open, figures FROM exit_samples;"
    "DROP TABLE exit_samples;"
    "ALTER TABLE exit_samples_5 RENAME TO exit_samples;",
    /* 6: the cancelled state (a CHECK changes only by rebuilding the table:
     * new table, copy, drop, rename, then its indexes and trigger again;
     * migrate() runs the steps with foreign keys off and checks them before
     * each commit, as SQLite's ALTER TABLE page prescribes), the owner of a
     * manual case, the operation's trace context and its caller's deadline;
     * each call's trace and span ids. */
    "CREATE TABLE operations_6 ("
    "  id INTEGER PRIMARY KEY,"
    "  operation_id TEXT NOT NULL UNIQUE,"
    "  payment_id TEXT NOT NULL,"
    "  amount INTEGER NOT NULL CHECK (amount > 0),"
    "  currency TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('pending','in_flight','retry_wait',"
    "    'unknown','succeeded','rejected','manual','cancelled')),"
    "  reason TEXT NOT NULL DEFAULT 'none',"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  attempt_limit INTEGER NOT NULL,"
    "  queries INTEGER NOT NULL DEFAULT 0,"
    "  query_limit INTEGER NOT NULL,"
    "  accepted_at INTEGER NOT NULL,"
    "  deadline_at INTEGER NOT NULL,"
    "  key_first_used INTEGER NOT NULL DEFAULT 0,"
    "  next_run_at INTEGER NOT NULL DEFAULT 0,"
    "  updated_at INTEGER NOT NULL,"
    "  last_wait_ms INTEGER NOT NULL DEFAULT 0,"
    "  operator_resend INTEGER NOT NULL DEFAULT 0 CHECK (operator_resend IN (0, 1)),"
    "  epoch INTEGER NOT NULL DEFAULT 0,"
    "  refund_id TEXT NOT NULL DEFAULT '',"
    "  last_http_status INTEGER NOT NULL DEFAULT 0,"
    "  last_class TEXT NOT NULL DEFAULT 'unknown',"
    "  source TEXT NOT NULL DEFAULT 'api',"
    "  share INTEGER NOT NULL DEFAULT 0,"
    "  assignee TEXT NOT NULL DEFAULT '',"
    "  traceparent TEXT NOT NULL DEFAULT '',"
    "  caller_deadline_at INTEGER NOT NULL DEFAULT 0"
    ");"
    "INSERT INTO operations_6 (id, operation_id, payment_id, amount, currency, state, reason,"
    "  attempts, attempt_limit, queries, query_limit, accepted_at, deadline_at, key_first_used,"
    "  next_run_at, updated_at, last_wait_ms, operator_resend, epoch, refund_id,"
    "  last_http_status, last_class, source, share)"
    "  SELECT id, operation_id, payment_id, amount, currency, state, reason, attempts,"
    "  attempt_limit, queries, query_limit, accepted_at, deadline_at, key_first_used,"
    "  next_run_at, updated_at, last_wait_ms, operator_resend, epoch, refund_id,"
    "  last_http_status, last_class, source, share FROM operations;"
    "DROP TABLE operations;"
    "ALTER TABLE operations_6 RENAME TO operations;"
    "CREATE INDEX ops_state_accepted ON operations(state, accepted_at);"
    "CREATE INDEX ops_again_accepted ON operations(accepted_at, id, next_run_at, state)"
    "  WHERE state IN ('retry_wait','unknown');"
    "CREATE INDEX ops_again_due ON operations(next_run_at)"
    "  WHERE state IN ('retry_wait','unknown');"
    "CREATE INDEX ops_open_deadline ON operations(deadline_at)"
    "  WHERE state IN ('pending','retry_wait','unknown');"
    "CREATE INDEX ops_retry_key ON operations(key_first_used) WHERE state = 'retry_wait';"
    "CREATE TRIGGER operations_no_delete BEFORE DELETE ON operations"
    "  BEGIN SELECT RAISE(ABORT, 'operations are never deleted'); END;"
    "ALTER TABLE calls ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE calls ADD COLUMN span_id TEXT NOT NULL DEFAULT '';",
    /* 7: a call's start is when its request went on the wire; the hand-off
     * to the transport is kept beside it (the difference is the connect).
     * Rows from before say -1 (not recorded); a claim writes 0 (not handed
     * over yet) */
    "ALTER TABLE calls ADD COLUMN handoff_mono INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE calls ADD COLUMN handoff_wall INTEGER NOT NULL DEFAULT -1;",
    /* 8: a provider-wide hold one share saw, for every share of the account */
    "CREATE TABLE exit_hold ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  until_wall INTEGER NOT NULL"
    ");",
    /* 9: retention and counters (docs/design.md, "Retention"). The final
     * states and the call log are counted in the transactions that change
     * them, so /metrics costs the same at any size; final operations past
     * retention may be deleted, with their calls, but only by a prune: the
     * triggers now let a DELETE through only while a prune's permit row
     * exists (it exists only inside the prune's own transaction) and only
     * for a final operation older than the permit's cutoff, or a call of
     * one. Audit rows stay undeletable, and an operation with audit rows
     * cannot go (its foreign key). */
    "CREATE TABLE counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO counters (name, n) SELECT 'succeeded', count(*) FROM operations"
    "  WHERE state = 'succeeded';"
    "INSERT INTO counters (name, n) SELECT 'rejected', count(*) FROM operations"
    "  WHERE state = 'rejected';"
    "INSERT INTO counters (name, n) SELECT 'calls', count(*) FROM calls;"
    "INSERT INTO counters (name, n) VALUES ('pruned_operations', 0), ('pruned_calls', 0);"
    "CREATE INDEX ops_state_updated ON operations(state, updated_at, id);"
    "CREATE TABLE prune_permit ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  before_at INTEGER NOT NULL"
    ");"
    "DROP TRIGGER operations_no_delete;"
    "CREATE TRIGGER operations_no_delete BEFORE DELETE ON operations"
    "  WHEN NOT EXISTS (SELECT 1 FROM prune_permit p"
    "    WHERE old.state IN ('succeeded','rejected') AND old.updated_at < p.before_at)"
    "  BEGIN SELECT RAISE(ABORT, 'operations are deleted only by a prune'); END;"
    "DROP TRIGGER calls_no_delete;"
    "CREATE TRIGGER calls_no_delete BEFORE DELETE ON calls"
    "  WHEN NOT EXISTS (SELECT 1 FROM prune_permit p, operations o WHERE o.id = old.op_id"
    "    AND o.state IN ('succeeded','rejected') AND o.updated_at < p.before_at)"
    "  BEGIN SELECT RAISE(ABORT, 'calls are deleted only with their operation'); END;",
    /* 10: the console's timeline: the backlog by state in every sample, and
     * the API's admission refusals per second (both pruned like samples) */
    "ALTER TABLE exit_samples ADD COLUMN n_pending INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE exit_samples ADD COLUMN n_in_flight INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE exit_samples ADD COLUMN n_retry_wait INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE exit_samples ADD COLUMN n_unknown INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE exit_samples ADD COLUMN n_manual INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE admission_refusals ("
    "  at INTEGER PRIMARY KEY,"
    "  refused INTEGER NOT NULL"
    ");",
    /* 11: the refund's optional reason and metadata (a JSON object, keys
     * sorted), part of the request payload like payment_id */
    ("ALTER TABLE operations ADD COLUMN refund_reason TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE operations ADD COLUMN metadata TEXT NOT NULL DEFAULT '';"),
    /* 12: provider accounts (issue 26): every operation and call names its
     * account, today's rows the one account `default`; the exit's indexes
     * lead with the account, so one account's backlog never slows another's
     * picks (ops_state_accepted stays for the counts and the manual list);
     * shares, split, hold and samples are kept per account. */
    "ALTER TABLE operations ADD COLUMN account TEXT NOT NULL DEFAULT 'default';"
    "ALTER TABLE calls ADD COLUMN account TEXT NOT NULL DEFAULT 'default';"
    "CREATE INDEX ops_account_state ON operations(account, state, accepted_at);"
    "DROP INDEX ops_again_accepted;"
    "CREATE INDEX ops_again_accepted ON operations(account, accepted_at, id, next_run_at, state)"
    "  WHERE state IN ('retry_wait','unknown');"
    "DROP INDEX ops_again_due;"
    "CREATE INDEX ops_again_due ON operations(account, next_run_at)"
    "  WHERE state IN ('retry_wait','unknown');"
    "DROP INDEX ops_open_deadline;"
    "CREATE INDEX ops_open_deadline ON operations(account, deadline_at)"
    "  WHERE state IN ('pending','retry_wait','unknown');"
    "DROP INDEX ops_retry_key;"
    "CREATE INDEX ops_retry_key ON operations(account, key_first_used)"
    "  WHERE state = 'retry_wait';"
    "CREATE TABLE exit_shares_12 ("
    "  account TEXT NOT NULL,"
    "  share INTEGER NOT NULL,"
    "  epoch INTEGER NOT NULL,"
    "  PRIMARY KEY (account, share)"
    ") WITHOUT ROWID;"
    "INSERT INTO exit_shares_12 (account, share, epoch) SELECT 'default', share, epoch"
    "  FROM exit_shares;"
    "DROP TABLE exit_shares;"
    "ALTER TABLE exit_shares_12 RENAME TO exit_shares;"
    "CREATE INDEX shares_epoch ON exit_shares(epoch);"
    "CREATE TABLE exit_split_12 ("
    "  account TEXT PRIMARY KEY,"
    "  shares INTEGER NOT NULL,"
    "  starts_per_second REAL NOT NULL,"
    "  max_in_flight INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "INSERT INTO exit_split_12 (account, shares, starts_per_second, max_in_flight)"
    "  SELECT 'default', shares, starts_per_second, max_in_flight FROM exit_split;"
    "DROP TABLE exit_split;"
    "ALTER TABLE exit_split_12 RENAME TO exit_split;"
    "CREATE TABLE exit_hold_12 ("
    "  account TEXT PRIMARY KEY,"
    "  until_wall INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "INSERT INTO exit_hold_12 (account, until_wall) SELECT 'default', until_wall FROM exit_hold;"
    "DROP TABLE exit_hold;"
    "ALTER TABLE exit_hold_12 RENAME TO exit_hold;"
    "CREATE TABLE exit_samples_12 ("
    "  account TEXT NOT NULL DEFAULT 'default',"
    "  at INTEGER NOT NULL,"
    "  share INTEGER NOT NULL DEFAULT 0,"
    "  epoch INTEGER NOT NULL,"
    "  in_flight INTEGER NOT NULL,"
    "  starts INTEGER NOT NULL,"
    "  call_ends INTEGER NOT NULL,"
    "  op_closes INTEGER NOT NULL,"
    "  held INTEGER NOT NULL CHECK (held IN (0, 1)),"
    "  oldest_open INTEGER,"
    "  figures TEXT NOT NULL DEFAULT '',"
    "  n_pending INTEGER NOT NULL DEFAULT 0,"
    "  n_in_flight INTEGER NOT NULL DEFAULT 0,"
    "  n_retry_wait INTEGER NOT NULL DEFAULT 0,"
    "  n_unknown INTEGER NOT NULL DEFAULT 0,"
    "  n_manual INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (account, at, share)"
    ");"
    "INSERT INTO exit_samples_12 (account, " SAMPLE_COLS ")"
    "  SELECT 'default', " SAMPLE_COLS " FROM exit_samples;"
    "DROP TABLE exit_samples;"
    "ALTER TABLE exit_samples_12 RENAME TO exit_samples;"
    "CREATE INDEX samples_at ON exit_samples(at);",
    /* 13: the events' outbox (store_events.h): one row per announced change
     * of state, written in the change's transaction; AUTOINCREMENT so that
     * an id is never handed out twice. No foreign key: a prune may delete
     * the operation, its events stay. The 'events' counter row is the lock
     * a writer holds while it takes its id (on SQLite the write lock does). */
    ("CREATE TABLE events ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  op_id INTEGER NOT NULL,"
     "  operation_id TEXT NOT NULL,"
     "  at INTEGER NOT NULL,"
     "  state TEXT NOT NULL,"
     "  from_state TEXT NOT NULL,"
     "  reason TEXT NOT NULL,"
     "  refund_id TEXT NOT NULL,"
     "  amount INTEGER NOT NULL,"
     "  currency TEXT NOT NULL,"
     "  delivery INTEGER NOT NULL DEFAULT 0 CHECK (delivery IN (0, 1, 2)),"
     "  attempts INTEGER NOT NULL DEFAULT 0,"
     "  next_at INTEGER NOT NULL DEFAULT 0,"
     "  delivered_at INTEGER NOT NULL DEFAULT 0,"
     "  last_error TEXT NOT NULL DEFAULT ''"
     ");"
     "CREATE INDEX events_delivery ON events(delivery, id);"
     "INSERT INTO counters (name, n) VALUES ('events', 0);"),
    /* 14: run-time account controls (issue 26 §5), a step of its own: what
     * an operator set per account (rate, in-flight cap, paused; 0: the
     * config's), and the account audit trail of every change, append-only
     * as `audit` is; AUTOINCREMENT so that an id is never handed out
     * twice. */
    ("CREATE TABLE account_controls ("
     "  account TEXT PRIMARY KEY,"
     "  starts_per_second REAL NOT NULL CHECK (starts_per_second >= 0),"
     "  max_in_flight INTEGER NOT NULL CHECK (max_in_flight >= 0),"
     "  paused INTEGER NOT NULL CHECK (paused IN (0, 1)),"
     "  changed_at INTEGER NOT NULL,"
     "  changed_by TEXT NOT NULL"
     ") WITHOUT ROWID;"
     "CREATE TABLE account_audit ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  account TEXT NOT NULL,"
     "  at INTEGER NOT NULL,"
     "  action TEXT NOT NULL,"
     "  principal TEXT NOT NULL,"
     "  reason TEXT NOT NULL,"
     "  detail TEXT NOT NULL"
     ");"
     "CREATE INDEX account_audit_account ON account_audit(account, id);"
     "CREATE TRIGGER account_audit_no_delete BEFORE DELETE ON account_audit"
     "  BEGIN SELECT RAISE(ABORT, 'account audit is append-only'); END;"
     "CREATE TRIGGER account_audit_no_update BEFORE UPDATE ON account_audit"
     "  BEGIN SELECT RAISE(ABORT, 'account audit is append-only'); END;"),
    /* 15: a refund's own notify_url (core/url_allow.h), kept with it and
     * copied into each of its events with the account, so that a delivery
     * goes where the event says without reading the operation. */
    ("ALTER TABLE operations ADD COLUMN notify_url TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE events ADD COLUMN account TEXT NOT NULL DEFAULT 'default';"
     "ALTER TABLE events ADD COLUMN notify_url TEXT NOT NULL DEFAULT '';"),
    /* 16: who submitted each operation (the API credential's name), so that
     * an intake-only credential reads and cancels only its own; '' for the
     * rows from before: no owner, readable by every reader as they were. */
    ("ALTER TABLE operations ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE events ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';"),
    /* 17: a refund the provider reports as pending (core/policy.h): the
     * wall time of its first processing answer (0: not pending) and the
     * polls made since, counted against retry.pending_max_polls. */
    ("ALTER TABLE operations ADD COLUMN pending_since INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE operations ADD COLUMN pending_polls INTEGER NOT NULL DEFAULT 0;"),
    /* 18: a standby's wish for a share (store_share_want): a count it moves
     * while it waits, read by the owners (docs/design.md, "Orphaned
     * shares"). */
    ("ALTER TABLE exit_split ADD COLUMN want_seq INTEGER NOT NULL DEFAULT 0;"),
    /* 19: an operation found by the provider's refund id within its account
     * (store_find_by_refund_id: a notification naming only Adyen's
     * pspReference) without a scan. */
    "CREATE INDEX ops_account_refund ON operations(account, refund_id);",
};

const int store_sqlite_migration_count =
    (int)(sizeof(store_sqlite_migrations) / sizeof(store_sqlite_migrations[0]));
