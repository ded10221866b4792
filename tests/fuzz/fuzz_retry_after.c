/*
 * Fuzz target for retry_after_parse(): any bytes as a Retry-After value,
 * parsed with curl_getdate() as the date parser (what src/net passes in
 * production), under several caps and clocks. Invariants checked on every
 * input, abort() on a breach so libFuzzer and the replay runner both stop:
 *   - the result is 0 or TG_EPARSE (the arguments are always valid here);
 *   - on success the delay is in [0, cap]; on failure the output is untouched;
 *   - without a date parser only delta-seconds succeed, and then with the
 *     same delay as with one;
 *   - a short all-digit value (after spaces/tabs) gives exactly
 *     min(seconds * 1000, cap), computed here independently;
 *   - the same input gives the same answer twice.
 */
#include <curl/curl.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "core/retry_after.h"
#include "core/tg_error.h"

static int curl_date(const char *text, int64_t *ret_epoch_s)
{
        time_t t = curl_getdate(text, NULL);
        if (t == (time_t)-1)
                return TG_EPARSE;
        *ret_epoch_s = (int64_t)t;
        return 0;
}

static void check(int cond)
{
        if (!cond)
                abort();
}

/* The oracle for short deltas: -1 if the trimmed value is not 1-15 digits. */
static int64_t short_delta_s(const uint8_t *data, size_t size)
{
        size_t a = 0, b = size;
        while (a < b && (data[a] == ' ' || data[a] == '\t'))
                a++;
        while (b > a && (data[b - 1] == ' ' || data[b - 1] == '\t'))
                b--;
        if (b == a || b - a > 15)
                return -1;
        int64_t v = 0;
        for (size_t i = a; i < b; i++) {
                if (data[i] < '0' || data[i] > '9')
                        return -1;
                v = v * 10 + (data[i] - '0');
        }
        return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const int64_t caps[] = {RETRY_AFTER_DEFAULT_CAP_MS, 0, 1, INT64_MAX};
        static const tg_wall_ms nows[] = {1700000000000LL, 0, INT64_MIN, INT64_MAX};
        const char *value = (const char *)data;
        int64_t digits = short_delta_s(data, size);

        for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
                for (size_t n = 0; n < sizeof(nows) / sizeof(nows[0]); n++) {
                        const int64_t sentinel = -77;
                        int64_t d1 = sentinel, d2 = sentinel, d3 = sentinel;
                        int r1 = retry_after_parse(value, size, nows[n], caps[c], curl_date, &d1);
                        int r2 = retry_after_parse(value, size, nows[n], caps[c], curl_date, &d2);
                        int r3 = retry_after_parse(value, size, nows[n], caps[c], NULL, &d3);

                        check(r1 == 0 || r1 == TG_EPARSE);
                        check(r1 == r2 && d1 == d2);
                        if (r1 == 0)
                                check(d1 >= 0 && d1 <= caps[c]);
                        else
                                check(d1 == sentinel);

                        check(r3 == 0 || r3 == TG_EPARSE);
                        if (r3 == 0)
                                check(r1 == 0 && d3 == d1);
                        else
                                check(d3 == sentinel);

                        if (digits >= 0) {
                                int64_t want = digits * 1000 < caps[c] ? digits * 1000 : caps[c];
                                check(r1 == 0 && d1 == want && r3 == 0);
                        }
                }
        }
        /* A NULL value: absent when empty, else a caller bug. */
        int64_t d = -77;
        check(retry_after_parse(NULL, 0, 0, RETRY_AFTER_DEFAULT_CAP_MS, curl_date, &d) ==
              TG_EPARSE);
        check(retry_after_parse(NULL, size + 1, 0, RETRY_AFTER_DEFAULT_CAP_MS, curl_date, &d) ==
              TG_EINVAL);
        check(d == -77);
        return 0;
}
