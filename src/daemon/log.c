/*
 * log — one JSON object a line on stderr. Lines are written with a single
 * write-sized fputs under a lock so that the API thread and the dispatcher
 * never interleave inside a line.
 */
#include "daemon/log.h"
#include "platform/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/tg_error.h"

static _Atomic int min_level = LOG_INFO;
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static bool to_journal; /* stderr is the journal's stream: prefix the priority */
static const char *component_name = "tollgate";
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
/* the account this thread works for now ("": none said) */
static _Thread_local char account_name[40];

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int log_level_parse(const char *name, enum log_level *ret_level)
{
        for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
                if (strcmp(name, level_names[i]) == 0) {
                        *ret_level = (enum log_level)i;
                        return 0;
                }
        }
        return TG_EINVAL;
}

void log_set_level(enum log_level level)
{
        atomic_store(&min_level, (int)level);
}

enum log_level log_get_level(void)
{
        return (enum log_level)atomic_load(&min_level);
}

int log_syslog_priority(enum log_level level)
{
        static const int prio[] = {7, 6, 4, 3}; /* debug, info, warning, err */

        return (unsigned)level < 4 ? prio[level] : 6;
}

/* systemd sets JOURNAL_STREAM=<dev>:<inode> of the stream it connected to
 * stderr (and stdout); only when stderr is still that stream is a prefix
 * right (a redirect in a wrapper script must get plain lines). */
static void detect_journal(void)
{
        const char *env = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        char *end = NULL;
        struct stat st;

        if (!env || env[0] < '0' || env[0] > '9')
                return;
        dev = strtoull(env, &end, 10);
        if (!end || *end != ':' || end[1] < '0' || end[1] > '9')
                return;
        ino = strtoull(end + 1, &end, 10);
        if (!end || *end != '\0')
                return;
        if (fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
            (unsigned long long)st.st_ino == ino)
                to_journal = true;
}

void log_set_component(const char *component)
{
        component_name = component;
}

void log_set_account(const char *account)
{
        snprintf(account_name, sizeof(account_name), "%s", account ? account : "");
}

void log_emit(enum log_level level, const char *event, json_t *fields)
{
        if ((int)level < atomic_load(&min_level)) {
                json_decref(fields);
                return;
        }
        json_t *line = json_object();
        if (!line) {
                json_decref(fields);
                return;
        }
        tg_wall_ms wall = clock_wall_now();
        time_t secs = (time_t)(wall / TG_MS_PER_S);
        struct tm tm;
        gmtime_r(&secs, &tm);
        char stamp[40];
        char date[24];
        strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(stamp, sizeof(stamp), "%s.%03ldZ", date, (long)(wall % TG_MS_PER_S));
        json_object_set_new(line, "ts", json_string(stamp));
        json_object_set_new(line, "level", json_string(level_names[level]));
        json_object_set_new(line, "component", json_string(component_name));
        json_object_set_new(line, "event", json_string(event));
        if (account_name[0])
                json_object_set_new(line, "account", json_string(account_name));
        if (fields && json_is_object(fields))
                json_object_update(line, fields);
        json_decref(fields);
        char *text = json_dumps(line, JSON_COMPACT);
        json_decref(line);
        if (!text)
                return;
        pthread_once(&journal_once, detect_journal);
        /* the line whole, its priority prefix and newline included, in one
         * call: stderr is unbuffered, and glibc writes one printf to such a
         * stream in one write (a call for each part was a write each) */
        char prefix[8] = "";
        if (to_journal)
                snprintf(prefix, sizeof(prefix), "<%d>", log_syslog_priority(level));
        pthread_mutex_lock(&log_lock);
        fprintf(stderr, "%s%s\n", prefix, text);
        fflush(stderr);
        pthread_mutex_unlock(&log_lock);
        free(text);
}
