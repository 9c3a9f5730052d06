/* ts_pagemap.c -- see ts_pagemap.h. */
#define _GNU_SOURCE
#include "ts_pagemap.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define PM_PRESENT (UINT64_C(1) << 63)
#define PM_PFN_MASK ((UINT64_C(1) << 55) - 1)
#define SMALL UINT64_C(4096)

int ts_pagemap_open(ts_pagemap *pm)
{
    pm->fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    pm->open_errno = pm->fd < 0 ? errno : 0;
    return pm->fd < 0 ? -1 : 0;
}

void ts_pagemap_close(ts_pagemap *pm)
{
    if (pm->fd >= 0)
        close(pm->fd);
    pm->fd = -1;
}

static int read_entries(int fd, uintptr_t va, uint64_t *e, size_t n)
{
    off_t off = (off_t)(va / SMALL * sizeof(uint64_t));
    size_t want = n * sizeof *e, got = 0;
    while (got < want) {
        ssize_t r = pread(fd, (char *)e + got, want - got, off + (off_t)got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0) {
            errno = EIO;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

int ts_pagemap_read(ts_pagemap *pm, uintptr_t va, size_t npages, uint64_t page_size, uint64_t *pa,
                    bool *frames_seen)
{
    *frames_seen = false;
    if (pm->fd < 0) {
        errno = pm->open_errno;
        return -1;
    }
    enum { BLOCK = 512 };
    uint64_t e[BLOCK];
    if (page_size == SMALL) { /* consecutive entries: read in blocks */
        for (size_t i = 0; i < npages; i += BLOCK) {
            size_t n = npages - i < BLOCK ? npages - i : BLOCK;
            if (read_entries(pm->fd, va + i * SMALL, e, n) != 0)
                return -1;
            for (size_t k = 0; k < n; k++) {
                bool present = e[k] & PM_PRESENT;
                uint64_t pfn = e[k] & PM_PFN_MASK;
                pa[i + k] = present ? pfn * SMALL : 0;
                *frames_seen |= present && pfn != 0;
            }
        }
        return 0;
    }
    for (size_t i = 0; i < npages; i++) { /* one entry per huge page: its first 4 KiB */
        if (read_entries(pm->fd, va + i * page_size, e, 1) != 0)
            return -1;
        bool present = e[0] & PM_PRESENT;
        uint64_t pfn = e[0] & PM_PFN_MASK;
        pa[i] = present ? pfn * SMALL : 0;
        *frames_seen |= present && pfn != 0;
    }
    return 0;
}
