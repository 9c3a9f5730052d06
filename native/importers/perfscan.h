/* The fast scanner of the seed sampler's text format (tailscope/importers/perfcounts.py), loaded with ctypes.
 *
 * It accepts a strict subset of what the Python line reader accepts and says where it stopped otherwise; the
 * Python side then re-reads the file with the line reader, which produces the error message (file:line). */
#ifndef TS_PERFSCAN_H
#define TS_PERFSCAN_H

#include <stddef.h>
#include <stdint.h>

#define TS_PERFSCAN_ABI 1

int ts_perfscan_abi(void);

/* Scan buf[0, len): whole lines of `name[i]...[sample] = value`.
 * Per sample line r (file order): key[r] (an interned id of the text before the last `[`), sample[r], value[r].
 * Keys: key_off[k], key_len[k] locate the first occurrence of key k in buf.
 * Header lines (no index, or an all-capitals array name) are not parsed: hdr_off[h], hdr_len[h] locate them.
 * Returns the number of sample lines (>= 0), or -1 with *bad_offset = byte offset of the first line the
 * scanner does not take (anything unusual: comments, non-ASCII bytes, long lines, odd values), or -2 when an
 * output array is full (the caller sized it too small). */
int64_t ts_perfscan(const char *buf, size_t len, int32_t *key, int64_t *sample, uint64_t *value, size_t max_rows,
                    int64_t *key_off, int32_t *key_len, size_t max_keys, size_t *n_keys, int64_t *hdr_off,
                    int32_t *hdr_len, size_t max_hdr, size_t *n_hdr, int64_t *bad_offset);

#endif
