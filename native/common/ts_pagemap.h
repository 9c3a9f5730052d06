/* ts_pagemap.h -- physical addresses of virtual pages from /proc/self/pagemap.
 *
 * Each 4 KiB virtual page has a 64-bit entry: bit 63 present, bits 0-54 the page frame number (PFN).
 * Without CAP_SYS_ADMIN the kernel reports PFN 0 for every page (since Linux 4.2), so frame numbers
 * are "visible" only as root. For a huge page the entry of its first 4 KiB gives the huge page's
 * first frame; its physical address is PFN x 4096.
 */
#ifndef TS_PAGEMAP_H
#define TS_PAGEMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ts_pagemap {
    int fd;               /* -1 when /proc/self/pagemap could not be opened */
    int open_errno;
} ts_pagemap;

int ts_pagemap_open(ts_pagemap *pm);   /* 0, or -1 with pm->open_errno set */
void ts_pagemap_close(ts_pagemap *pm);

/* Physical address of the npages pages of size page_size starting at virtual address va (page aligned):
 * pa[i] = PFN x 4096, or 0 when not present. *frames_seen is set when any present page had a nonzero PFN.
 * Returns 0, or -1 with errno. */
int ts_pagemap_read(ts_pagemap *pm, uintptr_t va, size_t npages, uint64_t page_size, uint64_t *pa,
                    bool *frames_seen);

#endif
