/* slicehash.h -- the address-hash kernel of `tailscope addr` (a shared library loaded with ctypes).
 *
 * A hash is a GF(2)-linear map from physical-address bits to an index, followed by an optional lookup:
 *     index = sum over k < n_rows of parity(pa & rows[k]) << k
 *     value = table ? table[index] : index
 * An L3 slice-hash model (McCalpin's base sequence + permutation-select masks, see
 * src/tailscope/addr/model.py) is rows[k] = (1 << (6 + k)) | mask[k], table = the base sequence; a
 * snoop-filter set-index function is rows = its set masks and no table.
 * Every address with a bit above high_bit set is refused: ts_addrhash_map reports the first such address
 * instead of mapping it silently.
 */
#ifndef TS_SLICEHASH_H
#define TS_SLICEHASH_H

#include <stddef.h>
#include <stdint.h>

#define TS_ADDRHASH_ABI 1
#define TS_ADDRHASH_MAX_ROWS 16

typedef struct ts_addrhash ts_addrhash;

/* TS_ADDRHASH_ABI: the Python side checks it before calling anything else. */
int ts_addrhash_abi(void);

/* Build a hash. rows: n_rows (1..16) masks, none with a bit above high_bit (< 64); table: NULL or
 * 2^n_rows entries. Returns 0 and *out, or EINVAL (bad arguments) / ENOMEM. */
int ts_addrhash_new(ts_addrhash **out, const uint64_t *rows, unsigned n_rows, const uint16_t *table,
                    size_t table_len, unsigned high_bit);
void ts_addrhash_free(ts_addrhash *h);

/* Map n addresses into out[0..n). Returns -1 when every address is within range, else the position of
 * the first address with a bit above high_bit (out is then unspecified). */
int64_t ts_addrhash_map(const ts_addrhash *h, const uint64_t *pa, size_t n, uint16_t *out);

/* Parse text holding one address per line: "0x" + hex digits (either case) or decimal digits, optionally
 * surrounded by spaces or tabs, lines ended by "\n" or "\r\n" (the last one may be unterminated).
 * Writes at most cap values. Returns the count, or -1 with *bad_line = the 1-based number of the first
 * line that is not one address (empty, bad digit, above 2^64 - 1, or more than cap lines). */
int64_t ts_addr_parse(const char *text, size_t len, uint64_t *out, size_t cap, size_t *bad_line);

/* Write values[0..n) as decimal numbers, one per line, into out (at least 6 * n bytes). Returns the
 * number of bytes written. */
size_t ts_format_lines(const uint16_t *values, size_t n, char *out);

#endif
