/* ts_pmu.c -- see ts_pmu.h. */
#define _GNU_SOURCE
/* messages and paths are cut to their buffers on purpose (sysfs names are short; errors stay one line) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "ts_pmu.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long read_text(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, size - 1, f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return -1;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return (long)n;
}

int ts_pmu_parse_cpumask(const char *text, int **out)
{
    int cap = 16, n = 0;
    int *v = malloc((size_t)cap * sizeof *v);
    if (!v)
        return -1;
    const char *s = text;
    while (*s) {
        char *end;
        errno = 0;
        long a = strtol(s, &end, 10);
        if (end == s || errno || a < 0)
            goto bad;
        long b = a;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a)
                goto bad;
            s = end;
        }
        for (long c = a; c <= b; c++) {
            if (n == cap) {
                cap *= 2;
                int *nv = realloc(v, (size_t)cap * sizeof *v);
                if (!nv)
                    goto bad;
                v = nv;
            }
            v[n++] = (int)c;
        }
        if (*s == ',')
            s++;
        else if (*s && *s != '\n')
            goto bad;
        else
            break;
    }
    *out = v;
    return n;
bad:
    free(v);
    return -1;
}

int ts_pmu_parse_format(const char *name, const char *text, ts_pmu_field *f)
{
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    const char *s = text;
    if (strncmp(s, "config2:", 8) == 0) {
        f->word = 2;
        s += 8;
    } else if (strncmp(s, "config1:", 8) == 0) {
        f->word = 1;
        s += 8;
    } else if (strncmp(s, "config:", 7) == 0) {
        f->word = 0;
        s += 7;
    } else {
        return -1;
    }
    while (*s) {
        if (f->nranges == TS_PMU_MAX_RANGES)
            return -1;
        char *end;
        long lo = strtol(s, &end, 10);
        if (end == s || lo < 0 || lo > 63)
            return -1;
        long hi = lo;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            if (end == s + 1 || hi < lo || hi > 63)
                return -1;
            s = end;
        }
        f->lo[f->nranges] = (int)lo;
        f->hi[f->nranges] = (int)hi;
        f->nranges++;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return f->nranges > 0 ? 0 : -1;
}

int ts_pmu_field_bits(const ts_pmu_field *f)
{
    int bits = 0;
    for (int r = 0; r < f->nranges; r++)
        bits += f->hi[r] - f->lo[r] + 1;
    return bits;
}

int ts_pmu_field_put(const ts_pmu_field *f, uint64_t value, uint64_t cfg[3])
{
    int bits = ts_pmu_field_bits(f);
    if (bits < 64 && (value >> bits) != 0)
        return -1;
    for (int r = 0; r < f->nranges; r++) {
        int w = f->hi[r] - f->lo[r] + 1;
        uint64_t mask = w == 64 ? ~UINT64_C(0) : ((UINT64_C(1) << w) - 1);
        cfg[f->word] = (cfg[f->word] & ~(mask << f->lo[r])) | ((value & mask) << f->lo[r]);
        value = w == 64 ? 0 : value >> w;
    }
    return 0;
}

uint64_t ts_pmu_field_get(const ts_pmu_field *f, const uint64_t cfg[3])
{
    uint64_t v = 0;
    int shift = 0;
    for (int r = 0; r < f->nranges; r++) {
        int w = f->hi[r] - f->lo[r] + 1;
        uint64_t mask = w == 64 ? ~UINT64_C(0) : ((UINT64_C(1) << w) - 1);
        v |= ((cfg[f->word] >> f->lo[r]) & mask) << shift;
        shift += w;
    }
    return v;
}

const ts_pmu_field *ts_pmu_field_find(const ts_pmu *pmu, const char *name)
{
    for (int i = 0; i < pmu->nfields; i++)
        if (strcmp(pmu->fields[i].name, name) == 0)
            return &pmu->fields[i];
    return NULL;
}

/* HiSilicon uncore units (Kunpeng 920: drivers/perf/hisilicon) are named hisi_sccl<S>_<kind><N>, one per
 * DDR channel, L3 tag or HHA of each CPU die (SCCL): family hisi_<kind>, box S x 1000 + N, so that
 * `hisi_ddrc/flux_rd/` counts on every channel of every die, as `uncore_imc/...` does on Intel. */
static bool split_hisi(ts_pmu *u)
{
    if (strncmp(u->name, "hisi_sccl", 9) != 0)
        return false;
    const char *p = u->name + 9;
    char *end;
    long sccl = strtol(p, &end, 10);
    if (end == p || *end != '_' || sccl < 0 || sccl > 999)
        return false;
    const char *kind = end + 1; /* "ddrc0", "l3c10": the unit is the trailing digits */
    size_t letters = strlen(kind);
    while (letters > 0 && isdigit((unsigned char)kind[letters - 1]))
        letters--;
    if (letters == 0 || kind[letters] == '\0' || strlen(kind + letters) > 3)
        return false;
    long unit = strtol(kind + letters, NULL, 10);
    snprintf(u->family, sizeof u->family, "hisi_%.*s", (int)letters, kind);
    u->box = (int)(sccl * 1000 + unit);
    return true;
}

static void split_family(ts_pmu *u)
{
    snprintf(u->family, sizeof u->family, "%s", u->name);
    u->box = -1;
    if (split_hisi(u))
        return;
    size_t len = strlen(u->family);
    size_t i = len;
    while (i > 0 && isdigit((unsigned char)u->family[i - 1]))
        i--;
    if (i < len && i > 1 && u->family[i - 1] == '_' && strncmp(u->name, "uncore", 6) == 0) {
        u->box = atoi(u->family + i);
        u->family[i - 1] = '\0';
    }
}

static int load_one(ts_pmus *p, const char *name, ts_pmu *u, char *err, size_t errlen)
{
    char path[1024], text[4096];
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%.*s", (int)sizeof u->name - 1, name);
    split_family(u);
    snprintf(path, sizeof path, "%s/bus/event_source/devices/%s/type", p->root, name);
    if (read_text(path, text, sizeof text) < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *end;
    unsigned long t = strtoul(text, &end, 10);
    if (end == text || *end) {
        snprintf(err, errlen, "%s: expected a number, got \"%s\"", path, text);
        return -1;
    }
    u->type = (uint32_t)t;
    snprintf(path, sizeof path, "%s/bus/event_source/devices/%s/cpumask", p->root, name);
    if (read_text(path, text, sizeof text) >= 0 && text[0]) {
        u->ncpus = ts_pmu_parse_cpumask(text, &u->cpus);
        if (u->ncpus < 0) {
            snprintf(err, errlen, "%s: expected a CPU list like 0,24, got \"%s\"", path, text);
            u->ncpus = 0;
            return -1;
        }
    }
    snprintf(path, sizeof path, "%s/bus/event_source/devices/%s/format", p->root, name);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            if (u->nfields == TS_PMU_MAX_FIELDS)
                break;
            char fpath[1400];
            snprintf(fpath, sizeof fpath, "%s/%s", path, de->d_name);
            if (read_text(fpath, text, sizeof text) < 0)
                continue;
            if (ts_pmu_parse_format(de->d_name, text, &u->fields[u->nfields]) != 0) {
                snprintf(err, errlen, "%s: expected config[12]:LO-HI[,LO-HI], got \"%s\"", fpath, text);
                closedir(d);
                return -1;
            }
            u->nfields++;
        }
        closedir(d);
    }
    bool core = strcmp(u->name, "cpu") == 0 || strncmp(u->name, "cpu_", 4) == 0 ||
                strncmp(u->name, "armv8", 5) == 0;
    u->uncore = u->ncpus > 0 && !core;
    return 0;
}

static int cmp_pmu(const void *a, const void *b)
{
    const ts_pmu *x = a, *y = b;
    int c = strcmp(x->family, y->family);
    if (c)
        return c;
    if (x->box != y->box)
        return x->box < y->box ? -1 : 1;
    return strcmp(x->name, y->name);
}

int ts_pmus_load(ts_pmus *p, const char *root, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    snprintf(p->root, sizeof p->root, "%s", root ? root : "/sys");
    char path[1024];
    snprintf(path, sizeof path, "%s/bus/event_source/devices", p->root);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    size_t cap = 16;
    p->pmu = calloc(cap, sizeof *p->pmu);
    if (!p->pmu) {
        closedir(d);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (p->n == cap) {
            cap *= 2;
            ts_pmu *np = realloc(p->pmu, cap * sizeof *np);
            if (!np) {
                closedir(d);
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            p->pmu = np;
        }
        if (load_one(p, de->d_name, &p->pmu[p->n], err, errlen) != 0) {
            free(p->pmu[p->n].cpus);
            closedir(d);
            ts_pmus_free(p);
            return -1;
        }
        p->n++;
    }
    closedir(d);
    qsort(p->pmu, p->n, sizeof *p->pmu, cmp_pmu);
    return 0;
}

void ts_pmus_free(ts_pmus *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->pmu[i].cpus);
    free(p->pmu);
    p->pmu = NULL;
    p->n = 0;
}

const ts_pmu *ts_pmus_find(const ts_pmus *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->pmu[i].name, name) == 0)
            return &p->pmu[i];
    return NULL;
}

size_t ts_pmus_family(const ts_pmus *p, const char *family, const ts_pmu **out, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->pmu[i].family, family) == 0) {
            if (k < max)
                out[k] = &p->pmu[i];
            k++;
        }
    return k;
}

const ts_pmu *ts_pmus_core(const ts_pmus *p)
{
    const char *names[] = {"cpu", "cpu_core", "armv8_pmuv3_0", "armv8_pmuv3"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const ts_pmu *u = ts_pmus_find(p, names[i]);
        if (u)
            return u;
    }
    return NULL;
}

int ts_pmu_alias(const ts_pmus *p, const ts_pmu *pmu, const char *alias, char *out, size_t outlen)
{
    if (strchr(alias, '/') || strstr(alias, ".."))
        return -1;
    char path[1024];
    snprintf(path, sizeof path, "%s/bus/event_source/devices/%s/events/%s", p->root, pmu->name, alias);
    return read_text(path, out, outlen) < 0 ? -1 : 0;
}
