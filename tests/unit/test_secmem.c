/*
 * Tests of platform/secmem: the memory is zeroed, usable, and its mapping
 * is marked "do not dump" (VmFlags "dd" in /proc/self/smaps), which is what
 * keeps secrets out of a core dump; freeing accepts NULL.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "platform/secmem.h"

/* The VmFlags line of the mapping holding p ("" when not found). */
static bool vmflags_of(const void *p, char *flags, size_t size)
{
        FILE *f = fopen("/proc/self/smaps", "r");
        char line[512];
        bool in = false;
        unsigned long addr = (unsigned long)p;

        flags[0] = '\0';
        if (!f)
                return false;
        while (fgets(line, sizeof(line), f)) {
                unsigned long lo, hi;
                if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
                        in = addr >= lo && addr < hi;
                        continue;
                }
                if (in && strncmp(line, "VmFlags:", 8) == 0) {
                        snprintf(flags, size, "%s", line + 8);
                        fclose(f);
                        return true;
                }
        }
        fclose(f);
        return false;
}

static void test_not_dumped(void **state)
{
        char flags[512];
        unsigned char *p;

        (void)state;
        p = secmem_alloc(100);
        assert_non_null(p);
        for (int i = 0; i < 100; i++)
                CHECK(p[i] == 0, "byte %d not zeroed", i);
        memcpy(p, "secret", 6);
        CHECK(vmflags_of(p, flags, sizeof(flags)), "no mapping found for %p", (void *)p);
        CHECK(strstr(flags, " dd") != NULL, "VmFlags lack dd: %s", flags);
        secmem_free(p);
        /* big enough for several pages */
        p = secmem_alloc(20000);
        assert_non_null(p);
        p[19999] = 1;
        CHECK(vmflags_of(p + 19999, flags, sizeof(flags)) && strstr(flags, " dd"), "%s", flags);
        secmem_free(p);
        secmem_free(NULL);
        assert_null(secmem_alloc(0));
}

int main(void)
{
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_not_dumped)};
        return cmocka_run_group_tests(tests, NULL, NULL);
}
