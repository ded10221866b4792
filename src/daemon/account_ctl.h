/*
 * account_ctl — an account's run-time controls (issue 26 §5): an operator
 * slows an account down, lowers its in-flight cap, or pauses and resumes
 * it, without a restart, through `tollgate account` or the admin API
 * (POST /v1/accounts/{account}). The controls live in the store
 * (store_controls_get/set: every dispatcher of the account reads the same
 * row once a second, a restart keeps them) and every change writes an
 * account audit row — who, when, from what to what — in the same
 * transaction.
 *
 * The configured exit.starts_per_second and exit.max_in_flight stay the
 * account's ceiling (the provider's contract; the transport's bound on open
 * calls is made from the configured cap): a control may lower them, never
 * raise them. With the account split into shares every share follows a
 * change: a rate moves every share to the new rate's grid from one instant
 * all of them compute from the row (daemon/exit.h, exit_switch_lead;
 * docs/design.md, "A rate change with shares"), a cap is split among them
 * as the configured one is, a pause stops them all.
 */
#ifndef TG_ACCOUNT_CTL_H
#define TG_ACCOUNT_CTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "daemon/config.h"
#include "store/store.h"

/* What a change sets; the rest stays as the store has it. A rate or cap
 * of 0 clears that control (the configured value is in force again). */
struct account_change {
        bool set_rate, set_cap, set_paused;
        double starts_per_second;
        unsigned max_in_flight;
        bool paused;
};

/* The account `name` of config and its view of the config (*ret_view); NULL
 * when config has no such account. */
const struct tg_account *account_ctl_find(const struct tg_config *config, const char *name,
                                          struct tg_config *ret_view);

/* 0 when next may be in force for the account whose view this is; else
 * TG_EINVAL, the field (*ret_field) and why (err). */
int account_ctl_check(const struct tg_config *view, const struct account_controls *next,
                      const char **ret_field, char *err, size_t err_size);

/* Reads the account's controls, applies change, checks them, writes them
 * with their audit row (action account_set, account_pause or
 * account_resume, by principal, for reason) and reads them back into
 * *ret_now. 0; TG_ENOTFOUND (no such account in config); TG_EINVAL with
 * *ret_field and err; or a store code. */
int account_ctl_change(struct store *store, const struct tg_config *config, const char *name,
                       const struct account_change *change, const char *principal,
                       const char *reason, tg_wall_ms now, struct account_controls *ret_now,
                       const char **ret_field, char *err, size_t err_size);

/* A reload's (SIGHUP's) exit.starts_per_second and exit.max_in_flight of
 * one account: the values the file held (was) and holds now (now). The
 * values the process started with stay the account's ceiling (the
 * transport's bound on open calls and the shares' grid are made from
 * them); a changed value at or under it becomes the account's run-time
 * control, as `tollgate account set` would set it (the ceiling itself
 * clears the control), audited with principal "sighup" and in force for
 * every dispatcher of the account from its next read of the controls. A
 * control already as wanted is left alone (no audit row: every process of
 * the account reloads the same file). 0 (done, or nothing to do);
 * TG_EINVAL with *ret_field ("starts_per_second" or "max_in_flight") and
 * err when the value cannot be in force without a restart (above the
 * ceiling); or a store code. */
struct account_file_values {
        double starts_per_second;
        unsigned max_in_flight;
};
int account_ctl_reload(struct store *store, const struct tg_config *config, const char *name,
                       const struct account_file_values *was, const struct account_file_values *now,
                       tg_wall_ms wall, const char **ret_field, char *err, size_t err_size);

/* {"account", "configured": {starts_per_second, max_in_flight, shares},
 * "controls": {starts_per_second|null, max_in_flight|null, paused,
 * changed_at|null, changed_by|null}, "in_force": {...}}: a new reference,
 * NULL when out of memory. */
json_t *account_ctl_json(const struct tg_config *view, const char *name,
                         const struct account_controls *controls);
/* One account audit row: {"id", "account", "at", "action", "by", "reason",
 * "detail": {"from", "to"}}. */
json_t *account_ctl_audit_json(const struct account_audit_record *audit);

#endif
