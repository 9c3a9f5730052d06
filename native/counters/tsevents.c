/*
 * tsevents -- resolve event strings the way the probes and the monitor do, and print what they become
 *
 * USAGE
 *   tsevents [--sysfs ROOT] resolve EVENT...     one JSON line per event: PMU family, attr type, config words,
 *                                                 width, scope, which source resolved it (generic, perf-syntax,
 *                                                 sysfs-alias, perfevtsel, raw, libpfm4) and the perf-syntax
 *                                                 string for each unit of its PMU
 *   tsevents decode 0xHHHHHHHH...                 the PERFEVTSEL fields of each value (event, umask, usr, os,
 *                                                 edge, pc, int, any, en, inv, cmask)
 *   tsevents [--sysfs ROOT] pmus                  the PMUs under ROOT/bus/event_source/devices with their type,
 *                                                 cpumask and format fields
 *   tsevents [--sysfs ROOT] load FILE|LIST        the events of a set file (EVENTS section) or a ';' list; events
 *                                                 this machine cannot resolve are listed as skipped
 *
 *   --sysfs ROOT   read PMUs from ROOT instead of /sys (test fixtures)
 *
 * Exit codes: 0 ok, 1 runtime failure, 2 an event or argument that does not resolve (one line on stderr).
 */
#define _GNU_SOURCE
/* messages and paths are cut to their buffers on purpose (sysfs names are short; errors stay one line) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "ts_evsel.h"
#include "ts_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void event_json(ts_json *j, ts_evlist *l, const ts_event *e)
{
    ts_json_record(j, "event");
    ts_json_str(j, "name", e->name ? e->name : e->spec);
    ts_json_str(j, "spec", e->spec);
    ts_json_str(j, "kind", e->kind == TS_EV_PERF ? "perf" : "other");
    ts_json_str(j, "family", e->family);
    if (e->kind == TS_EV_PERF) {
        ts_json_str(j, "scope", e->scope == TS_SCOPE_UNIT ? "unit" : "thread");
        ts_json_str(j, "device", e->device[0] ? e->device : NULL);
        ts_json_u64(j, "type", e->type);
        char hex[32];
        snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)e->config[0]);
        ts_json_str(j, "config", hex);
        snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)e->config[1]);
        ts_json_str(j, "config1", hex);
        snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)e->config[2]);
        ts_json_str(j, "config2", hex);
        ts_json_i64(j, "width", e->width);
        ts_json_bool(j, "exclude_user", e->excl_user);
        ts_json_bool(j, "exclude_kernel", e->excl_kernel);
    }
    ts_json_str(j, "resolved_by", e->resolved_by);
    ts_json_str(j, "per", e->per[0] ? e->per : NULL);
    ts_json_arr(j, "perf");
    if (e->kind == TS_EV_PERF) {
        char s[512];
        const ts_pmu *units[512];
        size_t n = 0;
        if (e->device[0]) {
            units[0] = ts_pmus_find(&l->pmus, e->device);
            n = units[0] ? 1 : 0;
        } else if (e->scope == TS_SCOPE_UNIT) {
            n = ts_pmus_family(&l->pmus, e->family, units, 512);
            if (n > 512)
                n = 512;
        } else {
            const ts_pmu *dev = NULL;
            for (size_t i = 0; i < l->pmus.n && !dev; i++)
                if (l->pmus.pmu[i].type == e->type && strcmp(l->pmus.pmu[i].family, e->family) == 0)
                    dev = &l->pmus.pmu[i];
            units[0] = dev;
            n = 1;
        }
        for (size_t i = 0; i < n; i++)
            if (ts_event_perf_string(l, e, units[i], s, sizeof s) == 0)
                ts_json_str(j, NULL, s);
    }
    ts_json_close(j);
    ts_json_end(j);
}

static int flush(ts_json *j)
{
    if (ts_json_flush(j, stdout) != 0) {
        fprintf(stderr, "tsevents: error: writing to stdout: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *root = NULL;
    int i = 1;
    if (i + 1 < argc && strcmp(argv[i], "--sysfs") == 0) {
        root = argv[i + 1];
        i += 2;
    }
    if (i >= argc || strcmp(argv[i], "--help") == 0) {
        fputs("usage: tsevents [--sysfs ROOT] resolve EVENT... | decode 0xHEX... | pmus | load FILE|LIST\n",
              i >= argc ? stderr : stdout);
        return i >= argc ? 2 : 0;
    }
    const char *cmd = argv[i++];
    ts_json j;
    ts_json_init(&j);
    ts_evlist l;
    ts_evlist_init(&l, root);
    char err[1024];
    int rc = 0;
    if (strcmp(cmd, "decode") == 0) {
        for (; i < argc; i++) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(argv[i], &end, 16);
            if (errno || *end || end == argv[i]) {
                fprintf(stderr, "tsevents: error: %s: expected a hexadecimal PERFEVTSEL value\n", argv[i]);
                return 2;
            }
            ts_perfevtsel d;
            ts_perfevtsel_decode(v, &d);
            ts_json_record(&j, "perfevtsel");
            ts_json_str(&j, "value", argv[i]);
            ts_json_u64(&j, "event", d.event);
            ts_json_u64(&j, "umask", d.umask);
            ts_json_bool(&j, "usr", d.usr);
            ts_json_bool(&j, "os", d.os);
            ts_json_bool(&j, "edge", d.edge);
            ts_json_bool(&j, "pc", d.pc);
            ts_json_bool(&j, "int", d.intr);
            ts_json_bool(&j, "any", d.any);
            ts_json_bool(&j, "en", d.en);
            ts_json_bool(&j, "inv", d.inv);
            ts_json_u64(&j, "cmask", d.cmask);
            ts_json_u64(&j, "reencoded", ts_perfevtsel_encode(&d));
            ts_json_end(&j);
        }
    } else if (strcmp(cmd, "resolve") == 0) {
        for (; i < argc && rc == 0; i++) {
            if (ts_evlist_add(&l, NULL, argv[i], err, sizeof err) != 0) {
                fprintf(stderr, "tsevents: error: %s\n", err);
                rc = 2;
                break;
            }
            event_json(&j, &l, &l.ev[l.n - 1]);
        }
    } else if (strcmp(cmd, "load") == 0) {
        if (i >= argc) {
            fprintf(stderr, "tsevents: error: load needs a FILE or LIST\n");
            return 2;
        }
        char skipped[16384] = "";
        if (ts_evlist_load(&l, argv[i], true, skipped, sizeof skipped, err, sizeof err) != 0) {
            fprintf(stderr, "tsevents: error: %s\n", err);
            rc = 2;
        } else {
            for (size_t k = 0; k < l.n; k++)
                event_json(&j, &l, &l.ev[k]);
            for (char *s = skipped, *nl; *s; s = nl + 1) {
                nl = strchr(s, '\n');
                if (!nl)
                    break;
                *nl = '\0';
                ts_json_record(&j, "skipped");
                ts_json_str(&j, "message", s);
                ts_json_end(&j);
            }
        }
    } else if (strcmp(cmd, "pmus") == 0) {
        ts_pmus p;
        if (ts_pmus_load(&p, root, err, sizeof err) != 0) {
            fprintf(stderr, "tsevents: error: %s\n", err);
            return 1;
        }
        for (size_t k = 0; k < p.n; k++) {
            const ts_pmu *u = &p.pmu[k];
            ts_json_record(&j, "pmu");
            ts_json_str(&j, "name", u->name);
            ts_json_str(&j, "family", u->family);
            ts_json_int_or_null(&j, "box", u->box);
            ts_json_u64(&j, "type", u->type);
            ts_json_bool(&j, "uncore", u->uncore);
            ts_json_arr(&j, "cpumask");
            for (int c = 0; c < u->ncpus; c++)
                ts_json_i64(&j, NULL, u->cpus[c]);
            ts_json_close(&j);
            ts_json_obj(&j, "format");
            for (int f = 0; f < u->nfields; f++) {
                const ts_pmu_field *fl = &u->fields[f];
                char text[128];
                size_t len = (size_t)snprintf(text, sizeof text, "%s:", fl->word == 0 ? "config"
                                                                     : fl->word == 1 ? "config1"
                                                                                     : "config2");
                for (int r = 0; r < fl->nranges; r++)
                    len += (size_t)snprintf(text + len, sizeof text - len, fl->lo[r] == fl->hi[r] ? "%s%d" : "%s%d-%d",
                                            r ? "," : "", fl->lo[r], fl->hi[r]);
                ts_json_str(&j, fl->name, text);
            }
            ts_json_close(&j);
            ts_json_end(&j);
        }
        ts_pmus_free(&p);
    } else {
        fprintf(stderr, "tsevents: error: %s: expected resolve, decode, pmus or load\n", cmd);
        rc = 2;
    }
    int frc = flush(&j);
    ts_json_free(&j);
    ts_evlist_free(&l);
    return rc ? rc : frc;
}
