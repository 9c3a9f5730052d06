/* ts_isa.c -- see ts_isa.h. */
#include "ts_isa.h"

#include "ts_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ts_isa_recorded(void)
{
    const char *path = getenv("TAILSCOPE_CPUINFO");
    return path && *path ? path : NULL;
}

/* The first processor's flags (x86) or Features (aarch64) line of the recorded cpuinfo, read once. */
static const char *recorded_flags(void)
{
    static char line[8192];
    static bool loaded;
    if (loaded)
        return line;
    const char *path = ts_isa_recorded();
    FILE *f = fopen(path, "r");
    if (!f)
        ts_die(TS_EXIT_USAGE, "TAILSCOPE_CPUINFO=%s: %s", path, strerror(errno));
    char buf[sizeof line];
    bool found = false, seen = false;
    while (!found && fgets(buf, sizeof buf, f)) {
        if (buf[0] == '\n' && seen)
            break; /* the first processor's block only */
        seen = true;
        const char *colon = strchr(buf, ':');
        if (!colon)
            continue;
        size_t klen = (size_t)(colon - buf);
        while (klen > 0 && (buf[klen - 1] == ' ' || buf[klen - 1] == '\t'))
            klen--;
        if ((klen == 5 && strncmp(buf, "flags", 5) == 0) || (klen == 8 && strncmp(buf, "Features", 8) == 0)) {
            snprintf(line, sizeof line, " %s", colon + 1);
            found = true;
        }
    }
    if (ferror(f))
        ts_die(TS_EXIT_USAGE, "TAILSCOPE_CPUINFO=%s: %s", path, strerror(errno));
    if (fclose(f) != 0)
        ts_die(TS_EXIT_RUNTIME, "close(%s): %s", path, strerror(errno));
    if (!found)
        ts_die(TS_EXIT_USAGE,
               "TAILSCOPE_CPUINFO=%s: no 'flags' (x86) or 'Features' (aarch64) line in its first processor", path);
    for (char *c = line; *c; c++)
        if (*c == '\t' || *c == '\n')
            *c = ' ';
    loaded = true;
    return line;
}

bool ts_isa_recorded_has(const char *flag)
{
    const char *flags = recorded_flags();
    const size_t n = strlen(flag);
    for (const char *at = strstr(flags, flag); at; at = strstr(at + 1, flag))
        if (at[-1] == ' ' && (at[n] == ' ' || at[n] == '\0'))
            return true; /* a whole word: "avx512f" is not "avx512fp16" */
    return false;
}

bool ts_isa_supported(ts_isa isa)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const bool rec = ts_isa_recorded() != NULL; /* another node's CPU (TAILSCOPE_CPUINFO), else this one */
    __builtin_cpu_init();
    switch (isa) {
    case TS_ISA_SSE2: return true; /* part of x86-64 */
    case TS_ISA_AVX2:
        return rec ? ts_isa_recorded_has("avx2") && ts_isa_recorded_has("fma")
                   : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TS_ISA_AVX512F: return rec ? ts_isa_recorded_has("avx512f") : __builtin_cpu_supports("avx512f");
    }
    return false;
#else
    return isa == TS_ISA_SSE2;
#endif
}

const char *ts_isa_name(ts_isa isa)
{
    switch (isa) {
    case TS_ISA_SSE2: return "sse2";
    case TS_ISA_AVX2: return "avx2";
    case TS_ISA_AVX512F: return "avx512f";
    }
    return "?";
}

ts_isa ts_isa_select(bool *forced)
{
    const char *want = getenv("TAILSCOPE_KERNEL_ISA");
    *forced = want && *want;
    if (*forced) {
        for (int i = TS_ISA_SSE2; i <= TS_ISA_AVX512F; i++)
            if (strcmp(want, ts_isa_name((ts_isa)i)) == 0) {
                if (!ts_isa_supported((ts_isa)i))
                    ts_die(TS_EXIT_USAGE, "TAILSCOPE_KERNEL_ISA=%s: this CPU does not support it", want);
                return (ts_isa)i;
            }
        ts_die(TS_EXIT_USAGE, "TAILSCOPE_KERNEL_ISA=%s: expected sse2, avx2 or avx512f", want);
    }
    if (ts_isa_supported(TS_ISA_AVX512F))
        return TS_ISA_AVX512F;
    if (ts_isa_supported(TS_ISA_AVX2))
        return TS_ISA_AVX2;
    return TS_ISA_SSE2;
}
