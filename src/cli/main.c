/*
 * tollgate — the command line: the daemon (serve, dispatch, api) and the
 * operator commands. Every command reads its options with platform/options
 * (so every command has a generated --help, and a bad option or a bad
 * config exits 2 with a message naming it, before anything starts). A
 * command gets argv from its own name on, as main() does, and returns the
 * exit status; only main() returns it to the system.
 */
#include <signal.h>
#include <stdio.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/tg_error.h"
#include "daemon/api.h"
#include "daemon/config.h"
#include "daemon/dispatcher.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "daemon/service.h"
#include "platform/build_info.h"
#include "platform/clock.h"
#include "platform/options.h"
#include "platform/secmem.h"
#include "platform/wake.h"

/* Set by the service's signal thread (daemon/service.h), read by the
 * dispatcher's loop. */
static volatile sig_atomic_t stop_flag;
static volatile sig_atomic_t standby_flag;

/* Every daemon command opens the store once (creating and migrating it,
 * and verifying the file when store.check_on_start says so) before anything
 * else starts, so that a bad url, a read-only or corrupted file, a full
 * disk or a MariaDB without the no-delete triggers (unless
 * store.allow_missing_triggers) stops it here with a message naming the
 * store, never as the API's failure. */
static int check_store(const char *cmd, const struct tg_config *cfg)
{
        char err[600] = "";
        const struct store_open_opts opts = {
            .err = err, .err_size = sizeof(err), .check = cfg->store_check_on_start};
        struct store *store = NULL;
        tg_mono_ns t0 = clock_mono_now();
        int r = store_open_ex(cfg->store_url, &opts, &store);

        if (r < 0)
                fprintf(stderr, "tollgate %s: %s\n", cmd, err[0] ? err : tg_strerror(r));
        else if (opts.check)
                log_emit(LOG_INFO, "store_checked",
                         json_pack("{s:s, s:I}", "store", store_url(store), "ms",
                                   (json_int_t)((clock_mono_now() - t0) / TG_NS_PER_MS)));
        /* a promise the server does not keep (store_unkept): refused, or
         * run without it when the operator said so, and said at every start */
        if (r == 0 && store_unkept(store) && !cfg->store_allow_missing_triggers) {
                fprintf(stderr,
                        "tollgate %s: %s; or set store.allow_missing_triggers = true to run "
                        "without them\n",
                        cmd, store_unkept(store));
                r = TG_ESTORE;
        } else if (r == 0 && store_unkept(store)) {
                log_emit(LOG_WARN, "store_triggers_missing",
                         json_pack("{s:s, s:s}", "store", store_url(store), "detail",
                                   store_unkept(store)));
        }
        store_close(store);
        return r;
}

static const char usage[] =
    "usage: tollgate <command> [options]\n"
    "\n"
    "The daemon:\n"
    "  serve --config FILE      intake/admin HTTP API and the dispatcher in one process\n"
    "  dispatch --config FILE   the dispatcher alone [--no-wait]\n"
    "  api --config FILE        the intake/admin API alone (any number may run)\n"
    "  verify --calls F --arrivals F   judge a run: matching, spacing, in-flight, keys\n"
    "  report --calls F --arrivals F --out F.html   timeline report of a run (HTML)\n"
    "  demo [--quick]           the exit through the seed's incident, against the stub\n"
    "\n"
    "Operating it (on the store of the config, or through its API):\n"
    "  submit --config FILE ...   submit one refund (or --batch FILE) through the API\n"
    "  status ID --config FILE  an operation's state, calls and audit (API)\n"
    "  cancel ID --config FILE  take back a refund no call was made for yet\n"
    "  manual list|show|resend|resolve|assign|unassign --config FILE\n"
    "                           the manual review queue and who owns each case\n"
    "  calls --config FILE [--since ID] [--format jsonl|csv]   the call log\n"
    "  reconcile --config FILE --file F.csv   settle unknowns from a settlement file\n"
    "  config defaults [--format ini|markdown|scdoc]   every config key, its default, meaning\n"
    "  config check --config FILE   every problem of a config file, with its line (0/1)\n"
    "  prune --config FILE      delete final operations past retention.keep_days\n"
    "  backup --config FILE --to FILE   an online, consistent copy of a SQLite store\n"
    "  token add|list|revoke --file F   named API credentials with scopes (the secret once)\n"
    "  events list|redeliver ID --config FILE   the events told to the caller ([notify])\n"
    "  account list|set|pause|resume|audit --config FILE   an account's rate, cap, pause\n"
    "\n"
    "Teaching tools (the seeds' worked examples, on your own numbers):\n"
    "  jitter                   N clients failing together: backoff windows, jitter, peaks\n"
    "  plan                     backlog drain arithmetic (and --simulate through the exit)\n"
    "  demo resilience          timeouts, backoff with jitter, idempotency, against the stub\n"
    "\n"
    "Run 'tollgate <command> --help' for a command's options; 'tollgate --version'\n"
    "prints the version and the git revision it was built from.\n";

static const char serve_about[] =
    "Runs the intake/admin HTTP API and the dispatcher in one process. The API answers even "
    "while the dispatcher waits as a standby behind another owner.\n\n"
    "SIGTERM/SIGINT: stop starting calls, wait for open ones, exit 0. SIGHUP: read the config "
    "again (what can change live changes; any other changed key is refused in the log and keeps "
    "its value). GET /readyz answers 200 while this process owns the exit or is a standby.\n\n"
    "Under systemd (Type=notify) it says READY=1 once the store is open and the API listens, "
    "STOPPING=1 on a stop, and WATCHDOG=1 from the dispatcher's loop when WatchdogSec is set.";
static const char dispatch_about[] =
    "Runs the dispatcher alone. If another dispatcher owns the exit for this store, waits as a "
    "standby (and says so in its log) until the owner is gone.\n\n"
    "SIGTERM/SIGINT: stop starting calls, wait for open ones, exit 0. SIGHUP: read the config "
    "again, as for serve.";
static const char api_about[] = "Runs the intake/admin HTTP API alone; any number may run beside "
                                "one dispatcher on the same store.";

static int cmd_daemon(const char *cmd, int argc, char **argv)
{
        bool want_api = strcmp(cmd, "dispatch") != 0;
        bool want_disp = strcmp(cmd, "api") != 0;
        const char *config = NULL, *accounts = NULL;
        bool no_wait = false;
        const struct opt opts[] = {
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &config,
             .required = true,
             .help = "the config file (INI)"},
            {.name = "accounts",
             .arg = "A,B",
             .string = &accounts,
             .help = "serve only these accounts of the config (default: every one)"},
            {.name = "no-wait",
             .flag = &no_wait,
             .help = "exit with status 3 instead of waiting as a standby"},
        };
        char prog[32];
        struct options_spec spec = {
            .prog = prog,
            .description = strcmp(cmd, "serve") == 0      ? serve_about
                           : strcmp(cmd, "dispatch") == 0 ? dispatch_about
                                                          : api_about,
            .opts = opts,
            /* --accounts: serve and dispatch; --no-wait: dispatch only */
            .nopts = want_disp && !want_api ? 3
                     : want_disp            ? 2
                                            : 1,
        };
        int r;

        snprintf(prog, sizeof(prog), "tollgate %s", cmd);
        r = options_parse(&spec, argc, argv, NULL, NULL);
        if (r)
                return options_exit_status(r);
#ifdef __GLIBC__
        /* Each account's exit holds blocks of about 110 KiB (itself, its
         * claim group) that an idle account barely touches: from mmap they
         * cost only the pages used, where calloc on the heap would make
         * them resident (docs/bench.md, "Many accounts in one process").
         * Setting the threshold also stops glibc from raising it after the
         * first such block is freed. */
        mallopt(M_MMAP_THRESHOLD, 96 * 1024);
#endif
        /* Secret memory: the config holds the API token and the webhook
         * secret, and stays out of core dumps. */
        struct tg_config *cfg = secmem_alloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config(cmd, config, cfg);
        if (r) {
                config_release(cfg);
                secmem_free(cfg);
                return options_exit_status(r);
        }
        /* one account named default is the top level, as it always was;
         * several are served one exit each */
        config_accounts_serve(cfg);
        struct tg_account_set accounts_mask = {{0}};
        if (accounts) {
                char why[600];
                r = config_accounts_mask(cfg, accounts, &accounts_mask, why, sizeof(why));
                if (r < 0) {
                        fprintf(stderr, "tollgate %s: %s\n", cmd, why);
                        config_release(cfg);
                        secmem_free(cfg);
                        return 2;
                }
        }
        log_set_component(cmd);
        signal(SIGPIPE, SIG_IGN);
        /* before any thread: the service's thread takes the signals */
        struct service *svc = NULL;
        const struct service_options so = {.command = cmd,
                                           .config_path = config,
                                           .config = cfg,
                                           .stop = &stop_flag,
                                           .standby = want_disp ? &standby_flag : NULL};
        r = service_start(&so, &svc);
        if (r < 0) {
                fprintf(stderr, "tollgate %s: cannot start: %s\n", cmd, tg_strerror(r));
                config_release(cfg);
                secmem_free(cfg);
                return 1;
        }
        if (check_store(cmd, cfg) < 0) {
                service_stop(svc);
                config_release(cfg);
                secmem_free(cfg);
                return 1;
        }
        struct api *api = NULL;
        struct wake *doorbell = NULL;
        if (want_api && want_disp && wake_new(&doorbell) < 0)
                doorbell = NULL; /* no doorbell: the exit looks for work by itself */
        if (want_api) {
                char err[600];
                r = api_start_ex(cfg, err, sizeof(err), &api);
                if (r < 0) {
                        /* err names what failed: the store (its url and
                         * why) or the API's address; never one for the other */
                        if (err[0])
                                fprintf(stderr, "tollgate %s: %s\n", cmd, err);
                        else
                                fprintf(stderr, "tollgate %s: cannot start the API: %s\n", cmd,
                                        tg_strerror(r));
                        wake_free(doorbell);
                        service_stop(svc);
                        config_release(cfg);
                        secmem_free(cfg);
                        return 1;
                }
                if (want_disp) {
                        api_set_standby_flag(api, &standby_flag);
                        api_set_doorbell(api, doorbell);
                }
                service_set_api(svc, api);
                log_emit(
                    LOG_INFO, "api_listening",
                    json_pack("{s:s, s:i}", "host", cfg->api_listen_host, "port", api_port(api)));
        }
        /* the events' deliveries: their own thread, store handle and HTTP
         * client; delivering only while this dispatcher owns share 0 */
        struct notifier *notifier = NULL;
        if (want_disp) {
                r = notifier_start(cfg, &notifier);
                if (r < 0)
                        log_emit(LOG_ERROR, "notify_not_started",
                                 json_pack("{s:s}", "error", tg_strerror(r)));
                service_set_notifier(svc, notifier);
        }
        service_ready(svc);
        int rc = 0;
        if (want_disp) {
                struct dispatcher_options dopt = {.no_wait = no_wait,
                                                  .stop = &stop_flag,
                                                  .standby = &standby_flag,
                                                  .doorbell = doorbell,
                                                  .housekeeping = service_housekeeping,
                                                  .hook_ctx = svc,
                                                  .credentials_due = service_credentials_due,
                                                  .accounts_mask = accounts_mask,
                                                  .max_accounts = cfg->dispatch_max_accounts};
                rc = dispatcher_run(cfg, &dopt);
        } else {
                service_wait_stop(svc);
        }
        /* the API goes first (a reload or a readiness question must not find
         * it half gone), then the signal thread (STOPPING=1 when no signal
         * said it) */
        service_set_notifier(svc, NULL);
        notifier_stop(notifier);
        service_set_api(svc, NULL);
        api_stop(api);
        wake_free(doorbell);
        service_stop(svc);
        config_release(cfg);
        secmem_free(cfg);
        return rc;
}

int cmd_serve(int argc, char **argv)
{
        return cmd_daemon("serve", argc, argv);
}

int cmd_dispatch(int argc, char **argv)
{
        return cmd_daemon("dispatch", argc, argv);
}

int cmd_api(int argc, char **argv)
{
        return cmd_daemon("api", argc, argv);
}

struct command {
        const char *name;
        int (*run)(int argc, char **argv);
};

/* Every subcommand, in the order of the usage text. */
static const struct command commands[] = {
    {"serve", cmd_serve},         {"dispatch", cmd_dispatch}, {"api", cmd_api},
    {"verify", cmd_verify},       {"report", cmd_report},     {"submit", cmd_submit},
    {"status", cmd_status},       {"manual", cmd_manual},     {"calls", cmd_calls},
    {"reconcile", cmd_reconcile}, {"jitter", cmd_jitter},     {"plan", cmd_plan},
    {"demo", cmd_demo},           {"config", cmd_config},     {"cancel", cmd_cancel},
    {"prune", cmd_prune},         {"backup", cmd_backup},     {"token", cmd_token},
    {"events", cmd_events},       {"account", cmd_account},
};

/* `tollgate help commands`: the command table, one name a line (the man
 * page is made from each one's --help). */
static int list_commands(void)
{
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                printf("%s\n", commands[i].name);
        return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
        if (argc == 2 && strcmp(argv[1], "--version") == 0) {
                printf("tollgate %s (git %s)\n", build_info_version(), build_info_revision());
                return 0;
        }
        if (argc == 3 && strcmp(argv[1], "help") == 0 && strcmp(argv[2], "commands") == 0)
                return list_commands();
        if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
            strcmp(argv[1], "help") == 0) {
                fputs(usage, argc < 2 ? stderr : stdout);
                return argc < 2 ? 2 : 0;
        }
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (strcmp(argv[1], commands[i].name) == 0)
                        return commands[i].run(argc - 1, argv + 1);
        fprintf(stderr, "tollgate: unknown command '%s' (try --help)\n", argv[1]);
        return 2;
}
