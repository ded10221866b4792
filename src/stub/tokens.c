/*
 * The access tokens of the paypal shape (tokens.h). Invariants: a token is
 * "A21AA" and 40 bytes of [A-Za-z0-9_-] (a bearer token68); an entry with
 * token[0] == '\0' is free; the comparison of a presented token is
 * constant-time per entry.
 */
#include "tokens.h"

#include "core/rng.h"
#include "platform/digest.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct entry {
        char token[STUB_PAYPAL_TOKEN_MAX];
        tg_mono_ns lapses;
};

struct stub_tokens {
        pthread_mutex_t lock;
        struct tg_rng rng;
        size_t next; /* the ring's next slot */
        struct entry e[STUB_TOKENS_MAX];
};

struct stub_tokens *stub_tokens_new(uint64_t seed)
{
        struct stub_tokens *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
        if (pthread_mutex_init(&t->lock, NULL) != 0) {
                free(t);
                return NULL;
        }
        tg_rng_seed(&t->rng, seed ^ 0x746f6b656eULL);
        return t;
}

void stub_tokens_free(struct stub_tokens *t)
{
        if (!t)
                return;
        pthread_mutex_destroy(&t->lock);
        free(t);
}

void stub_tokens_issue(struct stub_tokens *t, tg_mono_ns now, tg_mono_ns ttl,
                       char ret[STUB_PAYPAL_TOKEN_MAX])
{
        static const char alphabet[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        struct entry *e;

        pthread_mutex_lock(&t->lock);
        e = &t->e[t->next];
        t->next = (t->next + 1) % STUB_TOKENS_MAX;
        memcpy(e->token, "A21AA", 5);
        for (size_t i = 5; i < 45; i++)
                e->token[i] = alphabet[tg_rng_next(&t->rng) & 63];
        e->token[45] = '\0';
        e->lapses = now + ttl;
        memcpy(ret, e->token, STUB_PAYPAL_TOKEN_MAX);
        pthread_mutex_unlock(&t->lock);
}

enum stub_token_check stub_tokens_check(struct stub_tokens *t, const char *authz, tg_mono_ns now)
{
        enum stub_token_check v = STUB_TOKEN_UNKNOWN;
        const char *tok;
        size_t n;

        if (!authz || strncmp(authz, "Bearer ", 7) != 0)
                return STUB_TOKEN_UNKNOWN;
        tok = authz + 7;
        n = strlen(tok);
        if (n == 0 || n >= STUB_PAYPAL_TOKEN_MAX)
                return STUB_TOKEN_UNKNOWN;
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < STUB_TOKENS_MAX; i++) {
                const struct entry *e = &t->e[i];
                if (e->token[0] && strlen(e->token) == n && digest_equal(e->token, tok, n))
                        v = now < e->lapses ? STUB_TOKEN_OK : STUB_TOKEN_EXPIRED;
        }
        pthread_mutex_unlock(&t->lock);
        return v;
}

size_t stub_tokens_revoke(struct stub_tokens *t)
{
        size_t n = 0;

        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < STUB_TOKENS_MAX; i++) {
                if (t->e[i].token[0])
                        n++;
                explicit_bzero(&t->e[i], sizeof(t->e[i]));
        }
        pthread_mutex_unlock(&t->lock);
        return n;
}

size_t stub_tokens_alive(struct stub_tokens *t, tg_mono_ns now)
{
        size_t n = 0;

        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < STUB_TOKENS_MAX; i++)
                if (t->e[i].token[0] && now < t->e[i].lapses)
                        n++;
        pthread_mutex_unlock(&t->lock);
        return n;
}
