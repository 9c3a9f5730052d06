/* test_counters.c -- PERFEVTSEL decoding, sysfs format parsing and event resolution against the fixture tree
 * of a 2-socket Skylake-SP node (tests/counters/fixtures/sysfs-skx-2s, argv[1]). */
#define _GNU_SOURCE
#include "check.h"
#include "ts_evsel.h"
#include "ts_perf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

static void test_decode(void)
{
    ts_perfevtsel d;
    ts_perfevtsel_decode(0x054305a3, &d); /* CYCLE_ACTIVITY.STALLS_L2_MISS */
    CHECK(d.event == 0xa3 && d.umask == 0x05 && d.cmask == 5);
    CHECK(d.usr && d.os && d.en && !d.inv && !d.edge && !d.any);
    ts_perfevtsel_decode(0x004200c0, &d); /* INST_RETIRED.KERNEL: OS only */
    CHECK(d.event == 0xc0 && d.umask == 0 && !d.usr && d.os && d.en && d.cmask == 0);
    ts_perfevtsel_decode(0x0063013c, &d); /* CPU_CLK_UNHALTED.REF_XCLK with AnyThread */
    CHECK(d.event == 0x3c && d.umask == 1 && d.usr && d.os && d.any && d.en);
    ts_perfevtsel_decode(0x0040073d, &d); /* SF_EVICTION M+E+S */
    CHECK(d.event == 0x3d && d.umask == 7 && !d.usr && !d.os && d.en);
    ts_perfevtsel_decode(0x00800000 | 0x00040000 | 0x00100000 | 0x00080000, &d);
    CHECK(d.inv && d.edge && d.intr && d.pc && !d.en);
    /* round trip over a pseudo-random sample (fixed seed, printed) */
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    printf("test_counters: round-trip seed 0x9e3779b97f4a7c15\n");
    for (int i = 0; i < 10000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint32_t reg = (uint32_t)x;
        ts_perfevtsel_decode(reg, &d);
        CHECK(ts_perfevtsel_encode(&d) == reg);
    }
}

static void test_format_parse(void)
{
    ts_pmu_field f;
    CHECK(ts_pmu_parse_format("umask_ext", "config:8-15,32-43,45-55", &f) == 0);
    CHECK(f.word == 0 && f.nranges == 3 && ts_pmu_field_bits(&f) == 8 + 12 + 11);
    uint64_t cfg[3] = {0, 0, 0};
    CHECK(ts_pmu_field_put(&f, 0x1ff, cfg) == 0); /* low 8 bits into 8-15, the 9th into bit 32 */
    CHECK(cfg[0] == ((UINT64_C(0xff) << 8) | (UINT64_C(1) << 32)));
    CHECK(ts_pmu_field_get(&f, cfg) == 0x1ff);
    CHECK(ts_pmu_parse_format("filter_state5", "config1:17-26", &f) == 0);
    CHECK(f.word == 1 && f.lo[0] == 17 && f.hi[0] == 26);
    CHECK(ts_pmu_parse_format("edge", "config:18", &f) == 0 && f.lo[0] == 18 && f.hi[0] == 18);
    CHECK(ts_pmu_field_put(&f, 2, cfg) == -1); /* does not fit one bit */
    CHECK(ts_pmu_parse_format("x", "config3:0-7", &f) == -1);
    CHECK(ts_pmu_parse_format("x", "config:7-3", &f) == -1);
    CHECK(ts_pmu_parse_format("x", "config:0-64", &f) == -1);
    CHECK(ts_pmu_parse_format("x", "config:", &f) == -1);
    int *cpus = NULL;
    CHECK(ts_pmu_parse_cpumask("0,24", &cpus) == 2 && cpus[0] == 0 && cpus[1] == 24);
    free(cpus);
    CHECK(ts_pmu_parse_cpumask("0-3,8", &cpus) == 5 && cpus[4] == 8);
    free(cpus);
    CHECK(ts_pmu_parse_cpumask("3-1", &cpus) == -1);
}

static void test_fixture(const char *root)
{
    ts_pmus p;
    char err[512];
    CHECK(ts_pmus_load(&p, root, err, sizeof err) == 0);
    const ts_pmu *cha[64];
    CHECK(ts_pmus_family(&p, "uncore_cha", cha, 64) == 24);
    CHECK(cha[0]->box == 0 && cha[23]->box == 23 && cha[10]->box == 10); /* numeric, not lexical, order */
    CHECK(cha[3]->uncore && cha[3]->ncpus == 2 && cha[3]->cpus[1] == 24);
    const ts_pmu_field *f = ts_pmu_field_find(cha[3], "filter_tid4");
    CHECK(f && f->word == 1 && f->lo[0] == 0 && f->hi[0] == 8);
    const ts_pmu *imc[8];
    CHECK(ts_pmus_family(&p, "uncore_imc", imc, 8) == 6);
    const ts_pmu *core = ts_pmus_core(&p);
    CHECK(core && core->type == 4 && !core->uncore);
    CHECK(ts_pmus_find(&p, "power") && ts_pmus_find(&p, "power")->uncore);
    char alias[128];
    CHECK(ts_pmu_alias(&p, imc[0], "cas_count_read", alias, sizeof alias) == 0);
    CHECK_STR(alias, "event=0x04,umask=0x03");
    CHECK(ts_pmu_alias(&p, imc[0], "../../x", alias, sizeof alias) == -1);
    ts_pmus_free(&p);
}

static void resolve(ts_evlist *l, const char *spec, const char *want_family, uint64_t want_config,
                    const char *want_perf, const char *want_by)
{
    ts_event e;
    char err[512];
    int rc = ts_event_resolve(l, spec, &e, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "resolve %s: %s\n", spec, err);
    CHECK(rc == 0);
    if (rc != 0)
        return;
    CHECK_STR(e.family, want_family);
    if (e.config[0] != want_config)
        fprintf(stderr, "%s: config 0x%llx, want 0x%llx\n", spec, (unsigned long long)e.config[0],
                (unsigned long long)want_config);
    CHECK(e.config[0] == want_config);
    CHECK_STR(e.resolved_by, want_by);
    if (want_perf) {
        const ts_pmu *dev = NULL;
        if (e.device[0]) {
            dev = ts_pmus_find(&l->pmus, e.device);
        } else {
            const ts_pmu *u[1];
            if (ts_pmus_family(&l->pmus, e.family, u, 1) > 0)
                dev = u[0];
            if (strcmp(e.family, "cpu") == 0)
                dev = ts_pmus_core(&l->pmus);
        }
        char s[256];
        CHECK(ts_event_perf_string(l, &e, dev, s, sizeof s) == 0);
        CHECK_STR(s, want_perf);
    }
    ts_event_free(&e);
}

static void test_resolve(const char *root)
{
    ts_evlist l;
    ts_evlist_init(&l, root);
    resolve(&l, "cpu@0x054305a3", "cpu", 0x050005a3, "cpu/event=0xa3,umask=0x5,cmask=0x5/", "perfevtsel");
    resolve(&l, "0x00431ff1", "cpu", 0x1ff1, "cpu/event=0xf1,umask=0x1f/", "perfevtsel");
    resolve(&l, "uncore_cha@0x0040013d", "uncore_cha", 0x013d, "uncore_cha_0/event=0x3d,umask=0x1/", "perfevtsel");
    resolve(&l, "uncore_imc@0x00400C04", "uncore_imc", 0x0c04, "uncore_imc_0/event=0x4,umask=0xc/", "perfevtsel");
    resolve(&l, "uncore_pcu@0x00400074", "uncore_pcu", 0x74, "uncore_pcu/event=0x74/", "perfevtsel");
    resolve(&l, "uncore_imc/cas_count_read/", "uncore_imc", 0x0304, "uncore_imc_0/event=0x4,umask=0x3/",
            "sysfs-alias");
    resolve(&l, "uncore_cha_3/event=0x34,umask=0x11/", "uncore_cha", 0x1134, "uncore_cha_3/event=0x34,umask=0x11/",
            "perf-syntax");
    resolve(&l, "cpu/event=0xd1,umask=0x20/", "cpu", 0x20d1, "cpu/event=0xd1,umask=0x20/", "perf-syntax");
    resolve(&l, "r01c2", "cpu", 0x1c2, NULL, "raw");
    resolve(&l, "task-clock", "software", 1, NULL, "generic");
    resolve(&l, "power/energy-pkg/", "power", 2, "power/event=0x2/", "sysfs-alias");
    /* LLC_LOOKUP.DATA_READ with the seed's FILTER0 0x01e20000 (state bits 17-26 set to 0xf1 -> MESF) */
    resolve(&l, "uncore_cha/event=0x34,umask=0x3,filter_state5=0xf1/", "uncore_cha", 0x0334, NULL, "perf-syntax");
    ts_event e;
    char err[512];
    CHECK(ts_event_resolve(&l, "uncore_cha/event=0x34,filter_state5=0x1ff1/", &e, err, sizeof err) == -1);
    CHECK(strstr(err, "does not fit") != NULL);
    CHECK(ts_event_resolve(&l, "uncore_xyz/event=1/", &e, err, sizeof err) == -1);
    CHECK(strstr(err, "no PMU uncore_xyz") != NULL);
    CHECK(ts_event_resolve(&l, "uncore_cha/bogus=1/", &e, err, sizeof err) == -1);
    CHECK(strstr(err, "bogus") != NULL);
    /* a UPI with umask_ext but no "umask": PERFEVTSEL umask has nowhere to go */
    CHECK(ts_event_resolve(&l, "uncore_upi@0x00400102", &e, err, sizeof err) == -1);
    CHECK(strstr(err, "umask") != NULL);
    ts_evlist_free(&l);
}

static void test_setfile(const char *root)
{
    char path[] = "/tmp/ts_test_setXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char *text = "SHORT test\nEVENTS\ntc task-clock\nsf uncore_cha@0x0040013d per=unit\n"
                       "st proc:stat:steal\n\nMETRICS\nx = tc * 2\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    ts_evlist l;
    ts_evlist_init(&l, root);
    char err[512];
    CHECK(ts_evlist_load(&l, path, false, NULL, 0, err, sizeof err) == 0);
    CHECK(l.n == 3);
    if (l.n == 3) {
        CHECK_STR(l.ev[1].name, "sf");
        CHECK_STR(l.ev[1].per, "unit");
        CHECK(l.ev[1].scope == TS_SCOPE_UNIT);
        CHECK(l.ev[2].kind == TS_EV_OTHER);
    }
    ts_evlist_free(&l);
    fd = open(path, O_WRONLY | O_TRUNC);
    const char *bad = "EVENTS\ntc task-clock\nbroken uncore_nope/event=1/\n";
    CHECK(write(fd, bad, strlen(bad)) == (ssize_t)strlen(bad));
    close(fd);
    ts_evlist_init(&l, root);
    CHECK(ts_evlist_load(&l, path, false, NULL, 0, err, sizeof err) == -1);
    char want[600];
    snprintf(want, sizeof want, "%s:3:", path);
    CHECK(strncmp(err, want, strlen(want)) == 0);
    ts_evlist_free(&l);
    char skipped[1024] = "";
    ts_evlist_init(&l, root);
    CHECK(ts_evlist_load(&l, path, true, skipped, sizeof skipped, err, sizeof err) == 0);
    CHECK(l.n == 1 && strstr(skipped, want) == skipped);
    ts_evlist_free(&l);
    unlink(path);
    /* a ';' list with names */
    ts_evlist_init(&l, root);
    CHECK(ts_evlist_load(&l, "a=task-clock;uncore_imc/event=0x4,umask=0x3/", false, NULL, 0, err, sizeof err) == 0);
    CHECK(l.n == 2 && strcmp(l.ev[0].name, "a") == 0 && strcmp(l.ev[1].name, "uncore_imc/event=0x4,umask=0x3/") == 0);
    ts_evlist_free(&l);
}

static void test_delta(void)
{
    CHECK(ts_count_delta(10, 25, 48) == 15);
    CHECK(ts_count_delta((UINT64_C(1) << 48) - 5, 10, 48) == 15);
    CHECK(ts_count_delta(UINT64_C(0xfffffff0), 0x10, 32) == 0x20);
    CHECK(ts_count_delta(5, 3, 64) == (uint64_t)-2);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_counters FIXTURE_SYSFS_ROOT\n");
        return 2;
    }
    test_decode();
    test_format_parse();
    test_fixture(argv[1]);
    test_resolve(argv[1]);
    test_setfile(argv[1]);
    test_delta();
    CHECK_DONE();
}
