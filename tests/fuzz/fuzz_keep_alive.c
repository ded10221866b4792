/*
 * Fuzz target for keep_alive_timeout_ms(): any bytes as a provider's
 * Keep-Alive header value. Invariants checked on every input, abort() on a
 * breach so libFuzzer and the replay runner both stop:
 *   - the result is 0 or TG_EPARSE (the arguments are always valid here);
 *   - on success the timeout is whole seconds in [0, KEEP_ALIVE_MAX_S]; on
 *     failure the output is untouched;
 *   - the same input gives the same answer twice, and a prefix is never read
 *     past its length.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/keep_alive.h"
#include "core/tg_error.h"

static void check(int cond)
{
        if (!cond)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* a copy of exactly size bytes: ASan sees any read past it */
        char *v = malloc(size ? size : 1);
        if (!v)
                return 0;
        if (size)
                memcpy(v, data, size);
        int64_t a = -1, b = -1;
        int ra = keep_alive_timeout_ms(v, size, &a);
        int rb = keep_alive_timeout_ms(v, size, &b);
        check(ra == 0 || ra == TG_EPARSE);
        check(ra == rb && a == b);
        if (ra == 0)
                check(a >= 0 && a <= KEEP_ALIVE_MAX_S * 1000LL && a % 1000 == 0);
        else
                check(a == -1);
        free(v);
        return 0;
}
