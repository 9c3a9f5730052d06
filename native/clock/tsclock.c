/* tsclock -- the effective clock and the availability of CPUs, without a PMU.
 *
 * Usage: tsclock --cpus LIST [--chunks N] [--adds N] [--repeat R]
 *
 *   --cpus LIST   OS CPU ids, e.g. 0 or 0-3,8 (required); all are measured at once, one pinned thread each
 *   --chunks N    timed chunks per CPU (default 15, at most 1024)
 *   --adds N      dependent integer adds per chunk (default 500000, about 135 us at 3.7 GHz; rounded up to
 *                 whole steps of 64)
 *   --repeat R    measure R times (default 1)
 *
 * Method (common/ts_clock.h, clock/ts_clock_cpus.h): N dependent adds take N cycles, so a chunk's rate is the
 * core clock when the chunk ran undisturbed. A chunk during which the CPU was taken away reads slow (never
 * fast), so the clock is the 75th-percentile chunk rate; availability = the time the chunks would have taken
 * at that rate / the wall time they took.
 *
 * Output: one JSON line per CPU and repetition:
 *   {"repeat":0,"cpu":0,"effective_mhz":3694.1,"available_fraction":0.981,"chunks":15,"adds":500000}
 * Exit codes: 0 ok, 2 bad option, 3 a CPU could not be pinned (outside this process's CPU set or offline).
 */
#define _GNU_SOURCE
#include "ts_clock.h"
#include "ts_clock_cpus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Noreturn void usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "tsclock: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: tsclock --cpus LIST [--chunks N] [--adds N] [--repeat R]\n");
    exit(2);
}

static long parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        usage("%s: expected an integer in range", opt);
    return v;
}

/* "0-3,8" -> ids; returns the count. */
static int parse_cpus(const char *s, int *ids, int max)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b;
        if (end == p || a < 0 || a > 65535)
            usage("--cpus %s: expected CPU ids like 0-3,8", s);
        b = a;
        p = end;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a || b > 65535)
                usage("--cpus %s: expected CPU ids like 0-3,8", s);
            p = end;
        }
        for (long c = a; c <= b; c++) {
            if (n == max)
                usage("--cpus %s: too many CPUs", s);
            ids[n++] = (int)c;
        }
        if (*p == ',')
            p++;
        else if (*p)
            usage("--cpus %s: expected CPU ids like 0-3,8", s);
    }
    if (n == 0)
        usage("--cpus %s: no CPU given", s);
    return n;
}

int main(int argc, char **argv)
{
    static int cpus[4096];
    int n = 0, chunks = 15, repeat = 1;
    long adds = TS_CLOCK_ADDS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (strcmp(opt, "-h") == 0 || strcmp(opt, "--help") == 0) {
            printf("usage: tsclock --cpus LIST [--chunks N] [--adds N] [--repeat R]\n");
            return 0;
        }
        if (i + 1 >= argc)
            usage("%s: expected a value", opt);
        const char *val = argv[++i];
        if (strcmp(opt, "--cpus") == 0)
            n = parse_cpus(val, cpus, (int)(sizeof cpus / sizeof cpus[0]));
        else if (strcmp(opt, "--chunks") == 0)
            chunks = (int)parse_long(opt, val, 1, 1024);
        else if (strcmp(opt, "--adds") == 0)
            adds = parse_long(opt, val, 1000, 1000000000L);
        else if (strcmp(opt, "--repeat") == 0)
            repeat = (int)parse_long(opt, val, 1, 1000000);
        else
            usage("%s: unknown option", opt);
    }
    if (n == 0)
        usage("%s", "--cpus LIST is required");
    double *hz = calloc((size_t)n, sizeof *hz), *avail = calloc((size_t)n, sizeof *avail);
    if (!hz || !avail) {
        fprintf(stderr, "tsclock: out of memory\n");
        return 1;
    }
    adds = (adds + TS_CLOCK_ADDS_PER_STEP - 1) / TS_CLOCK_ADDS_PER_STEP * TS_CLOCK_ADDS_PER_STEP;
    for (int r = 0; r < repeat; r++) {
        int err = ts_clock_measure(cpus, n, chunks, adds, hz, avail);
        if (err) {
            fprintf(stderr, "tsclock: cannot start measuring threads: %s\n", strerror(err));
            return 1;
        }
        for (int i = 0; i < n; i++) {
            if (hz[i] <= 0.0) {
                fprintf(stderr, "tsclock: --cpus: CPU %d cannot be measured (pinning failed: outside this "
                        "process's CPU set or offline?)\n", cpus[i]);
                return 3;
            }
            printf("{\"repeat\":%d,\"cpu\":%d,\"effective_mhz\":%.1f,\"available_fraction\":%.4f,\"chunks\":%d,"
                   "\"adds\":%ld}\n", r, cpus[i], hz[i] / 1e6, avail[i], chunks, adds);
        }
        if (fflush(stdout) != 0) {
            perror("tsclock: stdout");
            return 1;
        }
    }
    free(hz);
    free(avail);
    return 0;
}
