/* Fast scanner of the seed sampler's text format; see perfscan.h. No global state: the key table lives on the
 * heap for the duration of one call. */
#include "perfscan.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LINE 65536 /* perfcounts.MAX_LINE */

int ts_perfscan_abi(void) { return TS_PERFSCAN_ABI; }

/* Interned keys: open addressing over key ids; a key's text is buf[key_off[id], + key_len[id]). Grows (doubling,
 * rehashed from the key arrays) so that it stays at most half full: a file's ~1,300 keys need 4,096 slots, not
 * a table sized for every row the call could see. */
typedef struct {
    int32_t *slot_id; /* -1 = empty */
    size_t mask;
} keytab;

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int is_name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static int is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* value: decimal (at most 2^64 - 1) or 0x/0X with 1..16 hex digits, nothing else. */
static int parse_value(const char *p, const char *end, uint64_t *out) {
    if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        p += 2;
        if (end - p > 16) return -1;
        uint64_t v = 0;
        for (; p < end; p++) {
            int d = hex_digit(*p);
            if (d < 0) return -1;
            v = (v << 4) | (uint64_t)d;
        }
        *out = v;
        return 0;
    }
    if (p == end || end - p > 20) return -1;
    uint64_t v = 0;
    for (; p < end; p++) {
        if (!is_digit(*p)) return -1;
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int keytab_init(keytab *t, size_t slots) {
    t->slot_id = malloc(slots * sizeof *t->slot_id);
    if (t->slot_id == NULL) return -1;
    for (size_t i = 0; i < slots; i++) t->slot_id[i] = -1;
    t->mask = slots - 1;
    return 0;
}

static size_t keytab_find(const keytab *t, const char *buf, const int64_t *key_off, const int32_t *key_len,
                          const char *name, size_t klen, int32_t *id) {
    size_t slot = (size_t)hash_bytes(name, klen) & t->mask;
    *id = -1;
    while (t->slot_id[slot] >= 0) {
        int32_t k = t->slot_id[slot];
        if ((size_t)key_len[k] == klen && memcmp(buf + key_off[k], name, klen) == 0) {
            *id = k;
            break;
        }
        slot = (slot + 1) & t->mask;
    }
    return slot;
}

/* Double the table and re-insert keys 0..n-1. */
static int keytab_grow(keytab *t, const char *buf, const int64_t *key_off, const int32_t *key_len, size_t n) {
    keytab bigger;
    if (keytab_init(&bigger, 2 * (t->mask + 1)) != 0) return -1;
    for (size_t k = 0; k < n; k++) {
        int32_t found;
        size_t slot = keytab_find(&bigger, buf, key_off, key_len, buf + key_off[k], (size_t)key_len[k], &found);
        bigger.slot_id[slot] = (int32_t)k;
    }
    free(t->slot_id);
    *t = bigger;
    return 0;
}

/* The common line: the series after the previous one (the sampler writes them in the same order every sample),
 * exactly as that key's first line was written (no leading blank), `[sample] = value`, then blanks and the end of
 * the line. Parses it into *sn and *v and returns the next line's start, or NULL for anything else (the full
 * parser then decides). Accepts only lines the full parser accepts, with the same numbers. */
static const char *fast_line(const char *p, const char *stop, const char *key, size_t klen, int64_t *sn,
                             uint64_t *v) {
    if ((size_t)(stop - p) <= klen + 5 || p[klen] != '[' || memcmp(p, key, klen) != 0) return NULL;
    const char *q = p + klen + 1;
    const char *digits = q;
    int64_t n = 0;
    while (q < stop && is_digit(*q)) n = n * 10 + (*q++ - '0');
    if (q == digits || q - digits > 18 || q >= stop || *q != ']') return NULL;
    q++;
    while (q < stop && (*q == ' ' || *q == '\t')) q++;
    if (q >= stop || *q != '=') return NULL;
    q++;
    while (q < stop && (*q == ' ' || *q == '\t')) q++;
    const char *val = q;
    while (q < stop && ((unsigned char)*q > 0x20 && (unsigned char)*q < 0x7f)) q++;
    const char *val_end = q;
    while (q < stop && is_blank(*q)) q++;
    if (q < stop && *q != '\n') return NULL;
    if (q - p > MAX_LINE || val == val_end || parse_value(val, val_end, v) != 0) return NULL;
    *sn = n;
    return q < stop ? q + 1 : stop;
}

int64_t ts_perfscan(const char *buf, size_t len, int32_t *key, int64_t *sample, uint64_t *value, size_t max_rows,
                    int64_t *key_off, int32_t *key_len, size_t max_keys, size_t *n_keys, int64_t *hdr_off,
                    int32_t *hdr_len, size_t max_hdr, size_t *n_hdr, int64_t *bad_offset) {
    keytab t;
    int64_t rows = 0;
    int32_t prev_id = -1;
    *n_keys = 0;
    *n_hdr = 0;
    *bad_offset = -1;
    if (keytab_init(&t, 4096) != 0) return -3;

    const char *p = buf;
    const char *stop = buf + len;
    while (p < stop) {
        int32_t id; /* the row of this line: its series, sample number and value */
        int64_t sn;
        uint64_t v;
        if (*n_keys > 0) {
            int32_t guess = (int32_t)((size_t)(prev_id + 1) % *n_keys);
            const char *next = fast_line(p, stop, buf + key_off[guess], (size_t)key_len[guess], &sn, &v);
            if (next != NULL) {
                id = guess;
                p = next;
                goto store;
            }
        }
        const char *line = p;
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        const char *end = nl ? nl : stop;
        p = nl ? nl + 1 : stop;
        if (end - line > MAX_LINE) goto bad;
        const char *q = line;
        while (q < end && is_blank(*q)) q++;
        if (q == end) continue; /* blank line */
        const char *e = end;
        while (e > q && is_blank(e[-1])) e--;
        /* name */
        const char *name = q;
        if (!is_name_start(*q)) goto bad;
        int caps = (*q >= 'A' && *q <= 'Z');
        while (q < e && is_name_char(*q)) {
            if (!((*q >= 'A' && *q <= 'Z') || is_digit(*q) || *q == '_')) caps = 0;
            q++;
        }
        const char *last_open = NULL;
        const char *last_close = NULL;
        int n_index = 0;
        while (q < e && *q == '[') {
            last_open = q++;
            if (q < e && *q == '"') {
                q++;
                while (q < e && *q != '"') {
                    unsigned char c = (unsigned char)*q;
                    if (c == '[' || c == ']' || c < 0x20 || c >= 0x7f) goto bad;
                    q++;
                }
                if (q >= e) goto bad;
                q++;
            } else {
                if (q < e && *q == '-') q++;
                if (q >= e || !is_digit(*q)) goto bad;
                while (q < e && is_digit(*q)) q++;
            }
            if (q >= e || *q != ']') goto bad;
            last_close = q++;
            n_index++;
        }
        while (q < e && (*q == ' ' || *q == '\t')) q++;
        if (q >= e || *q != '=') goto bad;
        q++;
        while (q < e && (*q == ' ' || *q == '\t')) q++;
        const char *val = q;
        if (val == e) goto bad;
        for (const char *c = val; c < e; c++) {
            unsigned char u = (unsigned char)*c;
            if (u <= 0x20 || u >= 0x7f) goto bad; /* one token of printable ASCII */
        }
        if (n_index == 0 || caps) { /* header line: Python parses it */
            if (*n_hdr >= max_hdr) {
                rows = -2;
                goto done;
            }
            hdr_off[*n_hdr] = (int64_t)(line - buf);
            hdr_len[*n_hdr] = (int32_t)(end - line);
            (*n_hdr)++;
            continue;
        }
        /* the last index is the sample number: decimal, < 2^62 */
        const char *s = last_open + 1;
        if (last_close - s > 18 || !is_digit(*s)) goto bad;
        sn = 0;
        for (; s < last_close; s++) {
            if (!is_digit(*s)) goto bad;
            sn = sn * 10 + (*s - '0');
        }
        if (parse_value(val, e, &v) != 0) goto bad;
        size_t klen = (size_t)(last_open - name);
        size_t slot = keytab_find(&t, buf, key_off, key_len, name, klen, &id);
        if (id < 0) {
            if (*n_keys >= max_keys) {
                rows = -2;
                goto done;
            }
            id = (int32_t)*n_keys;
            key_off[id] = (int64_t)(name - buf);
            key_len[id] = (int32_t)klen;
            (*n_keys)++;
            t.slot_id[slot] = id;
            if (2 * *n_keys > t.mask && keytab_grow(&t, buf, key_off, key_len, *n_keys) != 0) {
                rows = -3;
                goto done;
            }
        }
    store:
        if ((size_t)rows >= max_rows) {
            rows = -2;
            goto done;
        }
        prev_id = id;
        key[rows] = id;
        sample[rows] = sn;
        value[rows] = v;
        rows++;
        continue;
    bad:
        *bad_offset = (int64_t)(line - buf);
        rows = -1;
        goto done;
    }
done:
    free(t.slot_id);
    return rows;
}
