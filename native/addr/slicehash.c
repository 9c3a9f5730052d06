/* slicehash.c -- the address-hash kernel of `tailscope addr` (see slicehash.h).
 *
 * The GF(2)-linear part is evaluated with byte-wise lookup tables: the address, shifted right past the
 * lowest bit any row uses, is cut into bytes; lut[b][v] is the index contribution of byte b holding v
 * (the XOR of the index bits whose rows select bits set in v), so an index costs one lookup per byte and
 * the result one more lookup. For a 24-slice model valid to bit 37 that is 4 + 1 loads per address.
 * The range check ORs every address into an accumulator and tests it once per call.
 * Also here: the text parser and formatter of `addr map` (one address in, one slice id out, per line).
 */
#include "slicehash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TS_LUT_BYTES 8

struct ts_addrhash {
    unsigned shift;    /* lowest address bit any row uses */
    unsigned nbytes;   /* bytes of (pa >> shift) that carry row bits */
    uint64_t over;     /* address bits above high_bit */
    uint16_t *table;   /* 2^n_rows entries (the identity when none was given) */
    uint16_t lut[TS_LUT_BYTES][256];
};

typedef void ts_map_fn(const ts_addrhash *h, const uint64_t *pa, size_t n, uint16_t *out, uint64_t *seen);

/* One loop per byte count: the byte lookups are written out and the ones beyond NB fold away. */
#define TS_LUT(nb, b) ((nb) > (b) ? lut[b][(x >> (8 * (b))) & 0xffu] : 0u)
#define TS_DEFINE_MAP(NB)                                                                               \
    static void ts_map_##NB(const ts_addrhash *h, const uint64_t *restrict pa, size_t n,                \
                            uint16_t *restrict out, uint64_t *seen)                                     \
    {                                                                                                   \
        const unsigned shift = h->shift;                                                                \
        const uint16_t *restrict table = h->table;                                                      \
        const uint16_t(*restrict lut)[256] = h->lut;                                                    \
        uint64_t acc = 0;                                                                               \
        for (size_t i = 0; i < n; i++) {                                                                \
            const uint64_t a = pa[i];                                                                   \
            const uint64_t x = a >> shift;                                                              \
            const unsigned idx = TS_LUT(NB, 0) ^ TS_LUT(NB, 1) ^ TS_LUT(NB, 2) ^ TS_LUT(NB, 3) ^              \
                                 TS_LUT(NB, 4) ^ TS_LUT(NB, 5) ^ TS_LUT(NB, 6) ^ TS_LUT(NB, 7);     \
            acc |= a;                                                                                   \
            out[i] = table[idx];                                                                        \
        }                                                                                               \
        *seen = acc;                                                                                    \
    }

TS_DEFINE_MAP(1)
TS_DEFINE_MAP(2)
TS_DEFINE_MAP(3)
TS_DEFINE_MAP(4)
TS_DEFINE_MAP(5)
TS_DEFINE_MAP(6)
TS_DEFINE_MAP(7)
TS_DEFINE_MAP(8)

static ts_map_fn *const ts_maps[TS_LUT_BYTES + 1] = {
    NULL, ts_map_1, ts_map_2, ts_map_3, ts_map_4, ts_map_5, ts_map_6, ts_map_7, ts_map_8,
};

int ts_addrhash_abi(void)
{
    return TS_ADDRHASH_ABI;
}

int ts_addrhash_new(ts_addrhash **out, const uint64_t *rows, unsigned n_rows, const uint16_t *table,
                    size_t table_len, unsigned high_bit)
{
    if (out == NULL || rows == NULL || n_rows == 0 || n_rows > TS_ADDRHASH_MAX_ROWS || high_bit > 63)
        return EINVAL;
    const size_t entries = (size_t)1 << n_rows;
    if (table != NULL && table_len != entries)
        return EINVAL;
    const uint64_t over = high_bit == 63 ? 0 : ~((UINT64_C(2) << high_bit) - 1);
    uint64_t used = 0;
    for (unsigned k = 0; k < n_rows; k++) {
        if (rows[k] & over)
            return EINVAL;
        used |= rows[k];
    }
    ts_addrhash *h = calloc(1, sizeof *h);
    if (h == NULL)
        return ENOMEM;
    h->table = malloc(entries * sizeof *h->table);
    if (h->table == NULL) {
        free(h);
        return ENOMEM;
    }
    for (size_t i = 0; i < entries; i++)
        h->table[i] = table != NULL ? table[i] : (uint16_t)i;
    h->over = over;
    if (used == 0) {
        /* a constant hash: one all-zero byte table keeps the loops uniform */
        h->shift = 0;
        h->nbytes = 1;
    } else {
        unsigned lo = (unsigned)__builtin_ctzll(used);
        unsigned hi = 63u - (unsigned)__builtin_clzll(used);
        h->shift = lo;
        h->nbytes = (hi - lo) / 8 + 1;
    }
    for (unsigned b = 0; b < h->nbytes; b++) {
        for (unsigned v = 0; v < 256; v++) {
            unsigned idx = 0;
            const unsigned first = h->shift + 8 * b;
            for (unsigned k = 0; k < n_rows; k++) {
                /* the row's bits inside this byte, selected by v: their parity is index bit k's share */
                uint64_t sel = first < 64 ? (rows[k] >> first) & v : 0;
                idx |= (unsigned)__builtin_parityll(sel) << k;
            }
            h->lut[b][v] = (uint16_t)idx;
        }
    }
    *out = h;
    return 0;
}

void ts_addrhash_free(ts_addrhash *h)
{
    if (h == NULL)
        return;
    free(h->table);
    free(h);
}

int64_t ts_addrhash_map(const ts_addrhash *h, const uint64_t *pa, size_t n, uint16_t *out)
{
    uint64_t seen = 0;
    ts_maps[h->nbytes](h, pa, n, out, &seen);
    if ((seen & h->over) == 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (pa[i] & h->over)
            return (int64_t)i;
    return -1; /* not reached: some address had an out-of-range bit */
}

/* 1 + the digit value of '0'-'9', 'a'-'f', 'A'-'F'; 0 for every other byte. A table, not comparisons:
 * random hex digits would cost a branch misprediction each. */
static const uint8_t ts_hex_value[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
    ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

/* The digit's value, or -1 when c is not a hexadecimal digit. */
static int ts_hex_digit(char c)
{
    return (int)ts_hex_value[(unsigned char)c] - 1;
}

/* Parse one line [p, end) (without its terminator) into *value; 0 on success. */
static int ts_parse_line(const char *p, const char *end, uint64_t *value)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    if (p == end)
        return -1;
    uint64_t v = 0;
    if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        p += 2;
        if (end - p > 16)
            while (p < end && *p == '0') /* leading zeros do not overflow */
                p++;
        if (end - p > 16)
            return -1;
        int bad = 0;
        for (; p < end; p++) {
            int d = ts_hex_digit(*p);
            bad |= d;
            v = (v << 4) | (uint64_t)(d & 0xf);
        }
        if (bad < 0)
            return -1;
    } else {
        for (; p < end; p++) {
            if (*p < '0' || *p > '9')
                return -1;
            uint64_t d = (uint64_t)(*p - '0');
            if (v > (UINT64_MAX - d) / 10)
                return -1;
            v = v * 10 + d;
        }
    }
    *value = v;
    return 0;
}

int64_t ts_addr_parse(const char *text, size_t len, uint64_t *out, size_t cap, size_t *bad_line)
{
    size_t count = 0;
    const char *p = text;
    const char *const end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl != NULL ? nl : end;
        if (count == cap || ts_parse_line(p, stop, &out[count]) != 0) {
            *bad_line = count + 1;
            return -1;
        }
        count++;
        p = nl != NULL ? nl + 1 : end;
    }
    return (int64_t)count;
}

size_t ts_format_lines(const uint16_t *values, size_t n, char *out)
{
    char *p = out;
    for (size_t i = 0; i < n; i++) {
        unsigned v = values[i];
        char digits[5];
        int k = 0;
        do {
            digits[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v != 0);
        while (k > 0)
            *p++ = digits[--k];
        *p++ = '\n';
    }
    return (size_t)(p - out);
}
