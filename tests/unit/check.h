/*
 * check.h — the one CHECK of the cmocka unit tests.
 *
 *   CHECK(cond, fmt, ...)
 *
 * When cond is false: prints the condition and where it is, then the
 * printf-style message (say which case failed: the input, the draw, the
 * value seen), and fails the running test. cmocka's assert_* macros say
 * only "0 != 1"; a loop over a table or 100,000 seeded draws needs to say
 * which row broke.
 *
 * fmt is part of the variadic arguments so that a message with no
 * arguments (CHECK(x, "why")) is valid C11.
 */
#ifndef TG_TESTS_CHECK_H
#define TG_TESTS_CHECK_H

/* cmocka.h needs these before it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define CHECK(cond, ...)                                                                           \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        print_error("check failed: %s (%s:%d)\n  ", #cond, __FILE__, __LINE__);    \
                        print_error(__VA_ARGS__);                                                  \
                        print_error("\n");                                                         \
                        fail();                                                                    \
                }                                                                                  \
        } while (0)

#endif
