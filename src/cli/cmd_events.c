/*
 * cmd_events — `tollgate events list|redeliver`: the events' outbox
 * (store/store_events.h) from the store of the config. `list` prints the
 * events with id > --after, oldest first, one JSON object a line as GET
 * /v1/events serves them (with where each delivery stands); `redeliver ID`
 * makes a delivered or parked event due again now, attempts from zero (the
 * owner of share 0 delivers it within a scan).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/strnum.h"
#include "core/tg_error.h"
#include "daemon/notify.h"
#include "platform/clock.h"
#include "platform/options.h"
#include "store/store_events.h"

static const char events_about[] =
    "list: prints the events (what became of each refund, as delivered to notify.url and "
    "served by GET /v1/events) with id > --after, oldest first, one JSON object a line, "
    "with where each delivery stands (due, delivered, parked).\n\n"
    "redeliver ID: makes event ID due again now, its attempts from zero (a parked event, or "
    "one the receiver lost), audited in its account's audit trail as --operator (\"cli\" "
    "unless given).";

static const char *const deliveries[] = {"any", "due", "parked", "undelivered", NULL};

static int list(struct store *store, int64_t after, int64_t limit, int delivery)
{
        static const enum store_event_filter filters[] = {
            STORE_EVENTS_ALL, STORE_EVENTS_DUE, STORE_EVENTS_PARKED, STORE_EVENTS_UNDELIVERED};
        struct store_event *buf = calloc(100, sizeof(*buf));
        int r = buf ? 0 : TG_ENOMEM;

        while (r == 0 && limit > 0) {
                unsigned want = limit < 100 ? (unsigned)limit : 100, n = 0;

                r = store_events_list(store, after, filters[delivery], want, buf, &n);
                for (unsigned i = 0; r == 0 && i < n; i++) {
                        json_t *o = notify_event_json_delivery(&buf[i]);
                        char *text;

                        text = o ? json_dumps(o, JSON_COMPACT) : NULL;
                        json_decref(o);
                        if (!text) {
                                r = TG_ENOMEM;
                                break;
                        }
                        puts(text);
                        free(text);
                        after = buf[i].id;
                }
                if (r < 0 || n < want)
                        break;
                limit -= n;
        }
        free(buf);
        return r;
}

int cmd_events(int argc, char **argv)
{
        const char *config = NULL, *operator_name = NULL, *args[2] = {NULL, NULL};
        int64_t after = 0, limit = INT64_MAX;
        int delivery = 0;
        size_t nargs = 0;
        const struct opt opts[] = {
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &config,
             .required = true,
             .help = "the config file (its store is read)"},
            {.name = "after",
             .arg = "ID",
             .i64 = &after,
             .min = 0,
             .max = INT64_MAX,
             .help = "list: only events with an id above ID (0)"},
            {.name = "limit",
             .arg = "N",
             .i64 = &limit,
             .min = 1,
             .max = INT64_MAX,
             .help = "list: at most N events (all)"},
            {.name = "delivery",
             .choice = &delivery,
             .choices = deliveries,
             .help = "list: any (default), due, parked or undelivered"},
            {.name = "operator",
             .arg = "WHO",
             .string = &operator_name,
             .help = "redeliver: who, for the audit (cli)"},
        };
        const struct options_spec spec = {.prog = "tollgate events",
                                          .description = events_about,
                                          .synopsis = "<list|redeliver ID>",
                                          .max_args = 2,
                                          .opts = opts,
                                          .nopts = sizeof(opts) / sizeof(opts[0])};
        struct tg_config *cfg;
        struct store *store = NULL;
        int64_t id = 0;
        int r;

        r = options_parse(&spec, argc, argv, args, &nargs);
        if (r)
                return options_exit_status(r);
        if (nargs == 0 || strcmp(args[0], "list") == 0 ? nargs != 1
            : strcmp(args[0], "redeliver") == 0
                ? nargs != 2 || strnum_i64(args[1], 1, INT64_MAX, &id) < 0
                : true) {
                fprintf(stderr, "tollgate events: expected `list` or `redeliver ID` (an event id "
                                "from `list`)\n");
                return 2;
        }
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("events", config, cfg);
        if (r == 0)
                r = cli_open_store("events", cfg, &store);
        if (r == 0 && id == 0) {
                r = list(store, after, limit, delivery);
                if (r < 0)
                        fprintf(stderr, "tollgate events: cannot read the events: %s\n",
                                tg_strerror(r));
        } else if (r == 0) {
                r = store_event_redeliver(store, id,
                                          operator_name && operator_name[0] ? operator_name : "cli",
                                          clock_wall_now());
                if (r == TG_ENOTFOUND)
                        fprintf(stderr, "tollgate events: no event %lld\n", (long long)id);
                else if (r < 0)
                        fprintf(stderr, "tollgate events: cannot re-deliver: %s\n", tg_strerror(r));
                else
                        printf("event %lld is due again\n", (long long)id);
        }
        if (r < 0 && r != TG_ENOTFOUND)
                r = TG_ESTORE;
        fflush(stdout);
        store_close(store);
        config_release(cfg);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return options_exit_status(r);
}
