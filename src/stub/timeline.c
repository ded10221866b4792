/*
 * Fault modes and timelines: parsing, lookup by elapsed time, the weighted
 * draw of "mix", and formatting back to text. Invariants: a parsed timeline
 * has 1..STUB_PHASES_MAX phases, only its last phase may be unbounded, every
 * bounded duration is > 0, and lookup never reads a clock.
 */
#include "timeline.h"

#include "core/strnum.h"
#include "core/tg_error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[STUB_MODE_COUNT] = {
    "fast",       "slow",    "drop",   "reject", "unavailable", "limited",   "e500",
    "processing", "fail",    "refuse", "calls",  "reset-body",  "truncated", "invalid",
    "huge",       "trickle", "ctype",  "contra", "http10",      "redirect",  "mix"};

static const char *const contra_names[] = {"succeeded", "failed", "processing", "error"};

#define MODE_LIST                                                                                  \
        "fast, slow, drop, reject, unavailable, limited, e500, processing, fail, refuse, calls, "  \
        "reset-body, truncated, invalid, huge, trickle, ctype, contra, http10, redirect, mix"

const char *stub_mode_name(enum stub_mode mode)
{
        if ((int)mode < 0 || mode >= STUB_MODE_COUNT)
                return "?";
        return mode_names[mode];
}

bool stub_mode_hostile(enum stub_mode mode)
{
        return mode >= STUB_RESET_BODY && mode <= STUB_REDIRECT;
}

/* A query has no refund to reject, fail, process or count calls of, and a
 * listening socket is the POSTs' (refuse). */
bool stub_mode_for_query(enum stub_mode mode)
{
        return mode == STUB_FAST || mode == STUB_SLOW || mode == STUB_DROP ||
               mode == STUB_UNAVAILABLE || mode == STUB_LIMITED || mode == STUB_E500 ||
               stub_mode_hostile(mode);
}

int stub_mode_from_name(const char *name, size_t len, enum stub_mode *ret_mode)
{
        for (int i = 0; i < STUB_MODE_COUNT; i++) {
                if (strlen(mode_names[i]) == len && memcmp(name, mode_names[i], len) == 0) {
                        *ret_mode = (enum stub_mode)i;
                        return 0;
                }
        }
        return TG_EINVAL;
}

/* Parses a non-negative decimal integer occupying exactly s[0..len). */
static int parse_uint(const char *s, size_t len, int64_t max, int64_t *ret)
{
        char tmp[32];
        if (len == 0 || len >= sizeof(tmp))
                return TG_EINVAL;
        memcpy(tmp, s, len);
        tmp[len] = '\0';
        if (tmp[0] == '-' || strnum_i64(tmp, 0, max, ret) < 0)
                return TG_EINVAL;
        return 0;
}

static void trim(const char **s, size_t *len)
{
        while (*len > 0 && (**s == ' ' || **s == '\t' || **s == '\r' || **s == '\n')) {
                (*s)++;
                (*len)--;
        }
        while (*len > 0 && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t' ||
                            (*s)[*len - 1] == '\r' || (*s)[*len - 1] == '\n'))
                (*len)--;
}

int stub_mix_parse(const char *text, size_t len, const char **why, int ret_weights[STUB_MODE_COUNT])
{
        int w[STUB_MODE_COUNT] = {0};
        long total = 0;
        const char *end = text + len;
        while (text < end) {
                const char *comma = memchr(text, ',', (size_t)(end - text));
                const char *item_end = comma ? comma : end;
                const char *eq = memchr(text, '=', (size_t)(item_end - text));
                const char *name = text;
                size_t nlen;
                enum stub_mode m;
                int64_t v;
                if (!eq) {
                        *why = "mix item must be MODE=WEIGHT";
                        return TG_EINVAL;
                }
                nlen = (size_t)(eq - text);
                trim(&name, &nlen);
                if (stub_mode_from_name(name, nlen, &m) < 0 || m == STUB_REFUSE || m == STUB_MIX) {
                        *why = "mix member must be a mode other than refuse and mix";
                        return TG_EINVAL;
                }
                const char *num = eq + 1;
                size_t numlen = (size_t)(item_end - num);
                trim(&num, &numlen);
                if (parse_uint(num, numlen, 1000000, &v) < 0) {
                        *why = "mix weight must be an integer 0..1000000";
                        return TG_EINVAL;
                }
                w[m] = (int)v;
                total += (long)v;
                text = comma ? comma + 1 : end;
        }
        if (total <= 0) {
                *why = "mix weights must sum to more than 0";
                return TG_EINVAL;
        }
        memcpy(ret_weights, w, sizeof(w));
        return 0;
}

enum stub_mode stub_mix_draw(const int weights[STUB_MODE_COUNT], struct tg_rng *rng)
{
        int64_t total = 0, pick;
        for (int i = 0; i < STUB_MODE_COUNT; i++)
                total += weights[i];
        if (total <= 0)
                return STUB_FAST;
        pick = tg_rng_range(rng, 0, total - 1);
        for (int i = 0; i < STUB_MODE_COUNT; i++) {
                if (pick < weights[i])
                        return (enum stub_mode)i;
                pick -= weights[i];
        }
        return STUB_FAST;
}

/* A provider failure code: it is echoed into JSON and a mode's text, so a
 * short plain token. */
static bool failure_code_valid(const char *s, size_t len)
{
        if (len == 0 || len > STUB_FAILURE_CODE_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '-'))
                        return false;
        }
        return true;
}

static void spec_defaults(struct stub_mode_spec *s, enum stub_mode m)
{
        memset(s, 0, sizeof(*s));
        s->mode = m;
        s->delay_ms = -1;
        s->processing_ms = -1;
        s->ra_form = STUB_RA_DEFAULT;
        s->ra_seconds = -1;
        s->close_calls = -1;
        s->hostile = -1;
}

/* A Content-Type for ctype: a bare media type (it sits in a timeline, where
 * spaces and ';' separate), or "none". */
static bool ctype_valid(const char *s, size_t len)
{
        if (len == 0 || len > STUB_WORD_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '/' || c == '+' || c == '.' || c == '-' || c == '_' || c == '='))
                        return false;
        }
        return true;
}

/* The parameter of a hostile mode (see --help). */
static int parse_hostile(enum stub_mode m, const char *param, size_t plen, const char **why,
                         struct stub_mode_spec *s)
{
        const char *dash;

        switch (m) {
        case STUB_RESET_BODY:
                if (parse_uint(param, plen, 1 << 20, &s->hostile) < 0) {
                        *why = "reset-body takes the body bytes sent before the reset, 0..1048576";
                        return TG_EINVAL;
                }
                return 0;
        case STUB_TRUNCATED:
        case STUB_INVALID:
                if (parse_uint(param, plen, 599, &s->hostile) < 0 || s->hostile < 100) {
                        *why = "the status must be 100..599";
                        return TG_EINVAL;
                }
                return 0;
        case STUB_HUGE:
                if (parse_uint(param, plen, STUB_HUGE_MAX, &s->hostile) < 0 || s->hostile < 1) {
                        *why = "huge takes the body size in bytes, 1..1099511627776";
                        return TG_EINVAL;
                }
                return 0;
        case STUB_TRICKLE:
                if (parse_uint(param, plen, 60000, &s->hostile) < 0 || s->hostile < 1) {
                        *why = "trickle takes the ms between two bytes, 1..60000";
                        return TG_EINVAL;
                }
                return 0;
        case STUB_CTYPE:
                if (!ctype_valid(param, plen)) {
                        *why = "ctype takes a media type (1-63 chars of [A-Za-z0-9/+.=_-]) or none";
                        return TG_EINVAL;
                }
                memcpy(s->ctype, param, plen);
                s->ctype[plen] = '\0';
                return 0;
        case STUB_CONTRA:
                dash = memchr(param, '-', plen);
                if (dash && parse_uint(param, (size_t)(dash - param), 599, &s->hostile) == 0 &&
                    s->hostile >= 100) {
                        const char *body = dash + 1;
                        size_t blen = plen - (size_t)(body - param);
                        for (size_t i = 0; i < sizeof(contra_names) / sizeof(contra_names[0]);
                             i++) {
                                if (strlen(contra_names[i]) == blen &&
                                    memcmp(body, contra_names[i], blen) == 0) {
                                        s->contra = (enum stub_contra_body)i;
                                        return 0;
                                }
                        }
                }
                *why = "contra takes STATUS-BODY: 100..599, then succeeded, failed, processing or "
                       "error (201-failed)";
                return TG_EINVAL;
        case STUB_HTTP10:
                if (plen != 3 || memcmp(param, "cut", 3) != 0) {
                        *why = "http10 takes no parameter or cut";
                        return TG_EINVAL;
                }
                s->cut = true;
                return 0;
        case STUB_REDIRECT:
                if (parse_uint(param, plen, 399, &s->hostile) < 0 ||
                    !(s->hostile == 301 || s->hostile == 302 || s->hostile == 303 ||
                      s->hostile == 307 || s->hostile == 308)) {
                        *why = "redirect takes 301, 302, 303, 307 or 308";
                        return TG_EINVAL;
                }
                return 0;
        default:
                *why = "this mode takes no parameter";
                return TG_EINVAL;
        }
}

int stub_mode_parse(const char *text, size_t len, const char **why, struct stub_mode_spec *ret_spec)
{
        struct stub_mode_spec s;
        const char *colon;
        const char *param = NULL;
        size_t nlen, plen = 0;
        enum stub_mode m;

        trim(&text, &len);
        colon = memchr(text, ':', len);
        nlen = colon ? (size_t)(colon - text) : len;
        if (colon) {
                param = colon + 1;
                plen = len - nlen - 1;
                trim(&param, &plen);
        }
        if (stub_mode_from_name(text, nlen, &m) < 0) {
                *why = "unknown mode (" MODE_LIST ")";
                return TG_EINVAL;
        }
        spec_defaults(&s, m);
        if (colon && plen == 0) {
                *why = "empty mode parameter after ':'";
                return TG_EINVAL;
        }
        if (param) {
                switch (m) {
                case STUB_SLOW:
                case STUB_DROP:
                case STUB_E500:
                        if (parse_uint(param, plen, 86400000, &s.delay_ms) < 0) {
                                *why = "delay must be milliseconds 0..86400000";
                                return TG_EINVAL;
                        }
                        break;
                case STUB_PROCESSING:
                        if (parse_uint(param, plen, 86400000, &s.processing_ms) < 0) {
                                *why = "processing time must be milliseconds 0..86400000";
                                return TG_EINVAL;
                        }
                        break;
                case STUB_UNAVAILABLE:
                case STUB_LIMITED:
                        if (plen == 1 && param[0] == '-') {
                                s.ra_form = STUB_RA_NONE;
                                break;
                        }
                        s.ra_form = STUB_RA_SECONDS;
                        if (param[0] == '@') {
                                s.ra_form = STUB_RA_DATE;
                                param++;
                                plen--;
                        }
                        if (parse_uint(param, plen, 86400 * 7, &s.ra_seconds) < 0) {
                                *why = "Retry-After must be N, @N (HTTP-date N s ahead) or -";
                                return TG_EINVAL;
                        }
                        break;
                case STUB_FAIL:
                        if (!failure_code_valid(param, plen)) {
                                *why = "failure code must be 1-63 chars of [A-Za-z0-9_.-]";
                                return TG_EINVAL;
                        }
                        memcpy(s.failure_code, param, plen);
                        s.failure_code[plen] = '\0';
                        break;
                case STUB_CALLS:
                        if (parse_uint(param, plen, STUB_CALLS_MAX, &s.close_calls) < 0 ||
                            s.close_calls < 1) {
                                *why = "calls must be 1..100";
                                return TG_EINVAL;
                        }
                        break;
                case STUB_MIX:
                        if (stub_mix_parse(param, plen, why, s.weights) < 0)
                                return TG_EINVAL;
                        s.has_weights = true;
                        break;
                case STUB_RESET_BODY:
                case STUB_TRUNCATED:
                case STUB_INVALID:
                case STUB_HUGE:
                case STUB_TRICKLE:
                case STUB_CTYPE:
                case STUB_CONTRA:
                case STUB_HTTP10:
                case STUB_REDIRECT:
                        if (parse_hostile(m, param, plen, why, &s) < 0)
                                return TG_EINVAL;
                        break;
                default:
                        *why = "this mode takes no parameter";
                        return TG_EINVAL;
                }
        }
        *ret_spec = s;
        return 0;
}

/* N, Ns, Nms, Nm or Nh: the number (core/strnum) and its unit, split at the
 * trailing letters. */
static int parse_duration(const char *s, size_t len, double scale, tg_mono_ns *ret)
{
        char tmp[48];
        size_t unit = len;
        const char *u;
        double v, mult;
        if (len == 0 || len >= sizeof(tmp))
                return TG_EINVAL;
        while (unit > 0 && s[unit - 1] >= 'a' && s[unit - 1] <= 'z')
                unit--;
        memcpy(tmp, s, len);
        tmp[len] = '\0';
        u = s + unit;
        tmp[unit] = '\0';
        if (!((tmp[0] >= '0' && tmp[0] <= '9') || tmp[0] == '.'))
                return TG_EINVAL;
        if (strnum_double(tmp, 0, 1e18, &v) < 0)
                return TG_EINVAL;
        if (len - unit == 2 && memcmp(u, "ms", 2) == 0)
                mult = 1e6;
        else if (len == unit || (len - unit == 1 && *u == 's'))
                mult = 1e9;
        else if (len - unit == 1 && *u == 'm')
                mult = 60e9;
        else if (len - unit == 1 && *u == 'h')
                mult = 3600e9;
        else
                return TG_EINVAL;
        v = v * mult * scale;
        if (!isfinite(v) || v < 1.0 || v > 1e18)
                return TG_EINVAL;
        *ret = (tg_mono_ns)v;
        return 0;
}

static int parse_phase(const char *s, size_t len, double scale, const char **why,
                       struct stub_phase *ret)
{
        struct stub_phase p;
        size_t i = 0;
        trim(&s, &len);
        while (i < len && s[i] != ' ' && s[i] != '\t')
                i++;
        if (stub_mode_parse(s, i, why, &p.spec) < 0)
                return TG_EINVAL;
        p.duration_ns = TG_MONO_NEVER;
        if (i < len) {
                const char *d = s + i;
                size_t dlen = len - i;
                trim(&d, &dlen);
                if (parse_duration(d, dlen, scale, &p.duration_ns) < 0) {
                        *why = "bad phase duration (e.g. 500ms, 20s, 2m, 1h)";
                        return TG_EINVAL;
                }
        }
        *ret = p;
        return 0;
}

int stub_timeline_parse(const char *text, double time_scale, const char **why,
                        struct stub_timeline *ret_timeline)
{
        struct stub_timeline *tl;
        const char *p = text;
        int rc = TG_EINVAL;

        if (!(time_scale > 0.0) || !isfinite(time_scale)) {
                *why = "time scale must be > 0";
                return TG_EINVAL;
        }
        /* Heap copy: the struct is large and the result is all or nothing. */
        tl = calloc(1, sizeof(*tl));
        if (!tl)
                return TG_ENOMEM;
        while (*p) {
                size_t n = strcspn(p, ";\n#");
                const char *item = p;
                size_t ilen = n;
                p += n;
                if (*p == '#')
                        p += strcspn(p, "\n");
                if (*p)
                        p++;
                trim(&item, &ilen);
                if (ilen == 0)
                        continue;
                if (tl->n == STUB_PHASES_MAX) {
                        *why = "too many phases (at most 64)";
                        goto out;
                }
                if (tl->n > 0 && tl->phases[tl->n - 1].duration_ns == TG_MONO_NEVER) {
                        *why = "only the last phase may have no duration";
                        goto out;
                }
                if (parse_phase(item, ilen, time_scale, why, &tl->phases[tl->n]) < 0)
                        goto out;
                tl->n++;
        }
        if (tl->n == 0) {
                *why = "timeline has no phase";
                goto out;
        }
        *ret_timeline = *tl;
        rc = 0;
out:
        free(tl);
        return rc;
}

void stub_timeline_single(const struct stub_mode_spec *spec, struct stub_timeline *ret_timeline)
{
        ret_timeline->n = 1;
        ret_timeline->phases[0].spec = *spec;
        ret_timeline->phases[0].duration_ns = TG_MONO_NEVER;
}

void stub_timeline_at(const struct stub_timeline *tl, tg_mono_ns elapsed,
                      struct stub_mode_spec *ret_spec, size_t *ret_phase, tg_mono_ns *ret_end)
{
        tg_mono_ns start = 0;
        for (size_t i = 0; i < tl->n; i++) {
                const struct stub_phase *ph = &tl->phases[i];
                if (ph->duration_ns == TG_MONO_NEVER || elapsed < start + ph->duration_ns) {
                        *ret_spec = ph->spec;
                        *ret_phase = i;
                        *ret_end = ph->duration_ns == TG_MONO_NEVER ? TG_MONO_NEVER
                                                                    : start + ph->duration_ns;
                        return;
                }
                start += ph->duration_ns;
        }
        spec_defaults(ret_spec, STUB_FAST);
        *ret_phase = tl->n;
        *ret_end = TG_MONO_NEVER;
}

void stub_mode_format(const struct stub_mode_spec *s, char *buf, size_t cap)
{
        const char *name = stub_mode_name(s->mode);
        if (cap == 0)
                return;
        buf[0] = '\0';
        switch (s->mode) {
        case STUB_SLOW:
        case STUB_DROP:
        case STUB_E500:
                if (s->delay_ms >= 0) {
                        snprintf(buf, cap, "%s:%lld", name, (long long)s->delay_ms);
                        return;
                }
                break;
        case STUB_PROCESSING:
                if (s->processing_ms >= 0) {
                        snprintf(buf, cap, "%s:%lld", name, (long long)s->processing_ms);
                        return;
                }
                break;
        case STUB_UNAVAILABLE:
        case STUB_LIMITED:
                if (s->ra_form == STUB_RA_NONE) {
                        snprintf(buf, cap, "%s:-", name);
                        return;
                }
                if (s->ra_form != STUB_RA_DEFAULT) {
                        snprintf(buf, cap, "%s:%s%lld", name, s->ra_form == STUB_RA_DATE ? "@" : "",
                                 (long long)s->ra_seconds);
                        return;
                }
                break;
        case STUB_FAIL:
                if (s->failure_code[0]) {
                        snprintf(buf, cap, "%s:%s", name, s->failure_code);
                        return;
                }
                break;
        case STUB_CALLS:
                if (s->close_calls > 0) {
                        snprintf(buf, cap, "%s:%lld", name, (long long)s->close_calls);
                        return;
                }
                break;
        case STUB_RESET_BODY:
        case STUB_TRUNCATED:
        case STUB_INVALID:
        case STUB_HUGE:
        case STUB_TRICKLE:
        case STUB_REDIRECT:
                if (s->hostile >= 0) {
                        snprintf(buf, cap, "%s:%lld", name, (long long)s->hostile);
                        return;
                }
                break;
        case STUB_CTYPE:
                if (s->ctype[0]) {
                        snprintf(buf, cap, "%s:%s", name, s->ctype);
                        return;
                }
                break;
        case STUB_CONTRA:
                if (s->hostile >= 0) {
                        snprintf(buf, cap, "%s:%lld-%s", name, (long long)s->hostile,
                                 contra_names[s->contra]);
                        return;
                }
                break;
        case STUB_HTTP10:
                if (s->cut) {
                        snprintf(buf, cap, "%s:cut", name);
                        return;
                }
                break;
        case STUB_MIX:
                if (s->has_weights) {
                        size_t used = (size_t)snprintf(buf, cap, "%s:", name);
                        const char *sep = "";
                        for (int i = 0; i < STUB_MODE_COUNT && used < cap; i++) {
                                if (s->weights[i] == 0)
                                        continue;
                                used += (size_t)snprintf(buf + used, cap - used, "%s%s=%d", sep,
                                                         mode_names[i], s->weights[i]);
                                sep = ",";
                        }
                        return;
                }
                break;
        default:
                break;
        }
        snprintf(buf, cap, "%s", name);
}

void stub_timeline_format(const struct stub_timeline *tl, char *buf, size_t cap)
{
        size_t used = 0;
        if (cap == 0)
                return;
        buf[0] = '\0';
        for (size_t i = 0; i < tl->n && used + 1 < cap; i++) {
                char mode[256];
                stub_mode_format(&tl->phases[i].spec, mode, sizeof(mode));
                if (tl->phases[i].duration_ns == TG_MONO_NEVER)
                        used +=
                            (size_t)snprintf(buf + used, cap - used, "%s%s", i ? "; " : "", mode);
                else
                        used += (size_t)snprintf(
                            buf + used, cap - used, "%s%s %lldms", i ? "; " : "", mode,
                            (long long)(tl->phases[i].duration_ns / TG_NS_PER_MS));
        }
}
