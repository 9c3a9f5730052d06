/* ts_preinit.c -- linked into every probe executable (never a shared library: .preinit_array is for the
 * executable only). The dynamic loader runs .preinit_array before the constructors of the shared libraries,
 * so the affinity mask is read before libgomp's constructor binds the initial thread (OMP_PROC_BIND,
 * OMP_PLACES, GOMP_CPU_AFFINITY). See ts_jobenv.h. */
#include "ts_jobenv.h"

static void preinit(int argc, char **argv, char **envp)
{
    (void)argc;
    (void)argv;
    (void)envp;
    ts_jobenv_capture_early();
}

__attribute__((section(".preinit_array"), used)) static void (*const ts_preinit_entry)(int, char **, char **) =
    preinit;
