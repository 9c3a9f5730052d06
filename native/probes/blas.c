/* blas.c -- see blas.h. The library is queried at run time (dlsym), so any CBLAS/LAPACK links. */
#define _GNU_SOURCE
#include "blas.h"

#include "ts_pin.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* A symbol by its plain name, else behind the prefix of OpenBLAS from PyPI (scipy_: blas_names.h). */
static void *sym(const char *name)
{
    void *found = dlsym(RTLD_DEFAULT, name);
    if (!found) {
        char prefixed[128];
        snprintf(prefixed, sizeof prefixed, "scipy_%s", name);
        found = dlsym(RTLD_DEFAULT, prefixed);
    }
    return found;
}

const char *ts_blas_library_of(void *symbol, char *buf, size_t size)
{
    Dl_info dl;
    char path[PATH_MAX];
    if (!symbol || !dladdr(symbol, &dl) || !dl.dli_fname)
        return NULL;
    snprintf(buf, size, "%s", realpath(dl.dli_fname, path) ? path : dl.dli_fname);
    return buf;
}

static void blas_query(ts_blas_info *b, void *symbol)
{
    static char path[PATH_MAX];
    memset(b, 0, sizeof *b);
    b->threads = -1;
    b->library = ts_blas_library_of(symbol, path, sizeof path);
    char *(*ob_config)(void), *(*ob_core)(void);
    int (*ob_threads)(void), (*ob_parallel)(void);
    *(void **)&ob_config = sym("openblas_get_config");
    *(void **)&ob_core = sym("openblas_get_corename");
    *(void **)&ob_threads = sym("openblas_get_num_threads");
    *(void **)&ob_parallel = sym("openblas_get_parallel");
    if (ob_config) {
        b->openblas = true;
        b->config = ob_config();
        /* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the second word is the version */
        if (b->config && sscanf(b->config, "OpenBLAS %127s", b->version) != 1)
            b->version[0] = '\0';
        if (ob_core)
            b->corename = ob_core();
        if (ob_threads)
            b->threads = ob_threads();
        if (ob_parallel) {
            int par = ob_parallel();
            b->parallel = par == 0 ? "sequential" : par == 1 ? "pthreads" : par == 2 ? "openmp" : NULL;
        }
        return;
    }
    void (*mkl_version)(char *, int);
    int (*mkl_threads)(void);
    *(void **)&mkl_version = sym("MKL_Get_Version_String");
    *(void **)&mkl_threads = sym("MKL_Get_Max_Threads");
    if (mkl_version) {
        mkl_version(b->version, (int)sizeof b->version);
        if (mkl_threads)
            b->threads = mkl_threads();
        return;
    }
    const char *(*blis_version)(void);
    int (*blis_threads)(void);
    *(void **)&blis_version = sym("bli_info_get_version_str");
    *(void **)&blis_threads = sym("bli_thread_get_num_threads");
    if (blis_version) {
        snprintf(b->version, sizeof b->version, "BLIS %s", blis_version());
        if (blis_threads)
            b->threads = blis_threads();
    }
}

/* ---- OpenBLAS core types by instruction-set level ---------------------------------------------------- */

enum { LEVEL_UNKNOWN = -1, LEVEL_SSE = 0, LEVEL_AVX = 1, LEVEL_AVX2 = 2, LEVEL_AVX512 = 3 };

static int core_level(const char *name)
{
    static const struct { const char *name; int level; } table[] = {
        {"SkylakeX", LEVEL_AVX512}, {"Cooperlake", LEVEL_AVX512}, {"SapphireRapids", LEVEL_AVX512},
        {"Haswell", LEVEL_AVX2}, {"Zen", LEVEL_AVX2}, {"Excavator", LEVEL_AVX2},
        {"Sandybridge", LEVEL_AVX}, {"Bulldozer", LEVEL_AVX}, {"Piledriver", LEVEL_AVX},
        {"Steamroller", LEVEL_AVX},
        {"Katmai", LEVEL_SSE}, {"Coppermine", LEVEL_SSE}, {"Northwood", LEVEL_SSE}, {"Prescott", LEVEL_SSE},
        {"Banias", LEVEL_SSE}, {"Atom", LEVEL_SSE}, {"Core2", LEVEL_SSE}, {"Penryn", LEVEL_SSE},
        {"Dunnington", LEVEL_SSE}, {"Nehalem", LEVEL_SSE}, {"Athlon", LEVEL_SSE}, {"Opteron", LEVEL_SSE},
        {"Opteron_SSE3", LEVEL_SSE}, {"Barcelona", LEVEL_SSE}, {"Nano", LEVEL_SSE}, {"Bobcat", LEVEL_SSE},
    };
    if (!name)
        return LEVEL_UNKNOWN;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcasecmp(name, table[i].name) == 0)
            return table[i].level;
    return LEVEL_UNKNOWN;
}

static const char *level_name(int level)
{
    static const char *names[] = {"SSE", "AVX", "AVX2", "AVX-512"};
    return level >= 0 && level <= 3 ? names[level] : "unknown";
}

/* The best OpenBLAS core type for this CPU, and its level. */
static const char *cpu_best_core(int *level)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
        *level = LEVEL_AVX512;
        return "SkylakeX";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *level = LEVEL_AVX2;
        return "Haswell";
    }
    if (__builtin_cpu_supports("avx")) {
        *level = LEVEL_AVX;
        return "Sandybridge";
    }
#endif
    *level = LEVEL_UNKNOWN;
    return NULL;
}

/* The core type to ask for under the policy, or NULL to leave the library alone. */
static const char *wanted_core(const char *policy, const ts_blas_info *b)
{
    if (strcmp(policy, "library") == 0)
        return NULL;
    if (strcmp(policy, "auto") != 0)
        return policy;
    int best_level, lib_level = core_level(b->corename);
    const char *best = cpu_best_core(&best_level);
    if (!b->openblas || !best || lib_level == LEVEL_UNKNOWN || lib_level >= best_level)
        return NULL;
    return best;
}

static void set_env(const char *name, const char *value, bool overwrite)
{
    if (setenv(name, value, overwrite) != 0)
        ts_die(TS_EXIT_RUNTIME, "setenv %s: %s", name, strerror(errno));
}

/* TAILSCOPE_<PROBE>_<WHAT>: mpi-p2p -> MPI_P2P */
static void env_name(char *buf, size_t size, const char *probe, const char *what)
{
    int len = snprintf(buf, size, "TAILSCOPE_%s_%s", probe, what);
    for (int i = 10; i < len && (size_t)i < size; i++)
        buf[i] = isalnum((unsigned char)buf[i]) ? (char)toupper((unsigned char)buf[i]) : '_';
}

/* First run: set the environment and the CPU set, then execute this program again. */
static _Noreturn void reexec(char **argv, const ts_probe *p, const ts_blas_info *b, const char *core,
                             const char *mark, const char *corename_var)
{
    char nthreads[16];
    snprintf(nthreads, sizeof nthreads, "%d", p->nthreads);
    set_env(mark, "1", true);
    set_env(corename_var, b->corename ? b->corename : "", true);
    if (core)
        set_env("OPENBLAS_CORETYPE", core, true);
    set_env("OPENBLAS_NUM_THREADS", nthreads, true);
    set_env("OMP_NUM_THREADS", nthreads, true);
    set_env("MKL_NUM_THREADS", nthreads, true);
    set_env("BLIS_NUM_THREADS", nthreads, true);
    set_env("OMP_WAIT_POLICY", "passive", false); /* the init team must not spin beside the BLAS threads */
    /* the BLAS's OpenMP runtime must not bind or limit its threads (OMP_PROC_BIND, OMP_THREAD_LIMIT, ...)
     * inside the confined set: the child records this process's job_environment instead (ts_jobenv.h) */
    ts_jobenv_handoff(&p->jobenv, true);
    int rc = ts_confine_self(p->cpus, p->nthreads);
    if (rc != 0)
        ts_die(TS_EXIT_RUNTIME, "--cpus: sched_setaffinity: %s", strerror(rc));
    fflush(stdout);
    execv("/proc/self/exe", argv);
    ts_die(TS_EXIT_RUNTIME, "re-executing /proc/self/exe: %s", strerror(errno));
}

void ts_blas_start(ts_blas *b, ts_probe *p, char **argv, const char *policy, void *symbol)
{
    memset(b, 0, sizeof *b);
    if (!*policy)
        ts_die(TS_EXIT_USAGE, "--blas-coretype: expected auto, library or an OPENBLAS_CORETYPE name");
    b->policy = policy;
    char mark[96], corename_var[96];
    env_name(mark, sizeof mark, p->name, "EXEC");
    env_name(corename_var, sizeof corename_var, p->name, "LIBRARY_CORENAME");
    b->child = getenv(mark) != NULL;
    blas_query(&b->info, symbol);
    bool named = strcmp(policy, "auto") != 0 && strcmp(policy, "library") != 0;
    if (named && !b->info.openblas)
        ts_die(TS_EXIT_USAGE, "--blas-coretype %s: the BLAS library (%s) is not OpenBLAS; use auto or library",
               policy, b->info.library ? b->info.library : "unknown");
    if (!b->child && !p->check_args)
        reexec(argv, p, &b->info, wanted_core(policy, &b->info), mark, corename_var);
    /* the library's own choice: from the first run when we are the re-executed one */
    b->lib_core = b->child ? getenv(corename_var) : b->info.corename;
    if (b->lib_core && !*b->lib_core)
        b->lib_core = NULL;
    b->requested = b->child ? getenv("OPENBLAS_CORETYPE") : NULL;
    b->would_use = b->child ? b->requested : wanted_core(policy, &b->info);
    b->best = cpu_best_core(&b->best_level);
    b->lib_level = core_level(b->lib_core);
}

void ts_blas_params(const ts_blas *b, ts_probe *p)
{
    ts_json *j = &p->rec;
    const ts_blas_info *i = &b->info;
    ts_json_str(j, "blas_library", i->library);
    ts_json_str(j, "blas_version", i->version[0] ? i->version : NULL);
    ts_json_str(j, "blas_config", i->config);
    ts_json_str(j, "blas_corename", i->corename);
    ts_json_str(j, "blas_corename_library", b->lib_core);
    ts_json_str(j, "blas_coretype_policy", b->policy);
    ts_json_str(j, "blas_coretype_requested", b->would_use);
    ts_json_str(j, "cpu_best_coretype", b->best);
    if (i->threads >= 0)
        ts_json_i64(j, "blas_threads", i->threads);
    else
        ts_json_null(j, "blas_threads");
    ts_json_str(j, "blas_parallel", i->parallel);
    ts_json_bool(j, "reexecuted", b->child);
    ts_json_bool(j, "process_confined", ts_affinity_is(p->cpus, p->nthreads, p->topo.ncpus));
    ts_json_str(j, "pinning", "process confined to --cpus; BLAS threads not individually pinned");
}

void ts_blas_warnings(const ts_blas *b, ts_probe *p)
{
    const ts_blas_info *i = &b->info;
    if (i->openblas && b->lib_core && b->lib_level != LEVEL_UNKNOWN && b->lib_level < b->best_level) {
        if (strcmp(b->policy, "auto") == 0)
            ts_probe_warn(p, "blas_kernel",
                          "OpenBLAS chose core type %s (%s kernels) on a CPU with %s; %s OPENBLAS_CORETYPE=%s "
                          "(OpenBLAS now uses %s)",
                          b->lib_core, level_name(b->lib_level), level_name(b->best_level),
                          b->child ? "re-executed with" : "will re-execute with", b->best,
                          b->child && i->corename ? i->corename : "?");
        else if (strcmp(b->policy, "library") == 0)
            ts_probe_warn(p, "blas_kernel",
                          "OpenBLAS chose core type %s (%s kernels) on a CPU with %s and --blas-coretype library "
                          "keeps it; --blas-coretype auto would use OPENBLAS_CORETYPE=%s",
                          b->lib_core, level_name(b->lib_level), level_name(b->best_level), b->best);
    }
    if (b->child && b->requested && i->corename && strcasecmp(b->requested, i->corename) != 0)
        ts_probe_warn(p, "blas_kernel",
                      "OPENBLAS_CORETYPE=%s was requested but OpenBLAS uses core type %s (an unknown name, or a "
                      "library built without DYNAMIC_ARCH)",
                      b->requested, i->corename);
    if (b->child && i->threads >= 0 && i->threads != p->nthreads)
        ts_probe_warn(p, "blas_kernel", "the BLAS runs %d threads on %d CPUs", i->threads, p->nthreads);
}
