/*
 * secmem — secret pages. See secmem.h. Each allocation is its own mapping:
 * a header page-aligned in front of the caller's bytes keeps the mapping's
 * length, so secmem_free() needs only the pointer.
 */
#include "platform/secmem.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HEADER 64 /* keeps the caller's bytes aligned for any type */

void *secmem_alloc(size_t size)
{
        long page = sysconf(_SC_PAGESIZE);
        size_t psize = page > 0 ? (size_t)page : 4096;
        size_t len;
        unsigned char *base;

        if (size == 0 || size > (size_t)-1 / 2)
                return NULL;
        len = (size + HEADER + psize - 1) / psize * psize;
        base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
                return NULL;
        /* Out of core dumps: that is the promise. Out of swap: when allowed. */
        if (madvise(base, len, MADV_DONTDUMP) != 0) {
                munmap(base, len);
                return NULL;
        }
        (void)mlock(base, len);
        memcpy(base, &len, sizeof(len));
        return base + HEADER;
}

void secmem_free(void *p)
{
        unsigned char *base;
        size_t len;

        if (!p)
                return;
        base = (unsigned char *)p - HEADER;
        memcpy(&len, base, sizeof(len));
        explicit_bzero(base, len);
        (void)munlock(base, len);
        munmap(base, len);
}
