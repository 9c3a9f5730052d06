/* ts_json.c -- see ts_json.h. */
#include "ts_json.h"

#include "ts_util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void ts_json_init(ts_json *j)
{
    memset(j, 0, sizeof *j);
    j->cap = 4096;
    j->buf = ts_xmalloc(j->cap);
    j->buf[0] = '\0';
}

void ts_json_free(ts_json *j)
{
    free(j->buf);
    memset(j, 0, sizeof *j);
}

void ts_json_clear(ts_json *j)
{
    j->len = 0;
    j->depth = 0;
    if (j->buf)
        j->buf[0] = '\0';
}

static void put(ts_json *j, const char *s, size_t n)
{
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 4096;
        while (j->len + n + 1 > cap)
            cap *= 2;
        j->buf = ts_xrealloc(j->buf, cap);
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(ts_json *j, const char *s) { put(j, s, strlen(s)); }

static void put_string(ts_json *j, const char *s)
{
    put(j, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': put(j, "\\\"", 2); break;
        case '\\': put(j, "\\\\", 2); break;
        case '\n': put(j, "\\n", 2); break;
        case '\r': put(j, "\\r", 2); break;
        case '\t': put(j, "\\t", 2); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                puts_(j, esc);
            } else {
                put(j, (const char *)p, 1);
            }
        }
    }
    put(j, "\"", 1);
}

/* Comma (unless first member at this level), then "key": when key is given. */
static void member(ts_json *j, const char *key)
{
    if (j->depth > 0) {
        if (!j->first[j->depth - 1])
            put(j, ",", 1);
        j->first[j->depth - 1] = false;
    }
    if (key) {
        put_string(j, key);
        put(j, ":", 1);
    }
}

static void open_(ts_json *j, const char *key, const char *bracket)
{
    member(j, key);
    puts_(j, bracket);
    if (j->depth >= TS_JSON_MAX_DEPTH)
        ts_die(TS_EXIT_RUNTIME, "internal: JSON nesting deeper than %d", TS_JSON_MAX_DEPTH);
    j->closer[j->depth] = bracket[0] == '{' ? '}' : ']';
    j->first[j->depth++] = true;
}

void ts_json_record(ts_json *j, const char *record)
{
    if (j->depth != 0)
        ts_die(TS_EXIT_RUNTIME, "internal: JSON record %s opened inside another", record);
    open_(j, NULL, "{");
    ts_json_str(j, "record", record);
}

void ts_json_obj(ts_json *j, const char *key) { open_(j, key, "{"); }
void ts_json_arr(ts_json *j, const char *key) { open_(j, key, "["); }

void ts_json_close(ts_json *j)
{
    if (j->depth <= 1)
        ts_die(TS_EXIT_RUNTIME, "internal: JSON close without an open object or array");
    char closer[2] = {j->closer[--j->depth], '\0'};
    puts_(j, closer);
}

void ts_json_end(ts_json *j)
{
    if (j->depth != 1)
        ts_die(TS_EXIT_RUNTIME, "internal: JSON record ended with %d levels open", j->depth - 1);
    puts_(j, "}\n");
    j->depth = 0;
}

void ts_json_str(ts_json *j, const char *key, const char *value)
{
    member(j, key);
    if (value)
        put_string(j, value);
    else
        puts_(j, "null");
}

void ts_json_i64(ts_json *j, const char *key, int64_t value)
{
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, value);
    member(j, key);
    puts_(j, b);
}

void ts_json_u64(ts_json *j, const char *key, uint64_t value)
{
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, value);
    member(j, key);
    puts_(j, b);
}

const char *ts_json_fmt_double(double value, char *buf, size_t size)
{
    if (!isfinite(value)) {
        snprintf(buf, size, "null");
        return buf;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, value);
        if (strtod(buf, NULL) == value)
            break;
    }
    /* "%g" never writes a bare "." or "inf" for finite values; it may write "1e+20", which is JSON. */
    return buf;
}

void ts_json_double(ts_json *j, const char *key, double value)
{
    char b[40];
    member(j, key);
    puts_(j, ts_json_fmt_double(value, b, sizeof b));
}

void ts_json_bool(ts_json *j, const char *key, bool value)
{
    member(j, key);
    puts_(j, value ? "true" : "false");
}

void ts_json_null(ts_json *j, const char *key)
{
    member(j, key);
    puts_(j, "null");
}

void ts_json_int_or_null(ts_json *j, const char *key, int64_t value)
{
    if (value < 0)
        ts_json_null(j, key);
    else
        ts_json_i64(j, key, value);
}

void ts_json_append(ts_json *j, ts_json *src)
{
    put(j, src->buf, src->len);
    ts_json_clear(src);
}

int ts_json_flush(ts_json *j, FILE *f)
{
    if (j->len && fwrite(j->buf, 1, j->len, f) != j->len)
        return -1;
    if (fflush(f) != 0)
        return -1;
    ts_json_clear(j);
    return 0;
}
