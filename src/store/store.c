/*
 * store — the backend-neutral half of the store, part one: picks a backend
 * from the url scheme, builds the SQL lists of the stored words (the words
 * themselves are core/names.h's, so every backend writes the same ones) and
 * holds the helpers every neutral file shares. store_exit.c (intake, the exit, the
 * sweeps, the outbox), store_actions.c (operators' actions, cancels,
 * outcomes from outside a call), store_owner.c (shares, epochs, recovery) and
 * store_read.c (the paging walks, stats, samples) write each operation of
 * store.h once over the backend primitives of store_backend.h.
 *
 * Invariants: a struct store always has a non-NULL ops table and a masked
 * url; no password ever reaches store_backend(); arguments a backend
 * receives have passed the checks here (non-NULL, enums in range, strings
 * terminated within their bounds).
 */
#include "store/store_backend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/encode.h"
#include "core/refund_validate.h"
#include "core/tg_error.h"

bool store_error_transient(int code)
{
        return code == TG_EBUSY || code == TG_EIO || code == -ENOSPC || code == -EROFS;
}

/* ---- stored names ---------------------------------------------------- */

/* The words of states, kinds, classes and reasons are core/names.h's: every
 * backend stores them through op_state_name() and its siblings. */

const char *store_counter_text(enum store_counter counter)
{
        switch (counter) {
        /* a final state's counter is named as its state */
        case STORE_COUNTER_SUCCEEDED:
                return op_state_name(OP_SUCCEEDED);
        case STORE_COUNTER_REJECTED:
                return op_state_name(OP_REJECTED);
        case STORE_COUNTER_CALLS:
                return "calls";
        case STORE_COUNTER_PRUNED_OPERATIONS:
                return "pruned_operations";
        case STORE_COUNTER_PRUNED_CALLS:
                return "pruned_calls";
        case STORE_COUNTER_EVENTS:
                return "events";
        case STORE_COUNTER_COUNT:
        default:
                return "?";
        }
}

void store_state_list_sql(unsigned states, char *dst, size_t size)
{
        size_t n = 0, count = 0;
        int w;

        for (unsigned st = 0; st < OP_STATE_COUNT; st++)
                count += (states & POLICY_STATE_BIT(st)) != 0;
        /* one state is an equality: that is the form SQLite matches against a
         * partial index's WHERE (a one-element IN is not) */
        w = snprintf(dst, size, count == 1 ? "state = " : "state IN (");
        for (unsigned st = 0; w >= 0 && (size_t)w < size - n && st < OP_STATE_COUNT; st++) {
                if (!(states & POLICY_STATE_BIT(st)))
                        continue;
                n += (size_t)w;
                w = snprintf(dst + n, size - n, "%s'%s'",
                             dst[n - 1] == '(' || count == 1 ? "" : ",",
                             op_state_name((enum op_state)st));
        }
        if (w >= 0 && (size_t)w < size - n) {
                n += (size_t)w;
                w = snprintf(dst + n, size - n, "%s", count == 1 ? "" : ")");
        }
        if (count == 0 || w < 0 || (size_t)w >= size - n)
                /* no state, or a buffer too small (the callers' fit every
                 * state): matching nothing is the safe answer */
                snprintf(dst, size, "0");
}

void store_copy_text(char *dst, size_t dst_size, const char *src)
{
        size_t n;

        if (dst_size == 0)
                return;
        if (!src)
                src = "";
        n = strnlen(src, dst_size - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
}

/* ---- argument checks (store_backend.h) ---------------------------------- */

bool store_text_ok(const char *s, size_t max)
{
        size_t n;

        if (!s)
                return false;
        n = strnlen(s, max + 1);
        return n >= 1 && n <= max;
}

bool store_buf_ok(const char *s, size_t size)
{
        return s && strnlen(s, size) < size;
}

/* ---- open / close ------------------------------------------------------ */

static const char mysql_scheme[] = "mysql://";
static const char pg_scheme[] = "postgresql://";
static const char pg_scheme_short[] = "postgres://";

static bool has_scheme(const char *url, const char *scheme)
{
        return strncmp(url, scheme, strlen(scheme)) == 0;
}

/* mysql://user:pass@host/db -> mysql://user:***@host/db (postgresql:// and
 * postgres:// alike); other urls as-is. The user part ends at the LAST '@',
 * as store_mysql.c and store_pg.c parse it, so that a password holding '@',
 * '/' or '?' is masked whole. */
static void mask_url(const char *url, char *dst, size_t dst_size)
{
        const char *auth = strstr(url, "://");
        const char *at, *colon;
        size_t head;

        store_copy_text(dst, dst_size, url);
        if (!auth || !(has_scheme(url, mysql_scheme) || has_scheme(url, pg_scheme) ||
                       has_scheme(url, pg_scheme_short)))
                return;
        auth += 3;
        at = strrchr(auth, '@');
        if (!at)
                return;
        colon = memchr(auth, ':', (size_t)(at - auth));
        if (!colon)
                return;
        head = (size_t)(colon - url) + 1;
        if (head + 4 >= dst_size)
                return;
        memcpy(dst + head, "***", 3);
        store_copy_text(dst + head + 3, dst_size - head - 3, at);
}

/* The message of a failed open, when the backend left none. */
static void open_error(const struct store_open_opts *o, const char *url, int r)
{
        char masked[STORE_URL_MAX];

        if (!o->err || o->err_size == 0 || o->err[0])
                return;
        mask_url(url, masked, sizeof(masked));
        if (r == TG_EINVAL)
                snprintf(o->err, o->err_size,
                         "%s: not a store url (sqlite://PATH, "
                         "mysql://user@host:port/db or postgresql://user@host:port/db)",
                         masked);
        else if (r == TG_EUNSUPPORTED)
                snprintf(o->err, o->err_size, "%s: this build has no %s support", masked,
                         has_scheme(url, mysql_scheme) ? "MariaDB" : "PostgreSQL");
        else
                snprintf(o->err, o->err_size, "%s: %s", masked, tg_strerror(r));
}

int store_open_ex(const char *url, const struct store_open_opts *opts, struct store **ret_store)
{
        static const char sqlite_scheme[] = "sqlite://";
        const struct store_open_opts none = {0};
        const struct store_open_opts *o = opts ? opts : &none;
        struct store *store = NULL;
        int r;

        if (o->err && o->err_size)
                o->err[0] = '\0';
        if (!url || !ret_store || strnlen(url, STORE_URL_MAX) >= STORE_URL_MAX)
                return TG_EINVAL;
        if (strncmp(url, sqlite_scheme, sizeof(sqlite_scheme) - 1) == 0) {
                const char *path = url + sizeof(sqlite_scheme) - 1;

                r = path[0] == '\0' ? TG_EINVAL : store_sqlite_open(path, o, &store);
        } else if (strncmp(url, mysql_scheme, sizeof(mysql_scheme) - 1) == 0) {
#ifdef TG_HAVE_MARIADB
                const char *where = url + sizeof(mysql_scheme) - 1;

                r = where[0] == '\0' ? TG_EINVAL : store_mysql_open(where, o, &store);
#else
                r = TG_EUNSUPPORTED; /* built without MariaDB Connector/C */
#endif
        } else if (has_scheme(url, pg_scheme) || has_scheme(url, pg_scheme_short)) {
#ifdef TG_HAVE_PG
                const char *where = url + (has_scheme(url, pg_scheme) ? strlen(pg_scheme)
                                                                      : strlen(pg_scheme_short));

                r = where[0] == '\0' ? TG_EINVAL : store_pg_open(where, o, &store);
#else
                r = TG_EUNSUPPORTED; /* built without libpq */
#endif
        } else {
                r = TG_EINVAL;
        }
        if (r < 0) {
                open_error(o, url, r);
                return r;
        }
        mask_url(url, store->url_masked, sizeof(store->url_masked));
        store_copy_text(store->account, sizeof(store->account), TG_ACCOUNT_DEFAULT);
        *ret_store = store;
        return 0;
}

const char *store_req_account(const struct refund_request *req)
{
        return req->account[0] ? req->account : TG_ACCOUNT_DEFAULT;
}

int store_use_account(struct store *store, const char *account)
{
        if (!store || !refund_account_name_ok(account))
                return TG_EINVAL;
        if (store->epoch != 0)
                return TG_ESTATE;
        store_copy_text(store->account, sizeof(store->account), account);
        store->backlog_known = false;
        return 0;
}

const char *store_account(const struct store *store)
{
        return store ? store->account : "";
}

unsigned store_indexed_states(void)
{
        unsigned set = 0;

        for (unsigned st = 0; st < OP_STATE_COUNT; st++)
                if (store_state_counter((enum op_state)st) < 0)
                        set |= POLICY_STATE_BIT(st);
        return set;
}

void store_find_refund_sql(const char *index, const char *account, const char *refund_id, char *dst,
                           size_t size)
{
        snprintf(dst, size,
                 "SELECT id FROM operations %s WHERE account = %s AND refund_id = %s ORDER BY id "
                 "LIMIT 2",
                 index, account, refund_id);
}

void store_provider_pending_sql(const char *index, const char *account, char *dst, size_t size)
{
        char states[128];

        store_state_list_sql(store_open_states(), states, sizeof(states));
        snprintf(dst, size,
                 "SELECT count(*) FROM operations %s WHERE account = %s AND pending_since > 0 "
                 "AND %s",
                 index, account, states);
}

unsigned store_open_states(void)
{
        unsigned set = 0;

        for (unsigned st = 0; st < OP_STATE_COUNT; st++)
                if (!policy_state_is_final((enum op_state)st) && st != OP_MANUAL)
                        set |= POLICY_STATE_BIT(st);
        return set;
}

int store_union_sql(unsigned states, const char *each, char *dst, size_t size)
{
        struct tg_strbuf sb;
        bool first = true;

        tg_strbuf_init(&sb, dst, size);
        for (unsigned st = 0; st < OP_STATE_COUNT; st++) {
                const char *at = each;
                if (!(states & POLICY_STATE_BIT(st)))
                        continue;
                if (!first)
                        tg_strbuf_adds(&sb, " UNION ALL ");
                first = false;
                for (const char *q = strchr(at, '@'); q; q = strchr(at, '@')) {
                        tg_strbuf_add(&sb, at, (size_t)(q - at));
                        tg_strbuf_adds(&sb, op_state_name((enum op_state)st));
                        at = q + 1;
                }
                tg_strbuf_adds(&sb, at);
        }
        return tg_strbuf_status(&sb);
}

static void add_quoted(struct tg_strbuf *sb, bool *first, const char *word)
{
        tg_strbuf_adds(sb, *first ? "'" : ", '");
        tg_strbuf_adds(sb, word);
        tg_strbuf_adds(sb, "'");
        *first = false;
}

int store_counter_list_sql(char *dst, size_t size)
{
        struct tg_strbuf sb;
        bool first = true;

        tg_strbuf_init(&sb, dst, size);
        for (unsigned st = 0; st < OP_STATE_COUNT; st++) {
                int c = store_state_counter((enum op_state)st);
                if (c >= 0)
                        add_quoted(&sb, &first, store_counter_text((enum store_counter)c));
        }
        add_quoted(&sb, &first, store_counter_text(STORE_COUNTER_PRUNED_OPERATIONS));
        add_quoted(&sb, &first, store_counter_text(STORE_COUNTER_PRUNED_CALLS));
        return tg_strbuf_status(&sb);
}

int store_open(const char *url, struct store **ret_store)
{
        return store_open_ex(url, NULL, ret_store);
}

void store_close(struct store *store)
{
        if (!store)
                return;
        store->ops->close(store);
}

const char *store_backend(const struct store *store)
{
        if (!store)
                return "none";
        return store->ops->name;
}

const char *store_url(const struct store *store)
{
        if (!store)
                return "";
        return store->url_masked;
}

bool store_split_same(const struct store_split *a, const struct store_split *b)
{
        double d = a->starts_per_second - b->starts_per_second;
        double m = a->starts_per_second > b->starts_per_second ? a->starts_per_second
                                                               : b->starts_per_second;

        if (d < 0)
                d = -d;
        return a->shares == b->shares && a->max_in_flight == b->max_in_flight && d <= m * 1e-9;
}

int store_set_busy_timeout(struct store *store, int64_t ms)
{
        if (!store || ms < 0 || ms > 3600 * 1000)
                return TG_EINVAL;
        if (!store->ops->set_busy_timeout)
                return TG_EUNSUPPORTED;
        return store->ops->set_busy_timeout(store, ms);
}

int store_listen(struct store *store, struct wake *bell)
{
        if (!store || !bell)
                return TG_EINVAL;
        if (!store->ops->bell_listen)
                return TG_EUNSUPPORTED;
        return store->ops->bell_listen(store, bell);
}

int store_bell_ring(struct store *store)
{
        return store->ops->bell_ring ? store->ops->bell_ring(store) : 0;
}
