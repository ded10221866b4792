/*
 * account_ctl — an account's run-time controls as operators change them
 * (tollgate account, POST /v1/accounts/{account}): the change checked
 * against the account's config, written with its audit row
 * (store_controls_set), and the account shown. See account_ctl.h.
 */
#include "daemon/account_ctl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/exit.h"

const struct tg_account *account_ctl_find(const struct tg_config *config, const char *name,
                                          struct tg_config *ret_view)
{
        const struct tg_account *a = config_account_find(config, name);

        if (!a)
                return NULL;
        if (config->account_count == 1 && !a->declared)
                *ret_view = *config; /* the top level is the default account */
        else
                config_account_view(config, a, ret_view);
        return a;
}

static unsigned shares_of(const struct tg_config *view)
{
        return view->exit_shares > 0 ? view->exit_shares : 1;
}

int account_ctl_check(const struct tg_config *view, const struct account_controls *next,
                      const char **ret_field, char *err, size_t err_size)
{
        double ceiling = view->exit.starts_per_second;
        unsigned cap = view->exit.max_in_flight;

        if (!(next->starts_per_second >= 0) || next->starts_per_second > ceiling ||
            isinf(next->starts_per_second)) {
                *ret_field = "starts_per_second";
                snprintf(err, err_size,
                         "starts_per_second must be > 0 and at most the account's configured "
                         "exit.starts_per_second (%g), or null for the configured one",
                         ceiling);
                return TG_EINVAL;
        }
        if (next->max_in_flight > cap ||
            (next->max_in_flight > 0 && next->max_in_flight < shares_of(view))) {
                *ret_field = "max_in_flight";
                snprintf(err, err_size,
                         "max_in_flight must be between %u (exit.shares) and the account's "
                         "configured exit.max_in_flight (%u), or null for the configured one",
                         shares_of(view), cap);
                return TG_EINVAL;
        }
        return 0;
}

/* The rate in force under controls c. */
static double rate_in_force(const struct tg_config *view, const struct account_controls *c)
{
        return c->starts_per_second > 0 && c->starts_per_second < view->exit.starts_per_second
                   ? c->starts_per_second
                   : view->exit.starts_per_second;
}

/* Shares: a new rate while the shares may still be switching to the one
 * before (until the instant they all take it: daemon/exit.h) is refused, so
 * that every share sees each rate before the next comes and none starts on
 * a grid another never knew (docs/design.md, "A rate change with shares").
 * Judged from the account's last change of any kind (a cap or a pause also
 * stamps changed_at): at most a few seconds too careful. */
static int rate_change_pending(const struct tg_config *view, const struct account_controls *cur,
                               const struct account_controls *next, tg_wall_ms now, char *err,
                               size_t err_size)
{
        double rate = rate_in_force(view, cur);
        tg_mono_ns spacing = (tg_mono_ns)ceil(1e9 / rate) + view->exit.spacing_margin_ns;
        int64_t until;

        if (shares_of(view) <= 1 || cur->changed_at <= 0 || rate_in_force(view, next) == rate)
                return 0;
        until = pacer_switch_resume(cur->changed_at * TG_NS_PER_MS, exit_switch_lead(view), spacing,
                                    view->exit_clock_skew_ms * TG_NS_PER_MS) /
                    TG_NS_PER_MS +
                1;
        if (now >= until)
                return 0;
        snprintf(err, err_size,
                 "the account's %u shares (exit.shares) take its last change at %lld (Unix ms); "
                 "a new rate is accepted from %lld, %lld ms from now",
                 shares_of(view), (long long)until, (long long)until, (long long)(until - now));
        return TG_EAGAIN;
}

int account_ctl_change(struct store *store, const struct tg_config *config, const char *name,
                       const struct account_change *change, const char *principal,
                       const char *reason, tg_wall_ms now, struct account_controls *ret_now,
                       const char **ret_field, char *err, size_t err_size)
{
        struct tg_config *view = NULL;
        struct account_controls cur, next;
        const char *action;
        int r;

        *ret_field = NULL;
        err[0] = '\0';
        view = malloc(sizeof(*view));
        if (!view)
                return TG_ENOMEM;
        if (!account_ctl_find(config, name, view)) {
                free(view);
                return TG_ENOTFOUND;
        }
        r = store_controls_get(store, name, &cur);
        if (r < 0) {
                free(view);
                return r;
        }
        next = cur;
        if (change->set_rate)
                next.starts_per_second = change->starts_per_second;
        if (change->set_cap)
                next.max_in_flight = change->max_in_flight;
        if (change->set_paused)
                next.paused = change->paused;
        r = account_ctl_check(view, &next, ret_field, err, err_size);
        if (r == 0 && (r = rate_change_pending(view, &cur, &next, now, err, err_size)) < 0)
                *ret_field = "starts_per_second";
        free(view);
        if (r < 0)
                return r;
        action = change->set_paused && !change->set_rate && !change->set_cap
                     ? (change->paused ? "account_pause" : "account_resume")
                     : "account_set";
        r = store_controls_set(store, name, &next, action, principal, reason, now, NULL);
        if (r == 0)
                r = store_controls_get(store, name, ret_now);
        return r;
}

int account_ctl_reload(struct store *store, const struct tg_config *config, const char *name,
                       const struct account_file_values *was, const struct account_file_values *now,
                       tg_wall_ms wall, const char **ret_field, char *err, size_t err_size)
{
        struct tg_config *view = malloc(sizeof(*view));
        struct account_controls cur, next;
        struct account_change change = {0};
        char reason[160];
        int r;

        *ret_field = NULL;
        err[0] = '\0';
        if (!view)
                return TG_ENOMEM;
        if (!account_ctl_find(config, name, view)) {
                free(view);
                return TG_ENOTFOUND;
        }
        if (now->starts_per_second != was->starts_per_second) {
                change.set_rate = true;
                change.starts_per_second = now->starts_per_second;
                if (now->starts_per_second == view->exit.starts_per_second)
                        change.starts_per_second = 0; /* the ceiling: no control */
                if (now->starts_per_second > view->exit.starts_per_second) {
                        *ret_field = "starts_per_second";
                        snprintf(err, err_size,
                                 "a reload lowers the account's rate (a run-time control) but "
                                 "never raises it above the %g it was started with while it "
                                 "owns the account: restart every dispatcher of the account "
                                 "to raise the ceiling (docs/operating.md)",
                                 view->exit.starts_per_second);
                }
        }
        if (!*ret_field && now->max_in_flight != was->max_in_flight) {
                change.set_cap = true;
                change.max_in_flight = now->max_in_flight;
                if (now->max_in_flight == view->exit.max_in_flight)
                        change.max_in_flight = 0;
                if (now->max_in_flight > view->exit.max_in_flight) {
                        *ret_field = "max_in_flight";
                        snprintf(err, err_size,
                                 "a reload lowers the account's in-flight cap but never raises "
                                 "it above the %u it was started with (the transport's bound): "
                                 "restart to raise it",
                                 view->exit.max_in_flight);
                }
        }
        free(view);
        if (*ret_field)
                return TG_EINVAL;
        r = store_controls_get(store, name, &cur);
        if (r < 0)
                return r;
        next = cur;
        if (change.set_rate)
                next.starts_per_second = change.starts_per_second;
        if (change.set_cap)
                next.max_in_flight = change.max_in_flight;
        if (next.starts_per_second == cur.starts_per_second &&
            next.max_in_flight == cur.max_in_flight)
                return 0; /* another process of the account took this file already */
        snprintf(reason, sizeof(reason),
                 "config reload (SIGHUP): exit.starts_per_second %g, "
                 "exit.max_in_flight %u in the file",
                 now->starts_per_second, now->max_in_flight);
        return account_ctl_change(store, config, name, &change, "sighup", reason, wall, &next,
                                  ret_field, err, err_size);
}

json_t *account_ctl_json(const struct tg_config *view, const char *name,
                         const struct account_controls *c)
{
        unsigned shares = shares_of(view);
        double rate =
            c->starts_per_second > 0 ? c->starts_per_second : view->exit.starts_per_second;
        unsigned cap = c->max_in_flight > 0 ? c->max_in_flight : view->exit.max_in_flight;
        json_t *o = json_pack(
            "{s:s, s:{s:f, s:i, s:i}, s:{s:o, s:o, s:b, s:o, s:o}, s:{s:f, s:i, s:b}}", "account",
            name, "configured", "starts_per_second", view->exit.starts_per_second, "max_in_flight",
            (int)view->exit.max_in_flight, "shares", (int)shares, "controls", "starts_per_second",
            c->starts_per_second > 0 ? json_real(c->starts_per_second) : json_null(),
            "max_in_flight", c->max_in_flight > 0 ? json_integer(c->max_in_flight) : json_null(),
            "paused", c->paused, "changed_at",
            c->changed_at > 0 ? json_integer(c->changed_at) : json_null(), "changed_by",
            c->changed_by[0] ? json_string(c->changed_by) : json_null(), "in_force",
            "starts_per_second", rate, "max_in_flight", (int)cap, "paused", c->paused);

        return o;
}

json_t *account_ctl_audit_json(const struct account_audit_record *a)
{
        json_error_t jerr;
        json_t *detail = json_loads(a->detail, 0, &jerr);

        return json_pack("{s:I, s:s, s:I, s:s, s:s, s:s, s:o}", "id", (json_int_t)a->id, "account",
                         a->account, "at", (json_int_t)a->at, "action", a->action, "by",
                         a->principal, "reason", a->reason, "detail",
                         detail ? detail : json_string(a->detail));
}
