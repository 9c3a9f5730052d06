/* blas.h -- what the BLAS-based probes (dgemm, hpl) share: the loaded library's self-description, the
 * OpenBLAS core-type policy (--blas-coretype auto|library|NAME) and the one re-execution that puts the thread
 * count, the CPU set and OPENBLAS_CORETYPE in place before the library starts its threads.
 *
 * A probe's main():
 *     ts_blas b;
 *     ts_blas_start(&b, &p, argv, policy, (void *)cblas_dgemm);  // re-executes once (not with --check-args)
 *     ... count the team, confine the process ...
 *     ts_probe_config_begin(&p, counted);  ...  ts_blas_params(&b, &p);  ...  ts_probe_config_end(&p);
 *     ts_blas_warnings(&b, &p);
 *
 * The re-executed process is marked by TAILSCOPE_<PROBE>_EXEC (TAILSCOPE_DGEMM_EXEC, TAILSCOPE_HPL_EXEC); the
 * core type OpenBLAS chose on its own travels in TAILSCOPE_<PROBE>_LIBRARY_CORENAME.
 */
#ifndef TS_BLAS_H
#define TS_BLAS_H

#include "ts_probe.h"

#include <stdbool.h>

typedef struct ts_blas_info {
    const char *library;   /* file the given symbol came from (realpath) */
    char version[128];
    const char *config;    /* openblas_get_config() */
    const char *corename;  /* openblas_get_corename() */
    int threads;           /* openblas_get_num_threads() / mkl_get_max_threads() / ..., -1 unknown */
    const char *parallel;  /* "pthreads" | "openmp" | "sequential" | NULL */
    bool openblas;
} ts_blas_info;

typedef struct ts_blas {
    ts_blas_info info;     /* as loaded in this process */
    const char *policy;    /* --blas-coretype */
    bool child;            /* this is the re-executed process */
    const char *lib_core;  /* the core type the library chose on its own (NULL: unknown / not OpenBLAS) */
    const char *requested; /* OPENBLAS_CORETYPE this process was started with by the policy (child only) */
    const char *would_use; /* the core type the policy asks for (NULL: the library's choice) */
    const char *best;      /* the best OpenBLAS core type for this CPU */
    int best_level, lib_level;
} ts_blas;

/* Query the library `symbol` lives in (a BLAS function's address), check the policy (exit 2 on a named core
 * type with a library that is not OpenBLAS) and, in the first process (unless --check-args), set the
 * environment, confine the CPU set to --cpus and re-execute /proc/self/exe; never returns then. */
void ts_blas_start(ts_blas *b, ts_probe *p, char **argv, const char *policy, void *symbol);

/* The library's description into the open params object of the config record (blas_* keys). */
void ts_blas_params(const ts_blas *b, ts_probe *p);

/* blas_kernel warnings: an old core type chosen by the library, a requested core type not taken, a thread
 * count other than the CPUs'. */
void ts_blas_warnings(const ts_blas *b, ts_probe *p);

/* realpath of the shared object `symbol` was loaded from, in a static buffer per call site's `buf`. */
const char *ts_blas_library_of(void *symbol, char *buf, size_t size);

#endif
