/* TEMP-LEAD: not committed */
#include <string.h>
#include "core/tg_error.h"
#include "store/store.h"
static struct { char name[40]; struct account_controls c; } mem[32];
static struct account_controls *find(const char *a)
{
        for (int i = 0; i < 32; i++)
                if (strcmp(mem[i].name, a) == 0)
                        return &mem[i].c;
        for (int i = 0; i < 32; i++)
                if (!mem[i].name[0]) {
                        strcpy(mem[i].name, a);
                        return &mem[i].c;
                }
        return &mem[0].c;
}
int store_controls_get(struct store *store, const char *account, struct account_controls *ret)
{
        (void)store;
        *ret = *find(account);
        return 0;
}
int store_controls_set(struct store *store, const char *account, const struct account_controls *next,
                       const char *action, const char *principal, const char *reason, tg_wall_ms now,
                       struct account_controls *ret_prev)
{
        (void)store; (void)action; (void)reason;
        if (ret_prev)
                *ret_prev = *find(account);
        *find(account) = *next;
        find(account)->changed_at = now;
        strncpy(find(account)->changed_by, principal, sizeof(find(account)->changed_by) - 1);
        return 0;
}
int store_list_account_audit(struct store *store, const char *account, int64_t after_id, unsigned limit,
                             store_account_audit_fn fn, void *userdata)
{
        (void)store; (void)account; (void)after_id; (void)limit; (void)fn; (void)userdata;
        return 0;
}
