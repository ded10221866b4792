/*
 * log — structured logs: one JSON object a line on stderr, with a timestamp,
 * a level and an event name, plus the caller's fields. Only src/daemon (and the commands above it) logs.
 * Never pass secrets or full provider bodies in fields.
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
/* Prefix every line with this component name ("dispatcher", "api", ...). */
void log_set_component(const char *component);

/* Writes one line. fields (may be NULL) is a JSON object and is consumed
 * (its reference is stolen), whether or not the level is enabled. */
void log_emit(enum log_level level, const char *event, json_t *fields);

#endif
