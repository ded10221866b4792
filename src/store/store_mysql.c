/*
 * store_mysql — the server store backend: MariaDB (10.11 tested; MySQL
 * refuses its migrations' IF NOT EXISTS forms) through MariaDB Connector/C, InnoDB tables, READ COMMITTED, a versioned schema
 * (table schema_version, one migration step at a time under a GET_LOCK so
 * that two processes opening a fresh database do not both run a step).
 *
 * url: mysql://user[:password]@host[:port]/db[?password_file=PATH&socket=PATH]
 * The password may instead come from the environment (TG_MYSQL_PASSWORD) or
 * from the first line of password_file. The database is created when it does
 * not exist and the user may create it.
 *
 * Exit ownership is per share of the account quota (store.h): share 0 is
 * GET_LOCK('tollgate_owner_<db>', 0), share k > 0 GET_LOCK('tollgate_share_
 * <db>_<k>', 0), held on a DEDICATED connection for the owner's whole life:
 * the server drops the lock when that session ends (process killed,
 * connection killed, server restarted), and a paused process keeps its
 * session and so its lock. Acquirers take 'tollgate_split_<db>' on that
 * connection for the few statements that read (and maybe replace) the split
 * and pick a share, so a split is never replaced under a live share. Each
 * acquisition bumps owner.epoch (one counter for every share) and records it
 * in exit_shares; claims look their epoch up there under a shared row lock
 * (a takeover of that share waits for claims in progress and fences every
 * later one), settles check the epoch the operation was claimed under.
 *
 * Invariants:
 *   - every public op is one short transaction on the main connection,
 *     committed or rolled back before it returns; nothing is held between
 *     calls, and list callbacks run between pages, outside any transaction;
 *   - a deadlock or lock wait timeout retries the whole transaction (a few
 *     times, with a short pause); a lost connection is reconnected and the
 *     transaction retried once, but only where that is safe: a failure before
 *     COMMIT was sent (the server rolled it back), or an op that re-checks what
 *     an unknown COMMIT did. A claim whose COMMIT outcome is unknown looks for
 *     its call row by request_id before claiming anything again;
 *   - claims pick with FOR UPDATE SKIP LOCKED: several processes never wait
 *     on each other's picks;
 *   - operations, calls and audit rows are never deleted (triggers refuse
 *     it) and audit rows are never updated; every open creates a trigger
 *     that is missing, and one the server refuses (a binlog and no SUPER)
 *     is said by store_unkept(), which a daemon refuses to start on unless
 *     told otherwise;
 *   - nothing MariaDB-specific (codes, messages, SQL) leaves the backend's
 *     files (store_mysql*.c); the password never leaves them either;
 *   - ret_* outputs are written only on success.
 *
 * Values go into SQL text through one builder (sqlf) that escapes every
 * string with mysql_real_escape_string on a connection whose sql_mode this
 * backend sets; integers are printed. There is no other way into a query.
 *
 * This file holds the url, open, the migrations, close and the vtable;
 * store_mysql_sql.c the SQL builder, values, connections and transactions;
 * store_mysql_rows.c the row, pick, page, stats and sample
 * primitives; store_mysql_lock.c ownership locks, epochs and the split. The
 * operations of store.h are written once, over these primitives, in
 * store_exit.c, store_owner.c and store_read.c. What the backend's files
 * share is declared in mysql_int.h.
 */
#ifdef TG_HAVE_MARIADB /* the whole file: CMake defines it with libmariadb */

#include <mysql.h>
#include <mysqld_error.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/mysql_int.h"
#include "store/store_server.h"
#include "store/store_url.h"

#define LOCK_WAIT_S    3 /* innodb_lock_wait_timeout of our sessions */
#define MIGRATE_WAIT_S 30

/* ---- schema ------------------------------------------------------------ */

#define TEXT_ASCII "CHARACTER SET ascii COLLATE ascii_bin"

/* Each step takes schema_version from .version - 1 to .version. Statements
 * are idempotent (IF NOT EXISTS, INSERT IGNORE) because MariaDB DDL commits
 * on its own: a step cut short is simply run again. Append only. */
struct migration {
        int version;
        const char *sql;
};

static const struct migration migrations[] = {
    {1, "CREATE TABLE IF NOT EXISTS operations ("
        "  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
        "  operation_id VARCHAR(128) " TEXT_ASCII " NOT NULL,"
        "  payment_id VARCHAR(128) " TEXT_ASCII " NOT NULL,"
        "  amount BIGINT NOT NULL,"
        "  currency VARCHAR(3) " TEXT_ASCII " NOT NULL,"
        "  state VARCHAR(16) " TEXT_ASCII " NOT NULL DEFAULT 'pending',"
        "  reason VARCHAR(32) " TEXT_ASCII " NOT NULL DEFAULT 'none',"
        /* 0 in attempt_limit marks a row an outbox writer inserted and
         * tollgate has not validated and filled in yet (docs/outbox.md) */
        "  attempts INT UNSIGNED NOT NULL DEFAULT 0,"
        "  attempt_limit INT UNSIGNED NOT NULL DEFAULT 0,"
        "  queries INT UNSIGNED NOT NULL DEFAULT 0,"
        "  query_limit INT UNSIGNED NOT NULL DEFAULT 0,"
        "  accepted_at BIGINT NOT NULL"
        "    DEFAULT (CAST(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000 AS SIGNED)),"
        "  deadline_at BIGINT NOT NULL DEFAULT 0,"
        "  key_first_used BIGINT NOT NULL DEFAULT 0,"
        "  next_run_at BIGINT NOT NULL DEFAULT 0,"
        "  updated_at BIGINT NOT NULL DEFAULT 0,"
        "  last_wait_ms BIGINT NOT NULL DEFAULT 0,"
        "  operator_resend TINYINT NOT NULL DEFAULT 0,"
        "  epoch BIGINT NOT NULL DEFAULT 0,"
        "  refund_id VARBINARY(127) NOT NULL DEFAULT '',"
        "  last_http_status INT NOT NULL DEFAULT 0,"
        "  last_class VARCHAR(16) " TEXT_ASCII " NOT NULL DEFAULT 'unknown',"
        "  source VARCHAR(15) " TEXT_ASCII " NOT NULL DEFAULT 'api',"
        "  UNIQUE KEY ops_key (operation_id),"
        /* group first, manual list, counts by state, recovery */
        "  KEY ops_state_accepted (state, accepted_at, id),"
        /* earliest due of the again group, and its candidates */
        "  KEY ops_state_due (state, next_run_at),"
        /* the deadline sweep */
        "  KEY ops_state_deadline (state, deadline_at),"
        /* the key-retention sweep */
        "  KEY ops_state_key (state, key_first_used),"
        "  CONSTRAINT ops_amount CHECK (amount > 0),"
        "  CONSTRAINT ops_state CHECK (state IN ('pending','in_flight','retry_wait',"
        "    'unknown','succeeded','rejected','manual')),"
        "  CONSTRAINT ops_resend CHECK (operator_resend IN (0, 1))"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"},
    {1, "CREATE TABLE IF NOT EXISTS calls ("
        "  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
        "  op_id BIGINT NOT NULL,"
        "  operation_id VARCHAR(128) " TEXT_ASCII " NOT NULL,"
        "  kind VARCHAR(8) " TEXT_ASCII " NOT NULL,"
        "  attempt INT UNSIGNED NOT NULL,"
        "  request_id VARBINARY(64) NOT NULL,"
        "  epoch BIGINT NOT NULL,"
        "  start_mono BIGINT NOT NULL,"
        "  start_wall BIGINT NOT NULL,"
        "  in_flight_at_start INT UNSIGNED NOT NULL,"
        "  ended TINYINT NOT NULL DEFAULT 0,"
        "  end_mono BIGINT NOT NULL DEFAULT 0,"
        "  end_wall BIGINT NOT NULL DEFAULT 0,"
        "  sent TINYINT NOT NULL DEFAULT 0,"
        "  cls VARCHAR(16) " TEXT_ASCII " NOT NULL DEFAULT 'unknown',"
        "  http_status INT NOT NULL DEFAULT 0,"
        "  latency_us BIGINT NOT NULL DEFAULT 0,"
        "  error VARBINARY(255) NOT NULL DEFAULT '',"
        "  KEY calls_op (op_id, id),"
        /* a claim whose commit outcome is unknown looks for its row */
        "  KEY calls_request (request_id),"
        "  CONSTRAINT calls_op_fk FOREIGN KEY (op_id) REFERENCES operations (id),"
        "  CONSTRAINT calls_kind CHECK (kind IN ('first','retry','query','manual'))"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"},
    {1, "CREATE TABLE IF NOT EXISTS owner ("
        "  id TINYINT NOT NULL PRIMARY KEY,"
        "  epoch BIGINT NOT NULL,"
        "  CONSTRAINT owner_one CHECK (id = 1)"
        ") ENGINE=InnoDB"},
    {1, "INSERT IGNORE INTO owner (id, epoch) VALUES (1, 0)"},
    {1, "CREATE TABLE IF NOT EXISTS audit ("
        "  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
        "  op_id BIGINT NOT NULL,"
        "  at BIGINT NOT NULL,"
        "  action VARCHAR(32) " TEXT_ASCII " NOT NULL,"
        "  operator_name VARBINARY(255) NOT NULL,"
        "  reason VARBINARY(255) NOT NULL,"
        "  detail VARBINARY(255) NOT NULL,"
        "  KEY audit_op (op_id, id),"
        "  CONSTRAINT audit_op_fk FOREIGN KEY (op_id) REFERENCES operations (id)"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"},
    /* nothing is ever deleted; the audit log is append-only */
    {1, "CREATE TRIGGER IF NOT EXISTS operations_no_delete BEFORE DELETE ON operations "
        "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'operations are never deleted'"},
    {1, "CREATE TRIGGER IF NOT EXISTS calls_no_delete BEFORE DELETE ON calls "
        "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'calls are never deleted'"},
    {1, "CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit "
        "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit is append-only'"},
    {1, "CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit "
        "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit is append-only'"},
    /* 2: the running exit's per-second samples (operational data, pruned) */
    {2, "CREATE TABLE IF NOT EXISTS exit_samples ("
        "  at BIGINT NOT NULL PRIMARY KEY,"
        "  epoch BIGINT NOT NULL,"
        "  in_flight INT UNSIGNED NOT NULL,"
        "  starts INT UNSIGNED NOT NULL,"
        "  call_ends INT UNSIGNED NOT NULL,"
        "  op_closes INT UNSIGNED NOT NULL,"
        "  held TINYINT NOT NULL,"
        "  oldest_open BIGINT NULL,"
        "  figures VARBINARY(4095) NOT NULL DEFAULT '',"
        "  CONSTRAINT samples_held CHECK (held IN (0, 1))"
        ") ENGINE=InnoDB"},
    /* 3: shares of the account quota (more than one dispatcher). The split
     * in force, each share's current epoch (the counter stays owner.epoch),
     * and the share every claim was made under. */
    {3, "CREATE TABLE IF NOT EXISTS exit_split ("
        "  id TINYINT NOT NULL PRIMARY KEY,"
        "  shares INT UNSIGNED NOT NULL,"
        "  starts_per_second DOUBLE NOT NULL,"
        "  max_in_flight INT UNSIGNED NOT NULL,"
        "  CONSTRAINT split_one CHECK (id = 1)"
        ") ENGINE=InnoDB"},
    {3, "CREATE TABLE IF NOT EXISTS exit_shares ("
        "  share INT UNSIGNED NOT NULL PRIMARY KEY,"
        "  epoch BIGINT NOT NULL,"
        "  KEY shares_epoch (epoch)"
        ") ENGINE=InnoDB"},
    {3, "INSERT IGNORE INTO exit_shares (share, epoch) SELECT 0, epoch FROM owner WHERE id = 1"},
    {3, "ALTER TABLE operations ADD COLUMN IF NOT EXISTS share INT UNSIGNED NOT NULL DEFAULT 0"},
    {3, "ALTER TABLE calls ADD COLUMN IF NOT EXISTS share INT UNSIGNED NOT NULL DEFAULT 0"},
    /* 4: exit samples per share: every dispatcher writes its own second, so
     * the key is (at, share); the rows so far were share 0's. Both steps may
     * run again (a step interrupted before the version bump). */
    {4, "ALTER TABLE exit_samples ADD COLUMN IF NOT EXISTS share INT UNSIGNED NOT NULL DEFAULT 0"},
    {4, "ALTER TABLE exit_samples DROP PRIMARY KEY, ADD PRIMARY KEY (at, share)"},
    /* 5: the cancelled state, the owner of a manual case, the operation's
     * trace context and its caller's deadline; each call's trace and span
     * ids. The state CHECK is dropped and added again (two statements, each
     * safe to run again). */
    {5, "ALTER TABLE operations ADD COLUMN IF NOT EXISTS assignee VARBINARY(255) NOT NULL "
        "DEFAULT '', ADD COLUMN IF NOT EXISTS traceparent VARCHAR(55) " TEXT_ASCII " NOT NULL "
        "DEFAULT '', ADD COLUMN IF NOT EXISTS caller_deadline_at BIGINT NOT NULL DEFAULT 0"},
    {5, "ALTER TABLE operations DROP CONSTRAINT IF EXISTS ops_state"},
    {5, "ALTER TABLE operations ADD CONSTRAINT ops_state CHECK (state IN ('pending','in_flight',"
        "'retry_wait','unknown','succeeded','rejected','manual','cancelled'))"},
    {5, "ALTER TABLE calls ADD COLUMN IF NOT EXISTS trace_id VARCHAR(32) " TEXT_ASCII " NOT NULL "
        "DEFAULT '', ADD COLUMN IF NOT EXISTS span_id VARCHAR(16) " TEXT_ASCII " NOT NULL "
        "DEFAULT ''"},
    /* 6: a call's start is when its request went on the wire; the hand-off
     * to the transport is kept beside it (the difference is the connect).
     * Rows from before say -1 (not recorded); a claim writes 0 (not handed
     * over yet) */
    {6, "ALTER TABLE calls ADD COLUMN IF NOT EXISTS handoff_mono BIGINT NOT NULL DEFAULT -1"},
    {6, "ALTER TABLE calls ADD COLUMN IF NOT EXISTS handoff_wall BIGINT NOT NULL DEFAULT -1"},
    /* 7: a provider-wide hold one share saw, for every share of the account */
    {7, "CREATE TABLE IF NOT EXISTS exit_hold ("
        "  id TINYINT NOT NULL PRIMARY KEY,"
        "  until_wall BIGINT NOT NULL,"
        "  CONSTRAINT hold_one CHECK (id = 1)"
        ") ENGINE=InnoDB"},
    /* 8: retention and counters (docs/design.md, "Retention"): the final
     * states and the call log counted in the transactions that change them,
     * so /metrics costs the same at any size; final operations past
     * retention may be deleted with their calls, but only by a prune: the
     * triggers let a DELETE through only while the prune's permit row
     * exists (inside its own transaction: no other session sees it) and only
     * for a final operation older than its cutoff, or a call of one. Audit
     * rows stay undeletable; an operation with audit rows cannot go (its
     * foreign key). */
    {8, "CREATE TABLE IF NOT EXISTS counters ("
        "  name VARCHAR(32) " TEXT_ASCII " NOT NULL PRIMARY KEY,"
        "  n BIGINT NOT NULL"
        ") ENGINE=InnoDB"},
    {8, "INSERT IGNORE INTO counters (name, n) SELECT 'succeeded', COUNT(*) FROM operations "
        "WHERE state = 'succeeded'"},
    {8, "INSERT IGNORE INTO counters (name, n) SELECT 'rejected', COUNT(*) FROM operations "
        "WHERE state = 'rejected'"},
    {8, "INSERT IGNORE INTO counters (name, n) SELECT 'calls', COUNT(*) FROM calls"},
    {8, "INSERT IGNORE INTO counters (name, n) VALUES ('pruned_operations', 0), "
        "('pruned_calls', 0)"},
    {8, "CREATE TABLE IF NOT EXISTS prune_permit ("
        "  id TINYINT NOT NULL PRIMARY KEY,"
        "  before_at BIGINT NOT NULL,"
        "  CONSTRAINT permit_one CHECK (id = 1)"
        ") ENGINE=InnoDB"},
    {8, "ALTER TABLE operations ADD INDEX IF NOT EXISTS ops_state_updated (state, updated_at, id)"},
    {8, "DROP TRIGGER IF EXISTS operations_no_delete"},
    {8, "CREATE TRIGGER IF NOT EXISTS operations_no_delete BEFORE DELETE ON operations "
        "FOR EACH ROW BEGIN IF NOT EXISTS (SELECT 1 FROM prune_permit p "
        "WHERE OLD.state IN ('succeeded','rejected') AND OLD.updated_at < p.before_at) THEN "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'operations are deleted only by a prune'; "
        "END IF; END"},
    {8, "DROP TRIGGER IF EXISTS calls_no_delete"},
    {8, "CREATE TRIGGER IF NOT EXISTS calls_no_delete BEFORE DELETE ON calls "
        "FOR EACH ROW BEGIN IF NOT EXISTS (SELECT 1 FROM prune_permit p JOIN operations o "
        "ON o.id = OLD.op_id WHERE o.state IN ('succeeded','rejected') "
        "AND o.updated_at < p.before_at) THEN "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'calls are deleted only with their "
        "operation'; END IF; END"},
    /* 9: the console's timeline: the backlog by state in every sample, and
     * the API's admission refusals per second (both pruned like samples).
     * Every step may run again. */
    {9, "ALTER TABLE exit_samples"
        "  ADD COLUMN IF NOT EXISTS n_pending INT UNSIGNED NOT NULL DEFAULT 0,"
        "  ADD COLUMN IF NOT EXISTS n_in_flight INT UNSIGNED NOT NULL DEFAULT 0,"
        "  ADD COLUMN IF NOT EXISTS n_retry_wait INT UNSIGNED NOT NULL DEFAULT 0,"
        "  ADD COLUMN IF NOT EXISTS n_unknown INT UNSIGNED NOT NULL DEFAULT 0,"
        "  ADD COLUMN IF NOT EXISTS n_manual INT UNSIGNED NOT NULL DEFAULT 0"},
    {9, "CREATE TABLE IF NOT EXISTS admission_refusals ("
        "  at BIGINT NOT NULL PRIMARY KEY,"
        "  refused INT UNSIGNED NOT NULL"
        ") ENGINE=InnoDB"},
    /* 10: the refund's optional reason and metadata (a JSON object, keys
     * sorted), part of the request payload like payment_id; UTF-8 bytes */
    {10, "ALTER TABLE operations ADD COLUMN IF NOT EXISTS refund_reason VARBINARY(200) NOT NULL "
         "DEFAULT ''"},
    {10, "ALTER TABLE operations ADD COLUMN IF NOT EXISTS metadata VARBINARY(1024) NOT NULL "
         "DEFAULT ''"},
    /* 11: provider accounts (issue 26): every operation and call names its
     * account, today's rows the one account `default`; the exit's indexes
     * lead with the account, so one account's backlog never slows another's
     * picks (ops_state_accepted stays for the counts, the manual list and
     * the outbox); shares, split, hold and samples are kept per account.
     * Every step may run again. */
    {11, "ALTER TABLE operations ADD COLUMN IF NOT EXISTS account VARCHAR(32) " TEXT_ASCII
         " NOT NULL DEFAULT 'default'"},
    {11, "ALTER TABLE calls ADD COLUMN IF NOT EXISTS account VARCHAR(32) " TEXT_ASCII
         " NOT NULL DEFAULT 'default'"},
    {11, "ALTER TABLE operations"
         "  ADD INDEX IF NOT EXISTS ops_acct_accepted (account, state, accepted_at, id),"
         "  ADD INDEX IF NOT EXISTS ops_acct_due (account, state, next_run_at),"
         "  ADD INDEX IF NOT EXISTS ops_acct_deadline (account, state, deadline_at),"
         "  ADD INDEX IF NOT EXISTS ops_acct_key (account, state, key_first_used),"
         "  DROP INDEX IF EXISTS ops_state_due,"
         "  DROP INDEX IF EXISTS ops_state_deadline,"
         "  DROP INDEX IF EXISTS ops_state_key"},
    {11, "ALTER TABLE exit_shares ADD COLUMN IF NOT EXISTS account VARCHAR(32) " TEXT_ASCII
         " NOT NULL DEFAULT 'default' FIRST"},
    {11, "ALTER TABLE exit_shares DROP PRIMARY KEY, ADD PRIMARY KEY (account, share)"},
    {11, "ALTER TABLE exit_split DROP CONSTRAINT IF EXISTS split_one"},
    {11, "ALTER TABLE exit_split ADD COLUMN IF NOT EXISTS account VARCHAR(32) " TEXT_ASCII
         " NOT NULL DEFAULT 'default' FIRST"},
    {11, "ALTER TABLE exit_split DROP PRIMARY KEY, DROP COLUMN IF EXISTS id,"
         "  ADD PRIMARY KEY (account)"},
    {11, "ALTER TABLE exit_hold DROP CONSTRAINT IF EXISTS hold_one"},
    {11, "ALTER TABLE exit_hold ADD COLUMN IF NOT EXISTS account VARCHAR(32) " TEXT_ASCII
         " NOT NULL DEFAULT 'default' FIRST"},
    {11, "ALTER TABLE exit_hold DROP PRIMARY KEY, DROP COLUMN IF EXISTS id,"
         "  ADD PRIMARY KEY (account)"},
    {11, "ALTER TABLE exit_samples ADD COLUMN IF NOT EXISTS account VARCHAR(32) " TEXT_ASCII
         " NOT NULL DEFAULT 'default' FIRST"},
    {11, "ALTER TABLE exit_samples DROP PRIMARY KEY, ADD PRIMARY KEY (account, at, share),"
         "  ADD INDEX IF NOT EXISTS samples_at (at)"},
    /* 12: the events' outbox (store_events.h): one row per announced change
     * of state, written in the change's transaction. A writer updates the
     * 'events' counter row first and holds its lock to COMMIT, so ids are
     * taken in commit order. No foreign key: a prune may delete the
     * operation, its events stay. */
    {12, "CREATE TABLE IF NOT EXISTS events ("
         "  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
         "  op_id BIGINT NOT NULL,"
         "  operation_id VARCHAR(128) " TEXT_ASCII " NOT NULL,"
         "  at BIGINT NOT NULL,"
         "  state VARCHAR(16) " TEXT_ASCII " NOT NULL,"
         "  from_state VARCHAR(16) " TEXT_ASCII " NOT NULL,"
         "  reason VARCHAR(32) " TEXT_ASCII " NOT NULL,"
         "  refund_id VARBINARY(127) NOT NULL,"
         "  amount BIGINT NOT NULL,"
         "  currency VARCHAR(3) " TEXT_ASCII " NOT NULL,"
         "  delivery TINYINT NOT NULL DEFAULT 0,"
         "  attempts INT UNSIGNED NOT NULL DEFAULT 0,"
         "  next_at BIGINT NOT NULL DEFAULT 0,"
         "  delivered_at BIGINT NOT NULL DEFAULT 0,"
         "  last_error VARBINARY(255) NOT NULL DEFAULT '',"
         "  INDEX events_delivery (delivery, id),"
         "  CONSTRAINT events_delivery_word CHECK (delivery IN (0, 1, 2))"
         ") ENGINE=InnoDB"},
    {12, "INSERT IGNORE INTO counters (name, n) VALUES ('events', 0)"},
    /* 13: run-time account controls (issue 26 §5), a step of its own: what
     * an operator set per account (rate, in-flight cap, paused; 0: the
     * config's), and the account audit trail of every change, append-only
     * as `audit` is (its triggers are guards: guards_check() makes any that
     * is missing and says which it cannot). Every step may run again. */
    {13, "CREATE TABLE IF NOT EXISTS account_controls ("
         "  account VARCHAR(32) " TEXT_ASCII " NOT NULL PRIMARY KEY,"
         "  starts_per_second DOUBLE NOT NULL,"
         "  max_in_flight INT UNSIGNED NOT NULL,"
         "  paused TINYINT NOT NULL,"
         "  changed_at BIGINT NOT NULL,"
         "  changed_by VARBINARY(255) NOT NULL,"
         "  CONSTRAINT controls_rate CHECK (starts_per_second >= 0),"
         "  CONSTRAINT controls_paused CHECK (paused IN (0, 1))"
         ") ENGINE=InnoDB"},
    {13, "CREATE TABLE IF NOT EXISTS account_audit ("
         "  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
         "  account VARCHAR(32) " TEXT_ASCII " NOT NULL,"
         "  at BIGINT NOT NULL,"
         "  action VARBINARY(31) NOT NULL,"
         "  principal VARBINARY(255) NOT NULL,"
         "  reason VARBINARY(255) NOT NULL,"
         "  detail VARBINARY(255) NOT NULL,"
         "  KEY account_audit_account (account, id)"
         ") ENGINE=InnoDB"},
    {13, "CREATE TRIGGER IF NOT EXISTS account_audit_no_delete BEFORE DELETE ON account_audit "
         "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'account audit is append-only'"},
    {13, "CREATE TRIGGER IF NOT EXISTS account_audit_no_update BEFORE UPDATE ON account_audit "
         "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'account audit is append-only'"},
    /* 14: a refund's own notify_url (core/url_allow.h), kept with it and
     * copied into each of its events with the account, so that a delivery
     * goes where the event says without reading the operation. */
    {14, "ALTER TABLE operations ADD COLUMN IF NOT EXISTS notify_url VARCHAR(512) " TEXT_ASCII
         " NOT NULL DEFAULT ''"},
    {14, "ALTER TABLE events ADD COLUMN IF NOT EXISTS account VARCHAR(32) " TEXT_ASCII
         " NOT NULL DEFAULT 'default', ADD COLUMN IF NOT EXISTS notify_url VARCHAR(512) " TEXT_ASCII
         " NOT NULL DEFAULT ''"},
    /* 15: who submitted each operation (the API credential's name), so that
     * an intake-only credential reads and cancels only its own; '' for the
     * rows from before: no owner, readable by every reader as they were. */
    {15, "ALTER TABLE operations ADD COLUMN IF NOT EXISTS submitted_by VARCHAR(64) " TEXT_ASCII
         " NOT NULL DEFAULT ''"},
    {15, "ALTER TABLE events ADD COLUMN IF NOT EXISTS submitted_by VARCHAR(64) " TEXT_ASCII
         " NOT NULL DEFAULT ''"},
    /* 16: a refund the provider reports as pending (core/policy.h): the
     * wall time of its first processing answer (0: not pending) and the
     * polls made since, counted against retry.pending_max_polls. */
    {16, "ALTER TABLE operations ADD COLUMN IF NOT EXISTS pending_since BIGINT NOT NULL "
         "DEFAULT 0, ADD COLUMN IF NOT EXISTS pending_polls INT UNSIGNED NOT NULL DEFAULT 0"},
    /* 17: a standby's wish for a share (store_share_want): a count it moves
     * while it waits, read by the owners (docs/design.md, "Orphaned
     * shares"). */
    {17, "ALTER TABLE exit_split ADD COLUMN IF NOT EXISTS want_seq BIGINT NOT NULL DEFAULT 0"},
    /* 18: an operation found by the provider's refund id within its account
     * (store_find_by_refund_id: a notification naming only Adyen's
     * pspReference) without a scan. */
    {18, "ALTER TABLE operations ADD INDEX IF NOT EXISTS ops_acct_refund (account, refund_id)"},
};
#define MIGRATION_STEPS ((int)(sizeof(migrations) / sizeof(migrations[0])))
#define SCHEMA_VERSION  18

static pthread_once_t library_once = PTHREAD_ONCE_INIT;
static int library_status;

static void library_init(void)
{
        library_status = mysql_library_init(0, NULL, NULL) == 0 ? 0 : TG_ESTORE;
}

/* ---- url, open, migrate, close ---------------------------------------------- */

/* user[:password]@host[:port]/db[?key=value&...] */
static int parse_where(struct mysql_store *s, const char *where)
{
        const char *at = strrchr(where, '@');
        const char *hostpart, *slash, *qmark, *colon;
        char params[STORE_URL_MAX] = "";
        char port[16];
        const char *env;

        if (!at)
                return TG_EINVAL;
        colon = memchr(where, ':', (size_t)(at - where));
        if (colon) {
                if (!store_url_copy(s->user, sizeof(s->user), where, (size_t)(colon - where)) ||
                    !store_url_copy(s->password, sizeof(s->password), colon + 1,
                                    (size_t)(at - colon - 1)))
                        return TG_EINVAL;
        } else if (!store_url_copy(s->user, sizeof(s->user), where, (size_t)(at - where))) {
                return TG_EINVAL;
        }
        if (!s->user[0] || !store_url_decode(s->user) || !store_url_decode(s->password))
                return TG_EINVAL;
        hostpart = at + 1;
        slash = strchr(hostpart, '/');
        if (!slash)
                return TG_EINVAL;
        colon = memchr(hostpart, ':', (size_t)(slash - hostpart));
        s->port = 3306;
        if (colon) {
                int64_t p = 0;

                if (!store_url_copy(s->host, sizeof(s->host), hostpart,
                                    (size_t)(colon - hostpart)) ||
                    !store_url_copy(port, sizeof(port), colon + 1, (size_t)(slash - colon - 1)) ||
                    !store_mysql_parse_i64(port, &p) || p < 1 || p > 65535)
                        return TG_EINVAL;
                s->port = (unsigned)p;
        } else if (!store_url_copy(s->host, sizeof(s->host), hostpart,
                                   (size_t)(slash - hostpart))) {
                return TG_EINVAL;
        }
        qmark = strchr(slash + 1, '?');
        if (qmark) {
                if (!store_url_copy(s->dbname, sizeof(s->dbname), slash + 1,
                                    (size_t)(qmark - slash - 1)) ||
                    !store_url_copy(params, sizeof(params), qmark + 1, strlen(qmark + 1)))
                        return TG_EINVAL;
        } else if (!store_url_copy(s->dbname, sizeof(s->dbname), slash + 1, strlen(slash + 1))) {
                return TG_EINVAL;
        }
        if (!store_url_name_ok(s->dbname, DB_NAME_MAX) || (!s->host[0] && !qmark))
                return TG_EINVAL;

        /* key=value&key=value, parsed without strtok */
        for (char *p = params; *p;) {
                char *amp = strchr(p, '&');
                char *eq;

                if (amp)
                        *amp = '\0';
                eq = strchr(p, '=');
                if (!eq)
                        return TG_EINVAL;
                *eq = '\0';
                if (!store_url_decode(eq + 1))
                        return TG_EINVAL;
                if (strcmp(p, "password_file") == 0) {
                        int r = store_url_read_password(eq + 1, s->password, sizeof(s->password));

                        if (r < 0) {
                                snprintf(s->last_error, sizeof(s->last_error),
                                         "cannot read the password_file %s", eq + 1);
                                return r;
                        }
                } else if (strcmp(p, "socket") == 0) {
                        if (!store_url_copy(s->socket, sizeof(s->socket), eq + 1, strlen(eq + 1)))
                                return TG_EINVAL;
                } else {
                        return TG_EINVAL;
                }
                if (!amp)
                        break;
                p = amp + 1;
        }
        env = getenv("TG_MYSQL_PASSWORD");
        if (!s->password[0] && env &&
            !store_url_copy(s->password, sizeof(s->password), env, strlen(env)))
                return TG_EINVAL;
        return 0;
}

/* sql, a trigger's CREATE or DROP, just failed because the server does not
 * let this user run it: the server's code, else 0. */
static unsigned trigger_refused(struct mysql_store *s, const char *sql)
{
        unsigned code = s->db ? mysql_errno(s->db) : 0;

        if (strncmp(sql, "CREATE TRIGGER ", 15) != 0 && strncmp(sql, "DROP TRIGGER ", 13) != 0)
                return 0;
        return code == ER_BINLOG_CREATE_ROUTINE_NEED_SUPER || code == ER_TABLEACCESS_DENIED_ERROR
                   ? code
                   : 0;
}

static int migrate_steps(struct mysql_store *s)
{
        MYSQL_RES *res;
        int64_t version = 0;
        bool null = false;
        int r;

        r = store_mysql_exec(s, "CREATE TABLE IF NOT EXISTS schema_version ("
                                "id TINYINT NOT NULL PRIMARY KEY, version INT NOT NULL,"
                                "CONSTRAINT schema_one CHECK (id = 1)) ENGINE=InnoDB");
        if (r == 0)
                r = store_mysql_exec(
                    s, "INSERT IGNORE INTO schema_version (id, version) VALUES (1, 0)");
        if (r == 0)
                r = store_mysql_query(s, &res, "SELECT version FROM schema_version WHERE id = 1");
        if (r == 0)
                r = store_mysql_one_i64(res, &version, &null);
        if (r < 0)
                return r;
        if (null || version > SCHEMA_VERSION)
                return TG_ESTORE; /* written by a newer tollgate */
        for (int v = (int)version + 1; v <= SCHEMA_VERSION; v++) {
                for (int i = 0; i < MIGRATION_STEPS && r == 0; i++) {
                        if (migrations[i].version != v)
                                continue;
                        r = store_mysql_exec(s, "%s", migrations[i].sql);
                        /* a trigger needs SUPER when the server writes a
                         * binlog without log_bin_trust_function_creators,
                         * and the TRIGGER privilege: the step goes on, and
                         * guards_check() says so */
                        if (r < 0 && trigger_refused(s, migrations[i].sql))
                                r = 0;
                }
                if (r == 0)
                        r = store_mysql_exec(
                            s, "UPDATE schema_version SET version = %I WHERE id = 1", (int64_t)v);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- the no-delete guards ------------------------------------------------ */

#define GUARD_CREATE "CREATE TRIGGER IF NOT EXISTS "

/* The triggers that keep "never deleted" and "append-only" (migrations[]
 * holds their SQL; the last statement of each name is the current one). */
static const char *const guards[] = {"operations_no_delete",    "calls_no_delete",
                                     "audit_no_delete",         "audit_no_update",
                                     "account_audit_no_delete", "account_audit_no_update"};
#define GUARD_COUNT ((int)(sizeof(guards) / sizeof(guards[0])))

static const char *guard_sql(const char *name)
{
        size_t skip = strlen(GUARD_CREATE), n = strlen(name);
        const char *sql = NULL;

        for (int i = 0; i < MIGRATION_STEPS; i++) {
                const char *m = migrations[i].sql;

                if (strncmp(m, GUARD_CREATE, skip) == 0 && strncmp(m + skip, name, n) == 0 &&
                    m[skip + n] == ' ')
                        sql = m;
        }
        return sql;
}

static int guard_exists(struct mysql_store *s, const char *name, bool *ret_exists)
{
        MYSQL_RES *res;
        int64_t n = 0;
        bool null = false;
        int r = store_mysql_query(s, &res,
                                  "SELECT COUNT(*) FROM information_schema.triggers "
                                  "WHERE trigger_schema = DATABASE() AND trigger_name = %S",
                                  name);

        if (r == 0)
                r = store_mysql_one_i64(res, &n, &null);
        if (r == 0)
                *ret_exists = !null && n > 0;
        return r;
}

/* Every open (under the migration lock) creates the guards that are
 * missing: a step skipped them on a server that writes a binlog and a user
 * without SUPER (migrate_steps), and once the operator has fixed the server
 * the next start puts them in place. What still cannot be created is said
 * in base.unkept (store_unkept()), with the fix; the daemon refuses to start
 * on it unless told otherwise. */
static int guards_check(struct mysql_store *s)
{
        char missing[128] = "";
        unsigned why = 0;

        for (int i = 0; i < GUARD_COUNT; i++) {
                const char *sql = guard_sql(guards[i]);
                bool exists = false;
                int r;

                if (!sql)
                        return TG_ESTORE;
                r = guard_exists(s, guards[i], &exists);
                if (r < 0)
                        return r;
                if (exists)
                        continue;
                r = store_mysql_exec(s, "%s", sql);
                if (r == 0)
                        continue;
                why = trigger_refused(s, sql);
                if (!why)
                        return r;
                snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
                         missing[0] ? ", " : "", guards[i]);
        }
        s->base.unkept[0] = '\0';
        if (why == ER_BINLOG_CREATE_ROUTINE_NEED_SUPER)
                snprintf(s->base.unkept, sizeof(s->base.unkept),
                         "the MariaDB store %s lacks its no-delete triggers (%s): the server "
                         "writes a binary log and user %s has no SUPER, so it may not create "
                         "them; fix: SET GLOBAL log_bin_trust_function_creators = 1 (and in "
                         "the server's config), or grant SUPER, then start again (tollgate "
                         "creates them at start)",
                         s->dbname, missing, s->user);
        else if (why)
                snprintf(s->base.unkept, sizeof(s->base.unkept),
                         "the MariaDB store %s lacks its no-delete triggers (%s): user %s may not "
                         "create them; fix: GRANT TRIGGER ON `%s`.* TO %s, then start again "
                         "(tollgate creates them at start)",
                         s->dbname, missing, s->user, s->dbname, s->user);
        return 0;
}

static int migrate(struct mysql_store *s)
{
        char name[LOCK_NAME_MAX + 1];
        MYSQL_RES *res;
        int64_t got = 0;
        bool null = false;
        int r;

        store_mysql_lock_name_for("tollgate_migrate_", s->dbname, name, sizeof(name));
        r = store_mysql_query(s, &res, "SELECT GET_LOCK(%S, %I)", name, (int64_t)MIGRATE_WAIT_S);
        if (r == 0)
                r = store_mysql_one_i64(res, &got, &null);
        if (r < 0)
                return r;
        if (null || got != 1)
                return TG_EBUSY;
        r = migrate_steps(s);
        if (r == 0)
                r = guards_check(s);
        if (s->db)
                (void)store_mysql_exec(s, "SELECT RELEASE_LOCK(%S)", name);
        return r;
}

/* ---- the queries made from the transition table ------------------------- */

/* One index probe of a state ('@': its word, store_union_sql()). */
#define OLDEST_OF "SELECT MIN(accepted_at) AS m FROM operations WHERE state = '@'"

/* The picks and batches of store_mysql_rows.c, as formats for the SQL
 * builder: the state lists are the transition table's (core/policy.h), the
 * rest is policy_is_due(), policy_sweep() and the recovery's batch in SQL. */
static int make_queries(struct mysql_store *s)
{
        struct store_server_lists l;
        const char *first = l.first, *again = l.again, *waiting = l.waiting, *flight = l.flight;
        const char *outbox = l.outbox, *key_old = l.key_old, *due = l.due;
        char counts[768], open_oldest[384], all_oldest[512], counters[128];
        char backlog[STORE_SERVER_STATES_MAX];
        int n[MQ_COUNT];

        store_server_lists_make(&l);
        store_state_list_sql(store_open_states() | POLICY_STATE_BIT(OP_MANUAL), backlog,
                             sizeof(backlog));
#define Q(id) s->q[id], sizeof(s->q[id])
        n[MQ_PICK_FIRST] = snprintf(Q(MQ_PICK_FIRST),
                                    "SELECT " OP_COLS " FROM operations "
                                    "FORCE INDEX (ops_acct_accepted) "
                                    "WHERE account = %%S AND %s AND attempt_limit > 0 "
                                    "AND deadline_at > %%I "
                                    "ORDER BY accepted_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
                                    first);
        n[MQ_PICK_FIRST_AFTER] = snprintf(Q(MQ_PICK_FIRST_AFTER),
                                          "SELECT " OP_COLS " FROM operations "
                                          "FORCE INDEX (ops_acct_accepted) "
                                          "WHERE account = %%S AND %s AND (accepted_at > %%I OR "
                                          "(accepted_at = %%I AND id > %%I)) "
                                          "AND attempt_limit > 0 AND deadline_at > %%I "
                                          "ORDER BY accepted_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
                                          first);
        n[MQ_EARLIEST_DUE] = snprintf(Q(MQ_EARLIEST_DUE),
                                      "SELECT MIN(next_run_at) FROM operations "
                                      "FORCE INDEX (ops_acct_due) "
                                      "WHERE account = %%S AND %s",
                                      again);
        n[MQ_AGAIN_CANDIDATES] =
            snprintf(Q(MQ_AGAIN_CANDIDATES),
                     "SELECT id FROM operations FORCE INDEX (ops_acct_due) "
                     "WHERE account = %%S AND %s ORDER BY accepted_at, id LIMIT %%I",
                     due);
        n[MQ_AGAIN_LOCK] = snprintf(Q(MQ_AGAIN_LOCK),
                                    "SELECT " OP_COLS " FROM operations WHERE id = %%I AND %s "
                                    "FOR UPDATE SKIP LOCKED",
                                    due);
        n[MQ_ANY_PENDING] =
            snprintf(Q(MQ_ANY_PENDING),
                     "SELECT EXISTS (SELECT 1 FROM operations FORCE INDEX (ops_acct_accepted) "
                     "WHERE account = %%S AND %s)",
                     first);
        n[MQ_BATCH_DEADLINE] = snprintf(Q(MQ_BATCH_DEADLINE),
                                        "SELECT " OP_COLS " FROM operations "
                                        "FORCE INDEX (ops_acct_deadline) "
                                        "WHERE account = %%S AND %s "
                                        "AND deadline_at > 0 AND deadline_at < %%I LIMIT %%I "
                                        "FOR UPDATE",
                                        waiting);
        n[MQ_BATCH_KEY_AGE] = snprintf(Q(MQ_BATCH_KEY_AGE),
                                       "SELECT " OP_COLS " FROM operations "
                                       "FORCE INDEX (ops_acct_key) WHERE account = %%S AND %s "
                                       "LIMIT %%I FOR UPDATE",
                                       key_old);
        /* our share's older holders, or a share the split no longer has:
         * never another live share's rows */
        n[MQ_BATCH_RECOVER] = snprintf(
            Q(MQ_BATCH_RECOVER),
            "SELECT " OP_COLS " FROM operations "
            "FORCE INDEX (ops_acct_accepted) "
            "WHERE account = %%S AND %s AND ((share = %%U AND epoch < %%I) OR share >= %%U) "
            "LIMIT %%I FOR UPDATE",
            flight);
        /* attempt_limit = 0: inserted by an application, not taken in yet.
         * SKIP LOCKED: two dispatchers never take in the same row, and a
         * row still inside its writer's open transaction is not visible. */
        n[MQ_BATCH_OUTBOX] = snprintf(Q(MQ_BATCH_OUTBOX),
                                      "SELECT " OP_COLS " FROM operations "
                                      "FORCE INDEX (ops_state_accepted) WHERE %s AND "
                                      "attempt_limit = 0 ORDER BY accepted_at, id LIMIT %%I "
                                      "FOR UPDATE SKIP LOCKED",
                                      outbox);
        /* The backlog (and the final states without a counter) from their
         * index; the counted final ones and the prune totals from the
         * counters, so that a scrape does not grow with history. The oldest
         * open operation: one index probe per open state (and manual, for
         * the stats; not for a sample: manual is not open for the exit). */
        if (store_union_sql(store_indexed_states(),
                            "SELECT '@', COUNT(*) FROM operations FORCE INDEX "
                            "(ops_state_accepted) WHERE state = '@'",
                            counts, sizeof(counts)) < 0 ||
            store_counter_list_sql(counters, sizeof(counters)) < 0 ||
            store_union_sql(store_open_states(), OLDEST_OF, open_oldest, sizeof(open_oldest)) < 0 ||
            store_union_sql(store_open_states() | POLICY_STATE_BIT(OP_MANUAL), OLDEST_OF,
                            all_oldest, sizeof(all_oldest)) < 0)
                return TG_ESTORE;
        n[MQ_COUNT_BY_STATE] = snprintf(
            Q(MQ_COUNT_BY_STATE), "%s UNION ALL SELECT name, n FROM counters WHERE name IN (%s)",
            counts, counters);
        n[MQ_OLDEST_ALL] = snprintf(Q(MQ_OLDEST_ALL), "SELECT MIN(m) FROM (%s) AS o", all_oldest);
        /* a format: the sample's values, then the oldest open operation read
         * in the same statement; the backlog is counted by store_sample_put() */
        n[MQ_SAMPLE_PUT] = snprintf(Q(MQ_SAMPLE_PUT),
                                    "REPLACE INTO exit_samples (account, " SAMPLE_COLS ") "
                                    "SELECT %%S, %%I, %%I, %%U, %%U, %%U, %%U, %%I, (SELECT MIN(m) "
                                    "FROM (%s) AS o), %%L, %%U, %%U, %%U, %%U, %%U, %%U",
                                    open_oldest);
        /* a format: one account's backlog (%S), from the index that leads
         * with the account */
        n[MQ_COUNT_ACCOUNT] = snprintf(Q(MQ_COUNT_ACCOUNT),
                                       "SELECT state, COUNT(*) FROM operations FORCE INDEX "
                                       "(ops_acct_accepted) WHERE account = %%S AND %s "
                                       "GROUP BY state",
                                       backlog);
#undef Q
        for (int i = 0; i < MQ_COUNT; i++)
                if (n[i] < 0 || (size_t)n[i] >= sizeof(s->q[i]))
                        return TG_ESTORE;
        return 0;
}

static void store_mysql_close(struct store *store)
{
        struct mysql_store *s = M(store);

        if (!s)
                return;
        store_mysql_lock_drop_all(store); /* released, then closed: the next owner need not wait */
        store_mysql_conn_drop(&s->db);
        /* the password was ours only */
        memset(s->password, 0, sizeof(s->password));
        free(s);
}

static const struct store_ops store_mysql_ops;

/* Where the store is, for a message: host:port or the socket, the
 * database and the user; never the password. */
static void where_text(const struct mysql_store *s, char *dst, size_t size)
{
        if (s->socket[0])
                snprintf(dst, size, "socket %s, database %s, user %s", s->socket, s->dbname,
                         s->user);
        else
                snprintf(dst, size, "%s:%u, database %s, user %s", s->host, s->port, s->dbname,
                         s->user);
}

/* The database holds tollgate's schema (a read-only command opens only an
 * existing store). 0, TG_ENOTFOUND, or a failure. */
static int schema_exists(struct mysql_store *s)
{
        MYSQL_RES *res;
        int64_t n = 0;
        bool null = false;
        int r = store_mysql_query(s, &res,
                                  "SELECT COUNT(*) FROM information_schema.tables "
                                  "WHERE table_schema = DATABASE() AND table_name = 'operations'");

        if (r == 0)
                r = store_mysql_one_i64(res, &n, &null);
        if (r == 0 && (null || n == 0))
                r = TG_ENOTFOUND;
        return r;
}

int store_mysql_open(const char *where, const struct store_open_opts *opts,
                     struct store **ret_store)
{
        struct mysql_store *s;
        char place[700];
        int r;

        pthread_once(&library_once, library_init);
        if (library_status < 0)
                return library_status;
        s = calloc(1, sizeof(*s));
        if (!s)
                return TG_ENOMEM;
        s->base.ops = &store_mysql_ops;
        s->lock_wait_s = LOCK_WAIT_S;
        r = parse_where(s, where);
        if (r == 0)
                r = make_queries(s);
        if (r < 0)
                goto fail;

        r = store_mysql_connect_one(s, IO_TIMEOUT, true, &s->db);
        if (r == 0 && opts->existing)
                r = schema_exists(s);
        if (r == TG_ENOTFOUND && opts->existing) {
                where_text(s, place, sizeof(place));
                if (opts->err && opts->err_size)
                        snprintf(opts->err, opts->err_size,
                                 "no store at MariaDB %s (no tollgate schema there)", place);
                goto fail;
        }
        if (r == TG_ENOTFOUND) {
                /* no such database: create it (if the user may) */
                r = store_mysql_connect_one(s, IO_TIMEOUT, false, &s->db);
                if (r == 0)
                        r = store_mysql_exec(s,
                                             "CREATE DATABASE IF NOT EXISTS `%s` "
                                             "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
                                             s->dbname);
                if (r == 0 && mysql_select_db(s->db, s->dbname) != 0)
                        r = store_mysql_fail(s);
        }
        if (r == 0)
                r = migrate(s);
        if (r < 0)
                goto fail;
        *ret_store = &s->base;
        return 0;
fail:
        if (opts->err && opts->err_size && !opts->err[0]) {
                if (r != TG_EINVAL) {
                        where_text(s, place, sizeof(place));
                        snprintf(opts->err, opts->err_size,
                                 "cannot open the MariaDB store at %s: %s", place,
                                 s->last_error[0] ? s->last_error : tg_strerror(r));
                } else {
                        snprintf(opts->err, opts->err_size,
                                 "not a mysql url: mysql://user[:password]@host[:port]/db"
                                 "[?password_file=PATH&socket=PATH]");
                }
        }
        store_mysql_close(&s->base);
        return r;
}

/* MariaDB's lock waits are whole seconds (innodb_lock_wait_timeout): the
 * wait is rounded up, at least 1 s. Kept for the sessions of later
 * reconnects too. */
static int store_mysql_set_busy_timeout(struct store *store, int64_t ms)
{
        struct mysql_store *s = M(store);
        int64_t secs = (ms + 999) / 1000;

        s->lock_wait_s = secs < 1 ? 1 : (unsigned)secs;
        if (!s->db)
                return 0; /* the next connection gets it */
        return store_mysql_exec(s, "SET SESSION innodb_lock_wait_timeout = %U", s->lock_wait_s);
}

static const struct store_ops store_mysql_ops = {
    .name = "mysql",
    .close = store_mysql_close,
    STORE_BACKEND_OPS(store_mysql),
    .counter_add = store_mysql_counter_add,
    .prune_pick = store_mysql_prune_pick,
    .prune_delete = store_mysql_prune_delete,
    .set_busy_timeout = store_mysql_set_busy_timeout,
    .has_outbox = true,
};

#endif /* TG_HAVE_MARIADB */
