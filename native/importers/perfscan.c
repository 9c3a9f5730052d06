/* Fast scanner of the seed sampler's text format; see perfscan.h. No global state: the key table lives on the
 * heap for the duration of one call. */
#include "perfscan.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LINE 65536 /* perfcounts.MAX_LINE */

int ts_perfscan_abi(void) { return TS_PERFSCAN_ABI; }

typedef struct {
    int64_t *slot_off; /* per hash slot: offset of the key's first occurrence, -1 = empty */
    int32_t *slot_len;
    int32_t *slot_id;
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

int64_t ts_perfscan(const char *buf, size_t len, int32_t *key, int64_t *sample, uint64_t *value, size_t max_rows,
                    int64_t *key_off, int32_t *key_len, size_t max_keys, size_t *n_keys, int64_t *hdr_off,
                    int32_t *hdr_len, size_t max_hdr, size_t *n_hdr, int64_t *bad_offset) {
    keytab t;
    size_t slots = 1024;
    while (slots < 2 * max_keys) slots <<= 1;
    t.mask = slots - 1;
    t.slot_off = malloc(slots * sizeof *t.slot_off);
    t.slot_len = malloc(slots * sizeof *t.slot_len);
    t.slot_id = malloc(slots * sizeof *t.slot_id);
    int64_t rows = 0;
    int32_t prev_id = -1;
    *n_keys = 0;
    *n_hdr = 0;
    *bad_offset = -1;
    if (t.slot_off == NULL || t.slot_len == NULL || t.slot_id == NULL) {
        rows = -3;
        goto done;
    }
    for (size_t i = 0; i < slots; i++) t.slot_off[i] = -1;

    const char *p = buf;
    const char *stop = buf + len;
    while (p < stop) {
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
        const char *lhs_end = q;
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
        (void)lhs_end;
        /* the last index is the sample number: decimal, < 2^62 */
        const char *s = last_open + 1;
        if (last_close - s > 18 || !is_digit(*s)) goto bad;
        int64_t sn = 0;
        for (; s < last_close; s++) {
            if (!is_digit(*s)) goto bad;
            sn = sn * 10 + (*s - '0');
        }
        uint64_t v;
        if (parse_value(val, e, &v) != 0) goto bad;
        size_t klen = (size_t)(last_open - name);
        int32_t id = -1;
        /* The sampler writes the series in the same order every sample: try the one after the previous first. */
        if (*n_keys > 0) {
            int32_t guess = (int32_t)((size_t)(prev_id + 1) % *n_keys);
            if ((size_t)key_len[guess] == klen && memcmp(buf + key_off[guess], name, klen) == 0) id = guess;
        }
        uint64_t h = id >= 0 ? 0 : hash_bytes(name, klen);
        size_t slot = (size_t)h & t.mask;
        while (id < 0 && t.slot_off[slot] >= 0) {
            if ((size_t)t.slot_len[slot] == klen && memcmp(buf + t.slot_off[slot], name, klen) == 0) {
                id = t.slot_id[slot];
                break;
            }
            slot = (slot + 1) & t.mask;
        }
        if (id < 0) {
            if (*n_keys >= max_keys) {
                rows = -2;
                goto done;
            }
            id = (int32_t)*n_keys;
            t.slot_off[slot] = (int64_t)(name - buf);
            t.slot_len[slot] = (int32_t)klen;
            t.slot_id[slot] = id;
            key_off[id] = (int64_t)(name - buf);
            key_len[id] = (int32_t)klen;
            (*n_keys)++;
        }
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
    free(t.slot_off);
    free(t.slot_len);
    free(t.slot_id);
    return rows;
}
