/*
 * demo_int — what `tollgate demo` (demo.c) and its two-account variant
 * (demo_accounts.c) share: the interrupt flag, the demo's token, feeding a
 * refund through the intake API, and what they ask the stand-ins and
 * tollgate over loopback.
 */
#ifndef TG_DEMO_INT_H
#define TG_DEMO_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#define DEMO_TOKEN "demo-token-not-a-secret"

/* Set by SIGINT/SIGTERM while a demo runs. */
extern volatile sig_atomic_t demo_interrupted;

/* Writes DEMO_TOKEN into dir/token (mode 0600) and its path into ret_path.
 * 0 or TG_EIO. */
int demo_token_file(const char *dir, char *ret_path, size_t size);
/* The paths of tollgate-stub and tollgate, next to this binary (each
 * buffer size bytes). 0, or a negative code (said on stderr). */
int demo_binaries(char *stub_bin, char *self, size_t size);
/* Waits up to 10 s for tollgate's /healthz on api_port. 0 or TG_ETIMEOUT. */
int demo_wait_healthy(int api_port);
/* POST /v1/refunds of one refund (account NULL: none named). 0 when
 * accepted (202 or 200), else a negative code. */
int demo_submit(int api_port, const char *account, const char *operation_id, unsigned amount);
/* The stub's current mode ("fast", "slow:3500", ...), or "?". */
void demo_stub_mode(int stub_port, char *out, size_t size);
/* GET of a stub's admin path ("/_stub/ledger"): its body, malloc'd (at
 * most max bytes), or NULL (not 200, unreachable, out of memory). */
char *demo_stub_get(int stub_port, const char *path, size_t max);
/* How many operations the stub executed more than once (-1: unknown). */
long demo_executed_twice(int stub_port);

/* `tollgate demo --accounts` (demo_accounts.c): 0 when every refund of
 * both accounts settled, none executed twice and us's door refused none. */
int demo_accounts_run(double scale, bool plain);

#endif
