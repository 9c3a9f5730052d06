/* fake_sysfs.h -- build a fake /sys/devices/system/cpu tree in a temporary directory for topology tests.
 *
 * The machine: 2 sockets x 4 cores x 2 hardware threads = CPUs 0-15. CPU i (0-7) and i+8 are the two
 * threads of core i; socket 0 has cores 0-3, socket 1 cores 4-7 (CPUs 4-7 and 12-15). CPU 15 is offline.
 * Caches: L1d 48K and L2 2048K per core (shared by i and i+8), L3 32768K per socket.
 */
#ifndef TS_FAKE_SYSFS_H
#define TS_FAKE_SYSFS_H

#include "fake_files.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void fake_sysfs_remove(const char *root) { nftw(root, fake_rm, 16, FTW_DEPTH | FTW_PHYS); }

/* Returns the root (static buffer). */
static const char *fake_sysfs(void)
{
    static char root[256];
    snprintf(root, sizeof root, "/tmp/ts-fake-sysfs-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        exit(2);
    }
    fake_write(root, "possible", "0-15");
    fake_write(root, "present", "0-15");
    fake_write(root, "online", "0-14");
    for (int cpu = 0; cpu < 16; cpu++) {
        char d[300], t[400], c[400], text[64];
        snprintf(d, sizeof d, "%s/cpu%d", root, cpu);
        fake_mkdir(d);
        if (cpu == 15)
            continue; /* offline: no topology, no cache */
        int core = cpu % 8, socket = core / 4;
        snprintf(t, sizeof t, "%s/topology", d);
        fake_mkdir(t);
        snprintf(text, sizeof text, "%d", socket);
        fake_write(t, "physical_package_id", text);
        snprintf(text, sizeof text, "%d,%d", core, core + 8);
        fake_write(t, "core_cpus_list", text);
        snprintf(c, sizeof c, "%s/cache", d);
        fake_mkdir(c);
        static const char *level[] = {"1", "1", "2", "3"};
        static const char *type[] = {"Data", "Instruction", "Unified", "Unified"};
        static const char *size[] = {"48K", "32K", "2048K", "32768K"};
        for (int k = 0; k < 4; k++) {
            char idx[500];
            snprintf(idx, sizeof idx, "%s/index%d", c, k);
            fake_mkdir(idx);
            fake_write(idx, "level", level[k]);
            fake_write(idx, "type", type[k]);
            fake_write(idx, "size", size[k]);
            if (k < 3)
                snprintf(text, sizeof text, "%d,%d", core, core + 8);
            else
                snprintf(text, sizeof text, "%d-%d,%d-%d", socket * 4, socket * 4 + 3, socket * 4 + 8,
                         socket * 4 + 11);
            fake_write(idx, "shared_cpu_list", text);
        }
    }
    return root;
}

#endif
