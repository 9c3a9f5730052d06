/*
 * mpi-p2p -- MPI ping-pong between two ranks: one-way latency and bandwidth over message sizes
 *
 * WHAT IT MEASURES
 *   Rank 0 sends a message of B bytes to rank 1 (MPI_Send), rank 1 receives it and sends it back, rank 0
 *   receives it: one round trip. Half a round trip is the one-way time; B / one-way time is the bandwidth
 *   (the OSU/IMB PingPong definition). The seed (SJTU) found KP920's MPI latency higher and its bandwidth
 *   "steep and turbulent" over message sizes; every iteration is kept so that turbulence is visible.
 *   Intra-node by default (both ranks on this node, pinned to the two CPUs of --cpus); between nodes when
 *   started by the site's launcher (srun -N2 -n2, mpirun -H a,b).
 *
 * WHAT COUNTS
 *   Per iteration: R(B) round trips timed by rank 0 (TSC, rdtscp + lfence, around the sends and receives);
 *       one-way latency [us]   = iteration seconds x 1e6 / (2 x R(B))
 *       bandwidth [GB/s]       = B / one-way seconds / 1e9         (summary only)
 *   The headline metric "mpi_latency" is the median one-way latency at the smallest size (lower is better).
 *
 * SIZING RULE
 *   Sizes: powers of two from --min-bytes (default 1) to --max-bytes (default 4 MiB), or --sizes. Round
 *   trips per iteration: R(B) = clamp(--round-trips x 4096 / B, 10, --round-trips): 1000 up to 4 KiB, then
 *   fewer so an iteration moves at most ~8 MB each way (4 MiB messages: 10 round trips, 80 MiB).
 *
 * LAUNCHING
 *   Started by hand or by `tailscope run` (no MPI launcher around it), the probe re-executes itself as
 *   `MPIEXEC -n 2 <itself> <args>` with the launcher of the MPI it was built with (CMake's FindMPI), so it
 *   runs with the MPI found at build time. For Open MPI it sets binding off (always:
 *   OMPI_MCA_hwloc_base_binding_policy=none, the probe pins each rank itself; the job's OMP_PROC_BIND,
 *   OMP_PLACES, GOMP_CPU_AFFINITY, KMP_AFFINITY are removed and recorded in job_environment) and, unless
 *   already set, the shared-memory transport
 *   (OMPI_MCA_pml=ob1, OMPI_MCA_btl=self,vader: intra-node), and, as root, OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1.
 *   Inside a launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK set) it runs as is: --cpus is resolved
 *   against the node as the job sees it (cgroup cpuset), the same list in every rank, and the rank that is
 *   r-th on its node (MPI_COMM_TYPE_SHARED) must be allowed on the r-th CPU: a launcher that binds each
 *   rank (srun --cpu-bind=cores, mpirun --bind-to core) to the r-th CPU works, another binding is refused
 *   naming it. Open MPI's launcher needs a network interface that is up: in a network namespace,
 *   `ip link set lo up` first.
 *   params.mpi_library is MPI_Get_library_version's first line; params.launcher what started the ranks.
 *
 * HOW IT RUNS
 *   The rank that is r-th on its node pins itself to the r-th CPU of --cpus (between two nodes: each the
 *   first); rank 0 maps its send and receive buffers (--max-bytes each, page policy), rank 1 one buffer. For each size, smallest first, after a barrier: one warm-up iteration
 *   (warmup:true) and --iterations timed ones. Before each iteration rank 0 fills its send buffer with a
 *   pattern of (size, iteration); rank 1 echoes what it received. Validation: after every iteration the
 *   received message must equal the one sent, byte for byte: "Solution Validates: every echoed message
 *   equals the one sent (N iterations)". Otherwise exit 4.
 *
 * OPTIONS
 *   --min-bytes BYTES        smallest message (default 1)
 *   --max-bytes BYTES        largest message (default 4m)
 *   --sizes LIST             explicit sizes, comma-separated, k/m suffixes (overrides the two above)
 *   --round-trips N          round trips per iteration at small sizes (default 1000)
 *   --iterations N           timed iterations per size (default 11)
 *   --cpus LIST              the two CPUs of rank 0 and rank 1 (default: cores, the first two)
 *   --page 4k|thp|2m|1g      page policy of the message buffers (default thp)
 *   --offset BYTES           start the buffers this far into their allocation (multiple of 64)
 *   --no-pages               do not read /proc/self/pagemap
 *   --seed N                 seed of the message pattern (default 1)
 *   --check-args             resolve everything (no launch), print the config record, exit 0
 *   --help                   this manual
 *
 * OUTPUT
 *   JSON lines on stdout from rank 0 only (docs/probes.md): config, warnings, pages (arrays send, recv),
 *   iteration (kernel pingpong_BYTES, thread 0 = rank 0, value one-way us), validation, result (metric
 *   "mpi_latency", us; summary: sizes [{bytes, round_trips, latency_us{...}, bandwidth_gbs{...}}]).
 *   Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 resource not available (no launcher, fewer than
 *   two CPUs for the ranks), 4 validation failed.
 */
#define _GNU_SOURCE
#include "ts_pin.h"
#include "ts_probe.h"

#include <mpi.h>

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi-p2p_manual.h"

#ifndef TS_MPIEXEC
#define TS_MPIEXEC "mpiexec"
#endif
#define MAX_SIZES 64
#define TAG 17

typedef struct stamp {
    uint64_t t0, t1;
    int cpu;
} stamp;

static const char *launcher_env(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i]))
            return vars[i];
    return NULL;
}

static void set_default(const char *name, const char *value)
{
    if (!getenv(name) && setenv(name, value, 1) != 0)
        ts_die(TS_EXIT_RUNTIME, "setenv %s: %s", name, strerror(errno));
}

/* Re-execute under the build's MPI launcher with two ranks; never returns. */
static _Noreturn void relaunch(int argc, char **argv, const ts_jobenv *jobenv)
{
    if (getenv("TAILSCOPE_MPI_EXEC"))
        ts_die(TS_EXIT_RESOURCE, "started by %s, but no MPI rank variables (OMPI_COMM_WORLD_SIZE, PMI_SIZE, "
               "PMIX_RANK) are set: is it the launcher of the MPI this probe was built with?", TS_MPIEXEC);
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len < 0)
        ts_die(TS_EXIT_RUNTIME, "readlink /proc/self/exe: %s", strerror(errno));
    self[len] = '\0';
    set_default("TAILSCOPE_MPI_EXEC", "1");
    /* the ranks see what this process found (job_environment) and bind nothing themselves: the probe pins each
     * rank, so a job's OMPI_MCA_hwloc_base_binding_policy or OMP_PROC_BIND must not bind them first */
    ts_jobenv_handoff(jobenv, true);
    if (setenv("OMPI_MCA_hwloc_base_binding_policy", "none", 1) != 0)
        ts_die(TS_EXIT_RUNTIME, "setenv OMPI_MCA_hwloc_base_binding_policy: %s", strerror(errno));
    set_default("OMPI_MCA_pml", "ob1");
    set_default("OMPI_MCA_btl", "self,vader");
    if (geteuid() == 0) {
        set_default("OMPI_ALLOW_RUN_AS_ROOT", "1");
        set_default("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    char **args = ts_xcalloc((size_t)argc + 5, sizeof *args);
    int k = 0;
    args[k++] = (char *)TS_MPIEXEC;
    args[k++] = (char *)"-n";
    args[k++] = (char *)"2";
    args[k++] = self;
    for (int i = 1; i < argc; i++)
        args[k++] = argv[i];
    args[k] = NULL;
    fflush(stdout);
    execvp(TS_MPIEXEC, args);
    ts_die(TS_EXIT_RESOURCE, "cannot start the MPI launcher %s: %s (install the MPI this probe was built with, "
           "e.g. Debian openmpi-bin)", TS_MPIEXEC, strerror(errno));
}

static void mpi_check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        ts_die(TS_EXIT_RUNTIME, "%s: %s", what, msg);
    }
}

static uint64_t round_trips_for(uint64_t bytes, int64_t rt)
{
    uint64_t r = bytes ? (uint64_t)rt * 4096 / bytes : (uint64_t)rt;
    if (r > (uint64_t)rt)
        r = (uint64_t)rt;
    if (r < 10)
        r = 10;
    return r;
}

/* The message pattern of (seed, size, iteration), one byte per position. */
static void fill(unsigned char *b, uint64_t n, uint64_t seed, uint64_t size, int64_t it)
{
    uint64_t x = seed * UINT64_C(0x9E3779B97F4A7C15) ^ size * UINT64_C(0xBF58476D1CE4E5B9) ^ (uint64_t)it;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (unsigned char)x;
    }
}

int main(int argc, char **argv)
{
    uint64_t min_bytes = 1, max_bytes = UINT64_C(4) << 20;
    int64_t round_trips = 1000, iterations = 11;
    const char *sizes_spec = NULL;
    ts_opt opts[] = {
        {"--min-bytes", TS_OPT_BYTES, &min_bytes, 0, 1e12, NULL},
        {"--max-bytes", TS_OPT_BYTES, &max_bytes, 1, 1 << 30, NULL},
        {"--sizes", TS_OPT_STR, &sizes_spec, 0, 0, NULL},
        {"--round-trips", TS_OPT_I64, &round_trips, 1, 1e9, NULL},
        {"--iterations", TS_OPT_I64, &iterations, 1, 1e6, NULL},
    };
    const char *in_job = launcher_env();
    int rank = 0, nranks = 1, local = 0; /* local: the rank among this node's ranks */
    bool check_args = false;
    for (int i = 1; i < argc; i++)
        check_args |= strcmp(argv[i], "--check-args") == 0;
    if (in_job && !check_args) {
        mpi_check(MPI_Init(&argc, &argv), "MPI_Init");
        mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
        mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &nranks), "MPI_Comm_size");
        MPI_Comm node; /* the ranks on this node: between nodes, each is the first on its node */
        mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
                  "MPI_Comm_split_type");
        mpi_check(MPI_Comm_rank(node, &local), "MPI_Comm_rank");
        mpi_check(MPI_Comm_free(&node), "MPI_Comm_free");
        if (rank != 0 && !freopen("/dev/null", "w", stdout)) /* only rank 0 writes records */
            ts_die(TS_EXIT_RUNTIME, "freopen /dev/null: %s", strerror(errno));
    }
    ts_probe p;
    if (in_job)
        ts_probe_cpus_from_node(); /* a launcher may have bound each rank to its own CPU: same list for all */
    ts_probe_init(&p, "mpi-p2p", MPI_P2P_MANUAL, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (p.nthreads < 2) {
        char why[2048];
        ts_die(TS_EXIT_RESOURCE, "--cpus %s: the two ranks need two CPUs, this process may use %d%s", p.cpus_spec,
               p.nthreads, ts_probe_cpus_restriction(&p, why, sizeof why));
    }
    p.nthreads = 2; /* rank 0 and rank 1 */
    if (in_job && local < 2 && !p.jobenv.inherited[p.cpus[local]]) {
        char why[2048];
        ts_die(TS_EXIT_USAGE,
               "--cpus %s: rank %d is to run on CPU %d (number %d of that list on its node), but %s; let the "
               "launcher bind the ranks to the CPUs of --cpus in rank order, or not at all (mpirun --bind-to none, "
               "srun --cpu-bind=none)",
               p.cpus_spec, rank, p.cpus[local], local + 1,
               ts_jobenv_explain(&p.jobenv, p.cpus[local], why, sizeof why));
    }

    uint64_t sizes[MAX_SIZES];
    int nsizes = 0;
    if (sizes_spec) {
        char *copy = ts_xstrdup(sizes_spec), *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            uint64_t b;
            if (ts_parse_bytes(tok, &b) != 0 || b > (UINT64_C(1) << 30) || nsizes == MAX_SIZES)
                ts_die(TS_EXIT_USAGE, "--sizes %s: %s is not a byte count up to 1g (at most %d sizes)", sizes_spec,
                       tok, MAX_SIZES);
            sizes[nsizes++] = b;
        }
        free(copy);
    } else {
        if (min_bytes > max_bytes)
            ts_die(TS_EXIT_USAGE, "--min-bytes %" PRIu64 ": larger than --max-bytes %" PRIu64, min_bytes, max_bytes);
        for (uint64_t b = min_bytes; b <= max_bytes && nsizes < MAX_SIZES; b = b ? b * 2 : 1)
            sizes[nsizes++] = b;
    }
    uint64_t biggest = 1;
    for (int s = 0; s < nsizes; s++)
        if (sizes[s] > biggest)
            biggest = sizes[s];

    if (!in_job && !check_args)
        relaunch(argc, argv, &p.jobenv); /* the options are valid: the launched ranks write the records */

    char library[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int liblen = 0;
    MPI_Get_library_version(library, &liblen); /* allowed before MPI_Init (MPI-3) */
    library[strcspn(library, "\n,")] = '\0';
    char launcher[256];
    if (in_job && getenv("TAILSCOPE_MPI_EXEC"))
        snprintf(launcher, sizeof launcher, "%s -n 2 (re-executed by the probe)", TS_MPIEXEC);
    else if (in_job)
        snprintf(launcher, sizeof launcher, "the site's MPI launcher (%s set)", in_job);
    else
        snprintf(launcher, sizeof launcher, "%s -n 2 (the probe re-executes itself)", TS_MPIEXEC);

    ts_probe_config_begin(&p, in_job && !check_args ? nranks : 2);
    ts_json *j = &p.rec;
    ts_json_arr(j, "sizes");
    for (int s = 0; s < nsizes; s++)
        ts_json_u64(j, NULL, sizes[s]);
    ts_json_close(j);
    ts_json_arr(j, "round_trips_per_size");
    for (int s = 0; s < nsizes; s++)
        ts_json_u64(j, NULL, round_trips_for(sizes[s], round_trips));
    ts_json_close(j);
    ts_json_i64(j, "round_trips", round_trips);
    ts_json_i64(j, "iterations", iterations);
    ts_json_i64(j, "warmup_iterations", 1);
    ts_json_i64(j, "ranks", 2);
    ts_json_str(j, "mpi_library", library);
    ts_json_str(j, "mpi_launcher_built", TS_MPIEXEC);
    ts_json_str(j, "launcher", launcher);
    ts_json_str(j, "kernel", "MPI_Send + MPI_Recv ping-pong, MPI_BYTE, blocking");
    if (check_args) {
        ts_probe_config_end(&p);
        return TS_EXIT_OK;
    }
    if (nranks != 2)
        ts_die(TS_EXIT_USAGE, "started with %d ranks: mpi-p2p runs with exactly 2 (mpirun -n 2, srun -n 2)", nranks);
    ts_probe_config_end(&p);

    int rc = ts_pin_self(p.cpus[local]);
    if (rc != 0)
        ts_die(rc == EINVAL ? TS_EXIT_RESOURCE : TS_EXIT_RUNTIME, "--cpus: pinning rank %d to CPU %d failed: %s",
               rank, p.cpus[local], strerror(rc));
    ts_probe_check_memory(&p, 2 * ts_region_footprint(p.page, p.offset, biggest));
    ts_region sr, rr;
    ts_probe_map(&p, &sr, "send", biggest);
    memset(sr.data, 0, biggest);
    if (rank == 0) {
        ts_probe_map(&p, &rr, "recv", biggest);
        memset(rr.data, 0, biggest);
        size_t bounds[2] = {0, biggest};
        ts_probe_pages(&p, &sr, bounds, 1);
        ts_probe_pages(&p, &rr, bounds, 1);
    }
    const size_t per = (size_t)iterations + 1;
    stamp *st = ts_xcalloc((size_t)nsizes * per, sizeof *st);
    int64_t wrong = 0, checked = 0;
    char first_wrong[256] = "";
    unsigned char *sbuf = (unsigned char *)sr.data;
    ts_probe_anchor(&p);
    for (int s = 0; s < nsizes; s++) {
        const uint64_t b = sizes[s], r = round_trips_for(b, round_trips);
        const int count = (int)b;
        mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        for (int64_t it = 0; it <= iterations; it++) {
            if (rank == 0) {
                unsigned char *rbuf = (unsigned char *)rr.data;
                fill(sbuf, b, p.seed, b, it);
                memset(rbuf, 0, b);
                uint64_t t0 = ts_tsc();
                for (uint64_t k = 0; k < r; k++) {
                    MPI_Send(sbuf, count, MPI_BYTE, 1, TAG, MPI_COMM_WORLD);
                    MPI_Recv(rbuf, count, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                uint64_t t1 = ts_tsc();
                st[(size_t)s * per + (size_t)it] = (stamp){t0, t1, sched_getcpu()};
                if (ts_probe_corrupt_for_test() && s == 0 && it == iterations && b > 0)
                    rbuf[0] ^= 1;
                checked++;
                if (b && memcmp(sbuf, rbuf, b) != 0) {
                    if (!wrong)
                        snprintf(first_wrong, sizeof first_wrong, "%" PRIu64 " bytes, iteration %" PRId64, b, it);
                    wrong++;
                }
            } else {
                for (uint64_t k = 0; k < r; k++) {
                    MPI_Recv(sbuf, count, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, count, MPI_BYTE, 0, TAG, MPI_COMM_WORLD);
                }
            }
        }
    }
    mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    if (rank != 0) {
        MPI_Finalize();
        return TS_EXIT_OK;
    }
    ts_probe_check_thp(&p, &sr);

    const double hz = p.clock.tsc_hz;
    uint64_t shortest = UINT64_MAX;
    for (int s = 0; s < nsizes; s++) {
        char name[48];
        snprintf(name, sizeof name, "pingpong_%" PRIu64, sizes[s]);
        const double r = (double)round_trips_for(sizes[s], round_trips);
        for (int64_t it = 0; it <= iterations; it++) {
            const stamp *x = &st[(size_t)s * per + (size_t)it];
            ts_probe_iteration(&p, name, (int)it, 0, x->cpu, it == 0, x->t0, x->t1,
                               ts_seconds(x->t0, x->t1, hz) * 1e6 / (2.0 * r));
            if (it > 0 && x->t1 - x->t0 < shortest)
                shortest = x->t1 - x->t0;
        }
    }
    ts_probe_check_resolution(&p, shortest, "iteration");
    if (wrong) {
        MPI_Finalize();
        ts_probe_invalid(&p, "Failed Validation: %" PRId64 " of %" PRId64 " echoed messages differ from the one sent "
                         "(first: %s)", wrong, checked, first_wrong);
    }
    ts_probe_validated(&p, "Solution Validates: every echoed message equals the one sent (%" PRId64 " iterations)",
                       checked);
    double *v = ts_xmalloc((size_t)iterations * sizeof *v);
    for (int64_t it = 1; it <= iterations; it++) {
        const stamp *x = &st[(size_t)it];
        v[it - 1] = ts_seconds(x->t0, x->t1, hz) * 1e6 / (2.0 * (double)round_trips_for(sizes[0], round_trips));
    }
    double headline = ts_median_inplace(v, (size_t)iterations);
    ts_probe_result_begin(&p, "mpi_latency", "us", headline, false, st[1].t0,
                          st[(size_t)(nsizes - 1) * per + (size_t)iterations].t1);
    ts_json_obj(j, "summary");
    ts_json_arr(j, "sizes");
    for (int s = 0; s < nsizes; s++) {
        const double r = (double)round_trips_for(sizes[s], round_trips);
        ts_json_obj(j, NULL);
        ts_json_u64(j, "bytes", sizes[s]);
        ts_json_u64(j, "round_trips", (uint64_t)r);
        for (int m = 0; m < 2; m++) {
            for (int64_t it = 1; it <= iterations; it++) {
                const stamp *x = &st[(size_t)s * per + (size_t)it];
                double one_way = ts_seconds(x->t0, x->t1, hz) / (2.0 * r);
                v[it - 1] = m ? (double)sizes[s] / one_way / 1e9 : one_way * 1e6;
            }
            ts_json_stats(j, m ? "bandwidth_gbs" : "latency_us", v, (size_t)iterations);
        }
        ts_json_close(j);
    }
    ts_json_close(j);
    ts_json_close(j); /* summary */
    MPI_Finalize();
    ts_probe_result_end(&p);
    free(v);
    free(st);
    return TS_EXIT_OK;
}
