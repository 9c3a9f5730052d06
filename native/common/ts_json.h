/* ts_json.h -- a tiny JSON-lines writer into a growable memory buffer.
 *
 * Records are built in memory and written in one go after the timed region (docs/probes.md: nothing is
 * printed inside a timed iteration). A record is one object on one line:
 *
 *     ts_json_record(&j, "warning");             // {"record":"warning"
 *     ts_json_str(&j, "code", "thp_partial");    // ,"code":"thp_partial"
 *     ts_json_end(&j);                           // }\n
 *
 * Keys are NULL for array elements. Integers are written exactly (64-bit, no float detour); doubles with the
 * fewest digits that read back to the same value (15 to 17); NaN and infinities become null.
 */
#ifndef TS_JSON_H
#define TS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TS_JSON_MAX_DEPTH 16

typedef struct ts_json {
    char *buf;                      /* text written so far (NUL-terminated) */
    size_t len, cap;                /* bytes used / allocated */
    int depth;                      /* open objects and arrays */
    bool first[TS_JSON_MAX_DEPTH];  /* per level: no member written yet (no comma needed) */
    char closer[TS_JSON_MAX_DEPTH]; /* per level: '}' or ']' */
} ts_json;

void ts_json_init(ts_json *j);
void ts_json_free(ts_json *j);
void ts_json_clear(ts_json *j);

void ts_json_record(ts_json *j, const char *record); /* opens a line: {"record":"..." */
void ts_json_end(ts_json *j);                        /* closes the line's object, adds "\n" */

void ts_json_obj(ts_json *j, const char *key);  /* opens a nested object */
void ts_json_arr(ts_json *j, const char *key);  /* opens an array */
void ts_json_close(ts_json *j);                 /* closes the innermost object or array */

void ts_json_str(ts_json *j, const char *key, const char *value); /* NULL value writes null */
void ts_json_i64(ts_json *j, const char *key, int64_t value);
void ts_json_u64(ts_json *j, const char *key, uint64_t value);
void ts_json_double(ts_json *j, const char *key, double value);
void ts_json_bool(ts_json *j, const char *key, bool value);
void ts_json_null(ts_json *j, const char *key);
/* An int that is null when negative (thread -1 = team record, cpu -1 = unknown). */
void ts_json_int_or_null(ts_json *j, const char *key, int64_t value);

/* Append everything from `src` (complete lines) and clear it. */
void ts_json_append(ts_json *j, ts_json *src);

/* Write the buffer to `f`, flush, and clear it. Returns 0, or -1 with errno set. */
int ts_json_flush(ts_json *j, FILE *f);

/* Format a double the way ts_json_double does ("null" for NaN/inf); returns buf. */
const char *ts_json_fmt_double(double value, char *buf, size_t size);

#endif
