/* ts_util.c -- see ts_util.h. */
#define _GNU_SOURCE
#include "ts_util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *prog_name = "tailscope-probe";
static void (*exit_hook)(void);

void ts_set_prog(const char *name) { prog_name = name; }
const char *ts_prog(void) { return prog_name; }
void ts_set_exit_hook(void (*hook)(void)) { exit_hook = hook; }

_Noreturn void ts_die(int code, const char *fmt, ...)
{
    void (*hook)(void) = exit_hook;
    exit_hook = NULL; /* a failure inside the hook must not recurse */
    if (hook)
        hook();
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* one line: newlines in a message (from strerror or a file) become spaces */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fflush(stdout);
    fprintf(stderr, "%s: error: %s\n", prog_name, msg);
    exit(code);
}

void *ts_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        ts_die(TS_EXIT_RESOURCE, "malloc(%zu): out of memory", bytes);
    return p;
}

void *ts_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        ts_die(TS_EXIT_RESOURCE, "calloc(%zu, %zu): out of memory", n, size);
    return p;
}

void *ts_xrealloc(void *old, size_t bytes)
{
    void *p = realloc(old, bytes ? bytes : 1);
    if (!p)
        ts_die(TS_EXIT_RESOURCE, "realloc(%zu): out of memory", bytes);
    return p;
}

void *ts_xaligned(size_t align, size_t bytes)
{
    void *p = NULL;
    int rc = posix_memalign(&p, align, bytes ? bytes : 1);
    if (rc != 0)
        ts_die(TS_EXIT_RESOURCE, "posix_memalign(%zu, %zu): %s", align, bytes, strerror(rc));
    memset(p, 0, bytes);
    return p;
}

char *ts_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ts_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

int ts_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int ts_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int ts_parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int ts_parse_bytes(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    if (*end) {
        switch (tolower((unsigned char)*end)) {
        case 'k': shift = 10; break;
        case 'm': shift = 20; break;
        case 'g': shift = 30; break;
        case 't': shift = 40; break;
        default: return -1;
        }
        end++;
        /* accept k, kb, kib (any case) */
        if (tolower((unsigned char)end[0]) == 'i' && tolower((unsigned char)end[1]) == 'b')
            end += 2;
        else if (tolower((unsigned char)end[0]) == 'b')
            end += 1;
        if (*end)
            return -1;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

long ts_read_text(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len + 1 < size) {
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (close(fd) != 0)
        return -1;
    buf[len] = '\0';
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        buf[--len] = '\0';
    return (long)len;
}

int ts_read_u64(const char *path, uint64_t *out)
{
    char buf[64];
    if (ts_read_text(path, buf, sizeof buf) < 0)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno || end == buf) {
        errno = EINVAL;
        return -1;
    }
    if (*end == 'K' || *end == 'k') {
        v <<= 10;
        end++;
    } else if (*end == 'M') {
        v <<= 20;
        end++;
    }
    if (*end) {
        errno = EINVAL;
        return -1;
    }
    *out = v;
    return 0;
}

const char *ts_fmt_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", bytes);
    else if (v == floor(v))
        snprintf(buf, size, "%.0f %s", v, units[u]);
    else
        snprintf(buf, size, "%.3g %s", v, units[u]);
    return buf;
}

int ts_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ts_median_inplace(double *v, size_t n)
{
    qsort(v, n, sizeof *v, ts_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
