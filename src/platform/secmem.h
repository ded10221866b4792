/*
 * secmem — memory for secrets (the provider's API key, the signing key, the
 * client key, the daemon's config with its token): pages of their own that
 * are left out of core dumps (MADV_DONTDUMP), kept out of swap when the
 * system allows it (mlock, best effort: a low RLIMIT_MEMLOCK only loses
 * that), and wiped before they are given back. What libraries copy (libcurl
 * keeps a request's headers while it sends them) is beyond this; every
 * buffer of ours that holds a secret comes from here or is wiped on the
 * stack.
 */
#ifndef TG_SECMEM_H
#define TG_SECMEM_H

#include <stddef.h>

/* size zeroed bytes, or NULL when out of memory (or size is 0). The caller
 * owns them: secmem_free(). */
void *secmem_alloc(size_t size);

/* Wipes and unmaps what secmem_alloc() returned. Accepts NULL. */
void secmem_free(void *p);

#endif
