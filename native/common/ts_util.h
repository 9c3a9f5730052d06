/* ts_util.h -- exit codes, the one-line error, small parsers and checked allocation.
 *
 * Every probe prints at most one line on stderr when it fails:
 *     PROBE: error: WHAT: WHY[; what to do]
 * and exits with one of the codes below (docs/probes.md, "Exit codes and errors").
 */
#ifndef TS_UTIL_H
#define TS_UTIL_H

#include <stddef.h>
#include <stdint.h>

enum ts_exit {
    TS_EXIT_OK = 0,       /* measured and validated */
    TS_EXIT_RUNTIME = 1,  /* a syscall failed unexpectedly */
    TS_EXIT_USAGE = 2,    /* unknown option, malformed value, CPU that does not exist */
    TS_EXIT_RESOURCE = 3, /* huge pages not reserved, out of memory, not permitted */
    TS_EXIT_INVALID = 4   /* the result failed validation */
};

/* The name printed before "error:" ("l2sum", "stream", ...). Set once at start-up. */
void ts_set_prog(const char *name);
const char *ts_prog(void);

/* Called by ts_die() before it prints the error line, e.g. to flush records already produced. */
void ts_set_exit_hook(void (*hook)(void));

/* Print "PROG: error: MESSAGE" on stderr and exit with `code`. */
_Noreturn void ts_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Checked allocation: out of memory is exit 3 with the size in the message. */
void *ts_xmalloc(size_t bytes);
void *ts_xcalloc(size_t n, size_t size);
void *ts_xrealloc(void *p, size_t bytes);
void *ts_xaligned(size_t align, size_t bytes); /* zeroed, `align` a power of two >= sizeof(void*) */
char *ts_xstrdup(const char *s);

/* Parsers: 0 on success, -1 when `s` is not entirely a value of that kind (no partial parses). */
int ts_parse_i64(const char *s, int64_t *out);
int ts_parse_u64(const char *s, uint64_t *out);
int ts_parse_double(const char *s, double *out);
/* BYTES: a non-negative integer with an optional binary suffix k, m, g or t (either case; "kb",
 * "kib" and "k" are the same): "64", "4k" = 4096, "1g" = 2^30. Overflow is an error. */
int ts_parse_bytes(const char *s, uint64_t *out);

/* Read a small text file into buf (NUL-terminated, trailing newlines removed).
 * Returns the length, or -1 with errno set. */
long ts_read_text(const char *path, char *buf, size_t size);
/* The same for a file holding one unsigned integer (decimal); a "K" suffix (sysfs cache sizes) multiplies by
 * 1024. Returns 0 or -1 (errno set; EINVAL when the content is not such a number). */
int ts_read_u64(const char *path, uint64_t *out);

/* "1.9 MiB", "300 MiB", "64 KiB", "512 B": a byte count for messages. */
const char *ts_fmt_bytes(uint64_t bytes, char *buf, size_t size);

/* Sort helpers (qsort comparators) and a median of an array it sorts in place (n >= 1). */
int ts_cmp_double(const void *a, const void *b);
double ts_median_inplace(double *v, size_t n);

#endif
