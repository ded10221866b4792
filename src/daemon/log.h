/*
 * log — structured logs: one JSON object a line on stderr, with a timestamp,
 * a level and an event name, plus the caller's fields. Only src/daemon (and the commands above it) logs.
 * Never pass secrets or full provider bodies in fields.
 *
 * When stderr is the systemd journal (JOURNAL_STREAM names it), every line
 * starts with its syslog priority, "<3>" for error, "<4>" warn, "<6>" info,
 * "<7>" debug, which journald takes off and records as the priority: so
 * `journalctl -u tollgate -p err` shows the errors. Anywhere else the lines
 * are plain JSON. The level may change at any time (a reload) from any
 * thread.
 */
#ifndef TG_LOG_H
#define TG_LOG_H

#include <jansson.h>

enum log_level {
        LOG_DEBUG,
        LOG_INFO,
        LOG_WARN,
        LOG_ERROR,
};

/* "debug", "info", "warn", "error"; 0 or TG_EINVAL. */
int log_level_parse(const char *name, enum log_level *ret_level);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* The syslog priority of a level (3, 4, 6, 7). */
int log_syslog_priority(enum log_level level);
/* Prefix every line with this component name ("dispatcher", "api", ...). */
void log_set_component(const char *component);
/* Lines this thread writes from now on name this account ("account"),
 * until another is set; NULL or "": none (a process serving one account
 * never sets it, and its lines are as they were). */
void log_set_account(const char *account);

/* Writes one line. fields (may be NULL) is a JSON object and is consumed
 * (its reference is stolen), whether or not the level is enabled. */
void log_emit(enum log_level level, const char *event, json_t *fields);

#endif
