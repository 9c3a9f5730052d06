/* test_topo.c -- topology from a fake sysfs tree (values known by construction) and from this machine. */
#define _GNU_SOURCE
#include "check.h"
#include "fake_sysfs.h"
#include "ts_topo.h"

int main(void)
{
    char err[512];
    ts_topo t;
    const char *root = fake_sysfs();
    CHECK(ts_topo_load(&t, root, err, sizeof err) == 0);
    CHECK(t.ncpus == 16);
    CHECK(t.nsockets == 2);
    CHECK(t.ncores == 8);
    CHECK(t.nnode == 15);
    CHECK(!t.cpus[15].online);
    CHECK(t.cpus[12].online && t.cpus[12].socket == 1 && t.cpus[12].core_first == 4 && t.cpus[12].thread == 1);
    CHECK(t.cpus[4].thread == 0 && t.cpus[4].core_first == 4);
    /* L2 per core: 2 MiB shared by CPUs i and i+8 */
    CHECK(t.cpus[9].l2.level == 2 && t.cpus[9].l2.size == 2048u * 1024 && t.cpus[9].l2.first_cpu == 1);
    CHECK(t.cpus[9].l2.ncpus == 2 && t.cpus[9].l2.ncores == 1);
    /* L3 per socket: 32 MiB; socket 1's has CPUs 4-7,12-14 online (15 offline): 7 CPUs, 4 cores */
    CHECK(t.cpus[13].llc.level == 3 && t.cpus[13].llc.size == 32u << 20 && t.cpus[13].llc.first_cpu == 4);
    CHECK(t.cpus[13].llc.ncpus == 7 && t.cpus[13].llc.ncores == 4);
    CHECK(t.cpus[0].llc.ncpus == 8 && t.cpus[0].llc.first_cpu == 0);
    int want_order[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
    for (int i = 0; i < 15; i++)
        CHECK(t.node_order[i] == want_order[i]);
    ts_topo_free(&t);
    fake_sysfs_remove(root);

    /* a missing tree is an error naming the file */
    CHECK(ts_topo_load(&t, "/nonexistent-sysfs", err, sizeof err) != 0);
    CHECK(strstr(err, "/nonexistent-sysfs/present") != NULL);

    /* this machine: at least CPU 0... some online CPU with a socket and a core */
    CHECK(ts_topo_load(&t, "/sys/devices/system/cpu", err, sizeof err) == 0);
    CHECK(t.ncpus >= 1 && t.nsockets >= 1 && t.ncores >= 1 && t.nnode >= 1);
    for (int i = 0; i < t.nnode; i++)
        CHECK(t.cpus[t.node_order[i]].online && t.cpus[t.node_order[i]].socket >= 0);
    ts_topo_free(&t);
    CHECK_DONE();
}
