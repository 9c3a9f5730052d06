/* test_cpulist.c -- the --cpus syntax against a fake 2-socket, 4-core, 2-thread machine (fake_sysfs.h). */
#define _GNU_SOURCE
#include "check.h"
#include "fake_sysfs.h"
#include "ts_cpulist.h"
#include "ts_util.h"

#include <stdlib.h>

static ts_topo topo;

/* Resolve spec (allowed: NULL = all online) and compare with the expected list "0,1,2" or error text. */
static void expect(const char *spec, const bool *allowed, const char *want)
{
    int *ids = NULL, n = 0;
    char err[512], got[600];
    if (ts_cpulist_resolve(spec, &topo, allowed, &ids, &n, err, sizeof err) != 0) {
        snprintf(got, sizeof got, "error: %s", err);
    } else {
        size_t len = 0;
        got[0] = '\0';
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(got + len, sizeof got - len, "%s%d", i ? "," : "", ids[i]);
    }
    free(ids);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "--cpus %s\n  got  %s\n  want %s\n", spec, got, want);
        check_failures++;
    }
}

int main(void)
{
    char err[512];
    const char *root = fake_sysfs();
    CHECK(ts_topo_load(&topo, root, err, sizeof err) == 0);

    /* OS ids, ranges, strides, list order kept */
    expect("0-3,8,10-14:2", NULL, "0,1,2,3,8,10,12,14");
    expect("3,1,2", NULL, "3,1,2");
    expect("7", NULL, "7");
    expect("0-14:7", NULL, "0,7,14");
    /* sockets: physical cores in CPU order, first hardware thread of each */
    expect("S1:0-3", NULL, "4,5,6,7");
    expect("S1", NULL, "4,5,6,7");
    expect("S0:1,3", NULL, "1,3");
    expect("S0:0-3:2", NULL, "0,2");
    expect("S0:0-1@S1:0-1", NULL, "0,1,4,5");
    /* node numbering: thread 0 of every core, then thread 1 of every core (CPU 15 is offline) */
    expect("N:0-7", NULL, "0,1,2,3,4,5,6,7");
    expect("N:7-9", NULL, "7,8,9");
    expect("N", NULL, "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14");
    expect("cores", NULL, "0,1,2,3,4,5,6,7");
    expect("all", NULL, "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14");

    /* affinity mask: cores picks the lowest allowed thread of each core */
    bool allowed[16] = {false};
    allowed[8] = allowed[1] = allowed[9] = allowed[12] = true;
    expect("cores", allowed, "8,1,12");
    expect("all", allowed, "1,8,9,12");
    expect("3", allowed, "error: CPU 3 is not in this process's affinity mask (allowed CPUs: 1,8-9,12)");
    expect("S0:0", allowed, "error: CPU 0 is not in this process's affinity mask (allowed CPUs: 1,8-9,12)");

    /* errors */
    expect("16", NULL, "error: CPU 16 does not exist (online CPUs: 0-14)");
    expect("0-7,99", NULL, "error: CPU 99 does not exist (online CPUs: 0-14)");
    expect("15", NULL, "error: CPU 15 is offline (online CPUs: 0-14)");
    expect("1,2,1", NULL, "error: CPU 1 is listed twice (one pinned thread per CPU)");
    expect("5-3", NULL, "error: range 5-3 is reversed");
    expect("0-4:0", NULL, "error: stride 0 in 0-4:0 must be at least 1");
    expect("S2:0", NULL, "error: socket S2 does not exist (sockets: S0-S1)");
    expect("S0:4", NULL, "error: S0 has 4 physical cores (S0:0-3), no index 4");
    expect("N:15", NULL, "error: N has 15 CPUs (N:0-14), no index 15");
    expect("", NULL, "error: empty CPU list");
    expect("x", NULL,
           "error: expected a CPU number, a range A-B or A-B:STRIDE, S<socket>[:cores], N:<indices>, 'cores' or "
           "'all' at 'x'");
    expect("0-", NULL,
           "error: expected a CPU number, a range A-B or A-B:STRIDE, S<socket>[:cores], N:<indices>, 'cores' or "
           "'all' at '(end)'");
    expect("0,,1", NULL,
           "error: expected a CPU number, a range A-B or A-B:STRIDE, S<socket>[:cores], N:<indices>, 'cores' or "
           "'all' at ',1'");
    expect("1 ", NULL,
           "error: expected a CPU number, a range A-B or A-B:STRIDE, S<socket>[:cores], N:<indices>, 'cores' or "
           "'all' at ' '");
    expect("coresx", NULL,
           "error: expected a CPU number, a range A-B or A-B:STRIDE, S<socket>[:cores], N:<indices>, 'cores' or "
           "'all' at 'coresx'");

    /* the kernel's own list syntax and its formatting */
    bool f[16];
    CHECK(ts_parse_kernel_cpulist("0-2,5,7-8", f, 16) == 0);
    CHECK(f[0] && f[1] && f[2] && !f[3] && !f[4] && f[5] && !f[6] && f[7] && f[8] && !f[9]);
    CHECK(ts_parse_kernel_cpulist("", f, 16) == 0 && !f[0]);
    CHECK(ts_parse_kernel_cpulist("0-16", f, 16) != 0);
    CHECK(ts_parse_kernel_cpulist("3-1", f, 16) != 0);
    CHECK(ts_parse_kernel_cpulist("1,,2", f, 16) != 0);
    int ids[] = {0, 1, 2, 4, 6, 7};
    char buf[64];
    CHECK_STR(ts_format_cpulist(ids, 6, buf, sizeof buf), "0-2,4,6-7");
    CHECK_STR(ts_format_cpulist(ids, 0, buf, sizeof buf), "");
    CHECK_STR(ts_format_cpulist(ids, 6, buf, 8), "0-2,...");
    ts_topo_free(&topo);
    fake_sysfs_remove(root);
    CHECK_DONE();
}
