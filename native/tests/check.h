/* check.h -- the smallest test harness: CHECK(cond) and CHECK_STR(a, b) count failures; main returns them. */
#ifndef TS_CHECK_H
#define TS_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                        \
            check_failures++;                                                                                \
        }                                                                                                    \
    } while (0)

#define CHECK_STR(got, want)                                                                                 \
    do {                                                                                                     \
        const char *g_ = (got), *w_ = (want);                                                                \
        if (!g_ || strcmp(g_, w_) != 0) {                                                                    \
            fprintf(stderr, "%s:%d: got \"%s\"\n%*swant \"%s\"\n", __FILE__, __LINE__, g_ ? g_ : "(null)",  \
                    (int)strlen(__FILE__) + 8, "", w_);                                                      \
            check_failures++;                                                                                \
        }                                                                                                    \
    } while (0)

#define CHECK_DONE()                                                                                         \
    do {                                                                                                     \
        if (check_failures)                                                                                  \
            fprintf(stderr, "%d check(s) failed\n", check_failures);                                         \
        return check_failures ? 1 : 0;                                                                       \
    } while (0)

#endif
