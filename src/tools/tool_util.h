/*
 * tool_util — what the teaching tools that run real processes (plan
 * --simulate, demo, demo resilience) share: the monotonic clock in seconds,
 * and starting a sibling binary (found next to /proc/self/exe) on
 * loopback, reading the port it wrote and stopping it. These tools are
 * teaching aids, not the exit: their HTTP (net/http_client.h) never goes
 * through the dispatcher's transport and only ever targets processes they
 * started themselves on 127.0.0.1.
 *
 * Ownership: a struct tool_proc belongs to the caller; tool_proc_stop()
 * always reaps the child (SIGTERM, then SIGKILL after a grace period), so
 * nothing a tool started outlives it.
 */
#ifndef TG_TOOL_UTIL_H
#define TG_TOOL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Monotonic now, in seconds, and a sleep (<= 0: none), both through
 * platform/clock. */
double tool_now(void);
void tool_sleep(double seconds);

/* Path of a program next to the running tollgate binary. 0, or -errno /
 * TG_EFULL when it cannot be found or does not fit. */
int tool_sibling(const char *name, char *buf, size_t size);

struct tool_proc {
        pid_t pid;     /* 0 when not running */
        char dir[64];  /* private temp dir (port file, logs) */
        char log[128]; /* the child's stdout+stderr */
        int port;      /* from the port file, if one was asked for */
};

/* Creates p->dir (mkdtemp) and zeroes the rest. 0 or -errno. */
int tool_proc_init(struct tool_proc *p, const char *prefix);

/* Starts argv (argv[0] a path) with stdout and stderr in p->log. If
 * port_file is not NULL, waits up to timeout_s for the child to write its
 * port there. 0, TG_EIO (exited or no port in time; the child is stopped),
 * or -errno. */
int tool_proc_start(struct tool_proc *p, char *const argv[], const char *port_file,
                    double timeout_s);

/* SIGTERM, wait up to 5 s, then SIGKILL; always reaps. NULL/not started ok. */
void tool_proc_stop(struct tool_proc *p);

/* Stops the child, removes every file in p->dir (the tools keep it flat)
 * and the dir itself. NULL and never-started are fine. */
void tool_proc_release(struct tool_proc *p);

/* A loopback TCP port that was free a moment ago (a small race the tools
 * accept: a taken port makes the child fail to start, which is reported).
 * The port, or -errno. */
int tool_free_port(void);

#endif
