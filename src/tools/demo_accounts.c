/*
 * demo_accounts — `tollgate demo --accounts`: one tollgate, two provider
 * accounts, two providers. The stand-in of account "eu" goes through a
 * short incident (fast, slow past the call timeout, 503 with Retry-After,
 * fast again); the stand-in of account "us" stays healthy behind a
 * gateway limiter at us's own rate (whole milliseconds: it refuses any
 * start closer than the spacing). Refunds are fed to both accounts at once
 * through the intake API; the view shows, per account, what was fed,
 * settled and still open, and the starts of the last second. The summary
 * says, per account: refunds executed twice (none), the minimum start
 * spacing against what the account allows, and the refusals at us's door
 * (none: eu's incident never slowed or crowded us).
 *
 * Like the demo, it talks to the providers only through tollgate's exit;
 * its own HTTP goes to tollgate's API and to the stubs' /_stub routes, on
 * loopback, to processes it started itself; it reads the call log and the
 * operations from the store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/store.h"
#include "tools/demo_int.h"
#include "tools/tool_util.h"

#define ACCOUNTS 2

static const char eu_timeline[] = "fast 10s; slow:3500 20s; unavailable:5 15s; fast";

struct account_view {
        const char *name;
        double rate;      /* its exit.starts_per_second */
        double feed_rate; /* refunds fed per second */
        struct tool_proc stub;
        unsigned fed, failed_feeds;
        unsigned final[3]; /* succeeded, rejected, manual */
        unsigned starts_s;
        int64_t last_start, min_gap; /* POST starts, ns */
        unsigned posts, starts_prev;
};

struct run {
        struct account_view acct[ACCOUNTS];
        struct tool_proc tg;
        struct store *store;
        char config[512];
        int64_t last_call;
        bool *is_final; /* per fed refund, by account: acct * max + n */
        unsigned max_fed;
};

static int write_config(struct run *d, const char *token_path)
{
        FILE *f;

        snprintf(d->config, sizeof(d->config), "%s/tollgate.ini", d->tg.dir);
        f = fopen(d->config, "w");
        if (!f)
                return TG_EIO;
        fprintf(f,
                "[store]\nurl = sqlite://%s/tollgate.db\n"
                "[api]\nlisten = 127.0.0.1:%d\ntoken_file = %s\n"
                "[provider]\ntimeout_ms = 3000\n"
                /* the stand-ins share this machine's CPUs (see demo.c) */
                "[exit]\nstarts_per_second = %g\nmax_in_flight = 10\nspacing_margin_us = 5000\n"
                "[log]\nlevel = warn\n",
                d->tg.dir, d->tg.port, token_path, d->acct[0].rate);
        for (unsigned i = 0; i < ACCOUNTS; i++)
                fprintf(f,
                        "[account.%s]\nprovider.base_url = http://127.0.0.1:%d\n"
                        "exit.starts_per_second = %g\n",
                        d->acct[i].name, d->acct[i].stub.port, d->acct[i].rate);
        fclose(f);
        return 0;
}

static int start_stub(struct account_view *a, const char *stub_bin, double scale)
{
        char port_file[256], scale_text[32], limit[32];
        char *argv[16];
        int n = 0;

        if (tool_proc_init(&a->stub, "tg-demo-stub") < 0)
                return TG_EIO;
        snprintf(port_file, sizeof(port_file), "%s/port", a->stub.dir);
        snprintf(scale_text, sizeof(scale_text), "%g", scale);
        snprintf(limit, sizeof(limit), "%g", a->rate);
        argv[n++] = (char *)stub_bin;
        argv[n++] = "--listen";
        argv[n++] = "127.0.0.1:0";
        argv[n++] = "--port-file";
        argv[n++] = port_file;
        argv[n++] = "--query-mode";
        argv[n++] = "fast";
        if (strcmp(a->name, "eu") == 0) {
                argv[n++] = "--timeline";
                argv[n++] = (char *)eu_timeline;
                argv[n++] = "--time-scale";
                argv[n++] = scale_text;
        } else {
                argv[n++] = "--mode";
                argv[n++] = "fast";
                argv[n++] = "--limit-rate";
                argv[n++] = limit;
        }
        argv[n] = NULL;
        return tool_proc_start(&a->stub, argv, port_file, 10);
}

static int start_all(struct run *d, double scale)
{
        char stub_bin[1024], self[1024], token[256];
        int r = demo_binaries(stub_bin, self, sizeof(self));

        for (unsigned i = 0; r == 0 && i < ACCOUNTS; i++)
                r = start_stub(&d->acct[i], stub_bin, scale);
        if (r == 0 && tool_proc_init(&d->tg, "tg-demo") < 0)
                r = TG_EIO;
        if (r == 0)
                d->tg.port = tool_free_port();
        if (r == 0 && d->tg.port < 0)
                r = d->tg.port;
        if (r == 0)
                r = demo_token_file(d->tg.dir, token, sizeof(token));
        if (r == 0)
                r = write_config(d, token);
        if (r == 0) {
                char *argv[] = {self, "serve", "--config", d->config, NULL};
                r = tool_proc_start(&d->tg, argv, NULL, 0);
        }
        if (r == 0)
                r = demo_wait_healthy(d->tg.port);
        if (r == 0) {
                char url[600];
                snprintf(url, sizeof(url), "sqlite://%s/tollgate.db", d->tg.dir);
                r = store_open(url, &d->store);
        }
        return r;
}

static void stop_all(struct run *d)
{
        store_close(d->store);
        tool_proc_release(&d->tg);
        for (unsigned i = 0; i < ACCOUNTS; i++)
                tool_proc_release(&d->acct[i].stub);
}

static void op_id(const struct account_view *a, unsigned n, char *out, size_t size)
{
        snprintf(out, size, "%s-%05u", a->name, n);
}

/* Which account a call belongs to: its operation id's prefix. */
static struct account_view *account_of(struct run *d, const char *operation_id)
{
        for (unsigned i = 0; i < ACCOUNTS; i++) {
                size_t n = strlen(d->acct[i].name);
                if (strncmp(operation_id, d->acct[i].name, n) == 0 && operation_id[n] == '-')
                        return &d->acct[i];
        }
        return NULL;
}

static int on_call(const struct call_record *c, void *userdata)
{
        struct run *d = userdata;
        struct account_view *a = account_of(d, c->operation_id);

        d->last_call = c->id;
        if (!a || !c->sent || c->kind == TG_KIND_QUERY)
                return 0;
        a->posts++;
        if (a->last_start && c->start_mono - a->last_start < a->min_gap)
                a->min_gap = c->start_mono - a->last_start;
        if (c->start_mono > a->last_start)
                a->last_start = c->start_mono;
        return 0;
}

/* Reads the new calls and the state of every refund not final yet. */
static void refresh(struct run *d)
{
        struct op_record op;
        char id[64];

        store_list_calls(d->store, d->last_call, 100000, on_call, d);
        for (unsigned i = 0; i < ACCOUNTS; i++) {
                struct account_view *a = &d->acct[i];
                for (unsigned n = 0; n < a->fed && n < d->max_fed; n++) {
                        bool *done = &d->is_final[i * d->max_fed + n];
                        op_id(a, n, id, sizeof(id));
                        if (*done || store_get(d->store, id, &op) < 0)
                                continue;
                        *done = op.state == OP_SUCCEEDED || op.state == OP_REJECTED ||
                                op.state == OP_MANUAL;
                        if (*done)
                                a->final[op.state == OP_SUCCEEDED  ? 0
                                         : op.state == OP_REJECTED ? 1
                                                                   : 2]++;
                }
                a->starts_s = a->posts - a->starts_prev;
                a->starts_prev = a->posts;
        }
}

static unsigned open_of(const struct account_view *a)
{
        return a->fed - a->final[0] - a->final[1] - a->final[2];
}

static void draw(const struct run *d, double t)
{
        char mode[64];

        demo_stub_mode(d->acct[0].stub.port, mode, sizeof(mode));
        printf("t=%5.1fs", t);
        for (unsigned i = 0; i < ACCOUNTS; i++) {
                const struct account_view *a = &d->acct[i];
                printf(" | %s: fed %4u done %4u open %3u starts/s %2u", a->name, a->fed,
                       a->final[0] + a->final[1] + a->final[2], open_of(a), a->starts_s);
        }
        printf(" | eu's provider: %s\n", mode);
        fflush(stdout);
}

/* 429s the limiter at a stub's door answered (-1: unknown). */
static long door_refusals(int stub_port)
{
        char *resp = demo_stub_get(stub_port, "/_stub/arrivals?since=0", 64u << 20);
        long n = resp ? 0 : -1;

        for (const char *p = resp; p && (p = strstr(p, "\"answer\":429")) != NULL; p++)
                n++;
        free(resp);
        return n;
}
int demo_accounts_run(double scale, bool plain)
{
        struct run d;
        double feed_s = 45 * scale, t0, next_draw, next_second;
        int r, rc = 0;

        memset(&d, 0, sizeof(d));
        d.acct[0] = (struct account_view){.name = "eu", .rate = 4, .feed_rate = 3};
        d.acct[1] = (struct account_view){.name = "us", .rate = 8, .feed_rate = 6};
        for (unsigned i = 0; i < ACCOUNTS; i++)
                d.acct[i].min_gap = INT64_MAX;
        d.max_fed = (unsigned)(feed_s * 6) + 16;
        d.is_final = calloc((size_t)ACCOUNTS * d.max_fed, sizeof(*d.is_final));
        r = d.is_final ? start_all(&d, scale) : TG_ENOMEM;
        if (r < 0) {
                fprintf(stderr, "tollgate demo --accounts: could not start: %s\n", tg_strerror(r));
                stop_all(&d);
                free(d.is_final);
                return 1;
        }
        printf("tollgate demo --accounts: account eu at 127.0.0.1:%d (an incident: \"%s\" x %g), "
               "account us at 127.0.0.1:%d (healthy, a limiter at %g/s at its door); "
               "tollgate API on 127.0.0.1:%d\n",
               d.acct[0].stub.port, eu_timeline, scale, d.acct[1].stub.port, d.acct[1].rate,
               d.tg.port);
        t0 = tool_now();
        next_draw = t0;
        next_second = t0 + 1;
        double next_feed[ACCOUNTS] = {t0, t0};
        for (;;) {
                double now = tool_now(), t = now - t0;
                unsigned open = 0;
                char id[64];

                if (demo_interrupted)
                        break;
                for (unsigned i = 0; i < ACCOUNTS && t < feed_s; i++) {
                        struct account_view *a = &d.acct[i];
                        if (now < next_feed[i] || a->fed >= d.max_fed)
                                continue;
                        op_id(a, a->fed, id, sizeof(id));
                        if (demo_submit(d.tg.port, a->name, id, 100 + a->fed % 900) == 0)
                                a->fed++;
                        else
                                a->failed_feeds++;
                        next_feed[i] += 1.0 / a->feed_rate;
                }
                if (now >= next_second) {
                        refresh(&d);
                        next_second += 1;
                }
                if (now >= next_draw) {
                        draw(&d, t);
                        next_draw += plain ? 2.0 : 1.0;
                }
                for (unsigned i = 0; i < ACCOUNTS; i++)
                        open += open_of(&d.acct[i]);
                if ((t >= feed_s && open == 0) || t >= feed_s + 60)
                        break;
                tool_sleep(0.02);
        }
        refresh(&d);
        printf("\nsummary\n");
        for (unsigned i = 0; i < ACCOUNTS; i++) {
                struct account_view *a = &d.acct[i];
                long twice = demo_executed_twice(a->stub.port);
                printf("  account %s: fed %u (%u refused by intake), succeeded %u, rejected %u, "
                       "manual %u, still open %u; executed twice %ld; minimum start spacing "
                       "%.1f ms (it allows one start per %.0f ms)\n",
                       a->name, a->fed, a->failed_feeds, a->final[0], a->final[1], a->final[2],
                       open_of(a), twice, a->min_gap == INT64_MAX ? 0.0 : (double)a->min_gap / 1e6,
                       1000.0 / a->rate);
                if (twice != 0 || open_of(a) != 0 || a->fed == 0)
                        rc = 1;
        }
        long refused = door_refusals(d.acct[1].stub.port);
        printf("  us's door refused %ld calls (its limiter at %g/s; eu's incident never crowded "
               "us)\n",
               refused, d.acct[1].rate);
        if (refused != 0)
                rc = 1;
        stop_all(&d);
        free(d.is_final);
        return demo_interrupted ? 130 : rc;
}
