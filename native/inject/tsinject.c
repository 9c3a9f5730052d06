/*
 * tsinject -- fault injectors with exact intensity (HPAS-style), for `tailscope inject` and `validate`
 *
 * USAGE
 *   tsinject MODE [--cpus LIST] [--intensity X] [--duration S] [options]
 *   Runs in the foreground until --duration seconds have passed (0: until a signal) or SIGINT/SIGTERM
 *   arrives, then stops every thread, frees what it took and exits 0. It also stops when its parent dies
 *   (PR_SET_PDEATHSIG), so a killed `tailscope` never leaves an injector behind.
 *
 * MODES AND WHAT --intensity MEANS
 *   cpuoccupy    X in (0, 1]: the fraction of each CPU of --cpus kept busy. One pinned thread per CPU
 *                spins for X of every --period-us (default 10000 us) and sleeps the rest
 *                (clock_nanosleep to an absolute deadline, so the duty cycle does not drift).
 *   cachecopy    X in (0, 1]: the fraction of time each pinned thread spends copying a buffer of --size
 *                bytes (default: the last-level cache of the first CPU, from sysfs) into a second one of
 *                the same size, on the same duty cycle as cpuoccupy: it evicts the victim's cache lines.
 *   membw        X in (0, 1]: the fraction of time each pinned thread streams through --size bytes
 *                (default 256 MiB per thread; read one array, write another), i.e. about X of the memory
 *                bandwidth one such thread can draw, on the same duty cycle.
 *   os-noise     X > 0: timer wake-ups per second on each CPU of --cpus. A pinned thread (SCHED_FIFO
 *                priority 1 when permitted, so it preempts the victim like an interrupt handler would)
 *                sleeps to absolute deadlines 1/X s apart and spins --work-us (default 5 us) per wake-up.
 *   memeater     X in (0, 1]: allocate X of (MemAvailable - --reserve) at start, touch every page, and
 *                hold it (re-touched every 30 s, so it stays resident where swap exists), pushing the
 *                page cache out: reclaim and major faults. It takes no CPU time once it holds its memory.
 *   memleak      X > 0: MiB per second: grow an allocation by X MiB/s (touched, never freed) until
 *                MemAvailable reaches --reserve or the run ends.
 *   memthrash    X in (0, 1]: take all of (MemAvailable - --reserve) and X of the free swap (SwapFree -
 *                --reserve) in 4 KiB pages, then write one byte of every page, round and round, without a
 *                pause: a working set larger than RAM, so the kernel pages (kswapd, direct reclaim, swap
 *                I/O) and the victim's own pages go to swap too: it takes major faults when it touches them
 *                again. This is HPAS's memory-intensive eater on a node with swap; without swap (SwapFree
 *                below --reserve) it refuses to start (exit 3): there, taking more than RAM ends in the OOM
 *                killer, not in paging. It keeps one CPU busy writing; pin it off the victim's CPUs.
 *   thp-fragment X in (0, 1]: take X of (MemAvailable - --reserve) in 4 KiB pages (MADV_NOHUGEPAGE),
 *                mlock it, read each page's frame from /proc/self/pagemap, keep one locked page in every
 *                2 MiB physical block it touched and free the rest. Free memory is then in 4 KiB holes
 *                between locked pages, so an order-9 (2 MiB) allocation fails there: a THP fault falls
 *                back to small pages (thp_fault_fallback in /proc/vmstat). Compaction can migrate mlocked
 *                pages unless /proc/sys/vm/compact_unevictable_allowed is 0: `tailscope inject` sets it to
 *                0 for the run and restores it. Reading frame numbers needs root (CAP_SYS_ADMIN).
 *   The memory modes set their own oom_score_adj to 1000, so if memory runs out the kernel kills the
 *   injector first.
 *
 * OPTIONS
 *   --cpus LIST        CPUs for the thread modes, kernel list syntax (0-3,8); default: CPU 0
 *   --intensity X      as above (default: 0.5 for fractions, 1000 for os-noise, 64 for memleak)
 *   --duration S       seconds to run, at most 604800 (a week); 0 (default) runs until SIGINT/SIGTERM
 *   --period-us P      duty-cycle period of cpuoccupy, cachecopy, membw (default 10000)
 *   --size BYTES       buffer per thread of cachecopy and membw (suffix k, m, g)
 *   --work-us W        spin per os-noise wake-up (default 5)
 *   --reserve BYTES    memory modes leave at least this much MemAvailable (default 1g)
 *   --help             this manual
 *
 * OUTPUT
 *   JSON lines on stdout: {"record":"ready",...} once the injection is in force (after the memory is taken,
 *   every thread pinned and its buffers written), then {"record":"done",...} with what was done: busy and idle time per CPU,
 *   wake-ups and missed deadlines, bytes copied, bytes held, pages kept and 2 MiB blocks covered.
 *
 * EXIT CODES
 *   0 done; 1 a syscall failed; 2 usage (unknown mode or option, bad value); 3 a resource was refused
 *   (memory, pagemap not readable). Errors are one line on stderr: "tsinject: error: WHAT: WHY".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "ts_topo.h"
#include "ts_util.h"
#include "tsinject_manual.h"

#define PAGE 4096ul
#define BLOCK_PAGES 512ul /* 2 MiB / 4 KiB */
#define MAX_CPUS 4096

typedef enum { M_CPU, M_CACHE, M_MEMBW, M_NOISE, M_EATER, M_LEAK, M_THP, M_THRASH } mode_t_;

typedef struct {
    mode_t_ mode;
    int cpus[MAX_CPUS];
    int ncpus;
    double intensity;
    double duration_s;
    uint64_t period_ns;
    uint64_t size;
    uint64_t work_ns;
    uint64_t reserve;
} options;

typedef struct {
    const options *opt;
    int cpu;
    pthread_t tid;
    /* results */
    uint64_t busy_ns, periods, wakeups, missed, bytes;
    bool fifo;
    int err; /* errno of a failed setup step, 0 if fine */
    const char *err_what;
} worker;

static atomic_bool stop_flag;
/* Every worker and the main thread: "ready" is printed once each worker is pinned and has its buffers
 * written (256 MiB for membw takes ~0.2 s; before this, an injection began that much after "ready"). */
static pthread_barrier_t started;

static void worker_started(void)
{
    int rc = pthread_barrier_wait(&started);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        ts_die(TS_EXIT_RUNTIME, "pthread_barrier_wait: %s", strerror(rc));
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        ts_die(TS_EXIT_RUNTIME, "clock_gettime: %s", strerror(errno));
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull), .tv_nsec = (long)(t % 1000000000ull)};
    int rc;
    while ((rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) == EINTR)
        if (atomic_load(&stop_flag))
            return;
    if (rc != 0)
        ts_die(TS_EXIT_RUNTIME, "clock_nanosleep: %s", strerror(rc));
}

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The busy part of one duty cycle: spin, copy within the cache, or stream through memory until `until`. */
static void busy_until(worker *w, uint64_t until, uint64_t *a, uint64_t *b, size_t words, size_t *pos)
{
    const size_t chunk = 2048; /* 16 KiB between clock reads */
    while (now_ns() < until) {
        if (!a) {
            for (volatile int i = 0; i < 1000; i++) {
            }
            continue;
        }
        size_t n = words - *pos < chunk ? words - *pos : chunk;
        for (size_t i = 0; i < n; i++)
            b[*pos + i] = a[*pos + i] + 1;
        w->bytes += 2 * n * sizeof(uint64_t);
        *pos = (*pos + n) % words;
    }
}

/* Pin the worker to its CPU; on failure record why (the main thread reports it) and return false. */
static bool pin_worker(worker *w)
{
    int rc = pin(w->cpu);
    if (rc != 0)
        w->err = rc, w->err_what = "pthread_setaffinity_np";
    return rc == 0;
}

static void *duty_thread(void *arg)
{
    worker *w = arg;
    const options *o = w->opt;
    if (!pin_worker(w)) {
        worker_started();
        return NULL;
    }
    uint64_t *a = NULL, *b = NULL;
    size_t words = 0, pos = 0;
    if (o->mode != M_CPU) {
        words = o->size / sizeof(uint64_t) / (o->mode == M_CACHE ? 2 : 1);
        if (words < 2048)
            words = 2048;
        a = ts_xaligned(PAGE, words * sizeof(uint64_t)); /* first touch on the pinned CPU's node */
        b = ts_xaligned(PAGE, words * sizeof(uint64_t));
        for (size_t i = 0; i < words; i++)
            a[i] = i;
        memset(b, 0, words * sizeof(uint64_t)); /* its pages faulted in now, not in the first periods */
    }
    worker_started();
    const uint64_t period = o->period_ns, on = (uint64_t)(o->intensity * (double)o->period_ns);
    uint64_t start = now_ns();
    while (!atomic_load(&stop_flag)) {
        uint64_t t = now_ns();
        if (t >= start + period) { /* preempted past the period: start the next one now */
            w->missed++;
            start = t;
        }
        busy_until(w, start + on, a, b, words, &pos);
        uint64_t end = now_ns();
        w->busy_ns += end - t;
        w->periods++;
        if (on < period)
            sleep_until(start + period);
        start += period;
    }
    free(a);
    free(b);
    return NULL;
}

static void *noise_thread(void *arg)
{
    worker *w = arg;
    const options *o = w->opt;
    if (!pin_worker(w)) {
        worker_started();
        return NULL;
    }
    struct sched_param sp = {.sched_priority = 1};
    w->fifo = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
    worker_started();
    const uint64_t period = (uint64_t)(1e9 / o->intensity);
    uint64_t next = now_ns() + period;
    while (!atomic_load(&stop_flag)) {
        sleep_until(next);
        uint64_t t = now_ns();
        w->wakeups++;
        while (now_ns() < t + o->work_ns) {
        }
        w->busy_ns += now_ns() - t;
        next += period;
        if (next < t) { /* fell behind by more than a period: count it and resynchronise */
            w->missed++;
            next = t + period;
        }
    }
    return NULL;
}

/* ---- memory modes ---- */
static uint64_t meminfo_bytes(const char *field)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        ts_die(TS_EXIT_RUNTIME, "/proc/meminfo: %s", strerror(errno));
    char line[256];
    size_t len = strlen(field);
    uint64_t kb = 0;
    bool found = false;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            found = sscanf(line + len + 1, "%" SCNu64, &kb) == 1;
            break;
        }
    if (fclose(f) != 0)
        ts_die(TS_EXIT_RUNTIME, "/proc/meminfo: close: %s", strerror(errno));
    if (!found)
        ts_die(TS_EXIT_RUNTIME, "/proc/meminfo: no %s line", field);
    return kb * 1024;
}

static void oom_first(void)
{
    int fd = open("/proc/self/oom_score_adj", O_WRONLY);
    if (fd < 0)
        ts_die(TS_EXIT_RUNTIME, "/proc/self/oom_score_adj: %s", strerror(errno));
    if (write(fd, "1000", 4) != 4)
        ts_die(TS_EXIT_RUNTIME, "/proc/self/oom_score_adj: write: %s", strerror(errno));
    if (close(fd) != 0)
        ts_die(TS_EXIT_RUNTIME, "/proc/self/oom_score_adj: close: %s", strerror(errno));
}

typedef struct {
    char *addr;
    size_t bytes;
} region;

static region *regions;
static size_t nregions, cap_regions;

static char *take(size_t bytes, bool lock)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (madvise(p, bytes, MADV_NOHUGEPAGE) != 0)
        ts_die(TS_EXIT_RUNTIME, "madvise(MADV_NOHUGEPAGE): %s", strerror(errno));
    if (lock) {
        if (mlock(p, bytes) != 0) {
            int e = errno;
            if (munmap(p, bytes) != 0)
                ts_die(TS_EXIT_RUNTIME, "munmap: %s", strerror(errno));
            errno = e;
            return NULL;
        }
    } else {
        for (size_t i = 0; i < bytes; i += PAGE)
            ((volatile char *)p)[i] = 1;
    }
    if (nregions == cap_regions) {
        cap_regions = cap_regions ? 2 * cap_regions : 64;
        regions = ts_xrealloc(regions, cap_regions * sizeof *regions);
    }
    regions[nregions++] = (region){p, bytes};
    return p;
}

static uint64_t held_bytes(void)
{
    uint64_t s = 0;
    for (size_t i = 0; i < nregions; i++)
        s += regions[i].bytes;
    return s;
}

static bool stopping(const sigset_t *sigs)
{
    struct timespec zero = {0, 0};
    if (sigtimedwait(sigs, NULL, &zero) > 0)
        atomic_store(&stop_flag, true);
    return atomic_load(&stop_flag);
}

static void release_range(char *from, char *to)
{
    if (to <= from)
        return;
    size_t n = (size_t)(to - from);
    if (munlock(from, n) != 0)
        ts_die(TS_EXIT_RUNTIME, "munlock: %s", strerror(errno));
    if (madvise(from, n, MADV_DONTNEED) != 0)
        ts_die(TS_EXIT_RUNTIME, "madvise(MADV_DONTNEED): %s", strerror(errno));
}

/* Keep one locked page per 2 MiB physical block; free the rest. Returns pages kept; *blocks = blocks seen. */
static uint64_t fragment(uint64_t *blocks)
{
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0)
        ts_die(TS_EXIT_RESOURCE, "/proc/self/pagemap: %s", strerror(errno));
    uint64_t max_block = meminfo_bytes("MemTotal") / PAGE / BLOCK_PAGES * 2 + 1024; /* holes above RAM */
    uint8_t *seen = ts_xcalloc(max_block / 8 + 1, 1);
    uint64_t kept = 0, nblocks = 0;
    const size_t batch = 4096;
    uint64_t *ent = ts_xmalloc(batch * sizeof *ent);
    for (size_t r = 0; r < nregions; r++) {
        char *base = regions[r].addr, *free_from = base;
        size_t pages = regions[r].bytes / PAGE;
        for (size_t p0 = 0; p0 < pages; p0 += batch) {
            size_t n = pages - p0 < batch ? pages - p0 : batch;
            off_t off = (off_t)(((uintptr_t)base / PAGE + p0) * sizeof(uint64_t));
            ssize_t got = pread(fd, ent, n * sizeof *ent, off);
            if (got != (ssize_t)(n * sizeof *ent))
                ts_die(TS_EXIT_RUNTIME, "/proc/self/pagemap: read: %s", got < 0 ? strerror(errno) : "short read");
            for (size_t i = 0; i < n; i++) {
                uint64_t e = ent[i], pfn = e & ((1ull << 55) - 1);
                if (!(e >> 63))
                    continue; /* not present: nothing to keep */
                if (pfn == 0)
                    ts_die(TS_EXIT_RESOURCE, "/proc/self/pagemap: frame numbers read as 0; needs root");
                uint64_t blk = pfn / BLOCK_PAGES;
                if (blk >= max_block || (seen[blk / 8] >> (blk % 8)) & 1)
                    continue;
                seen[blk / 8] |= (uint8_t)(1u << (blk % 8));
                nblocks++;
                kept++;
                char *page = base + (p0 + i) * PAGE;
                release_range(free_from, page);
                free_from = page + PAGE;
            }
        }
        release_range(free_from, base + regions[r].bytes);
    }
    free(ent);
    free(seen);
    if (close(fd) != 0)
        ts_die(TS_EXIT_RUNTIME, "/proc/self/pagemap: close: %s", strerror(errno));
    *blocks = nblocks;
    return kept;
}

static int run_memory(const options *o, const sigset_t *sigs)
{
    oom_first();
    const size_t step = 64ul << 20;
    uint64_t t0 = now_ns(), deadline = o->duration_s > 0 ? t0 + (uint64_t)(o->duration_s * 1e9) : UINT64_MAX;
    uint64_t avail0 = meminfo_bytes("MemAvailable");
    uint64_t target = 0;
    if (o->mode != M_LEAK)
        target = avail0 > o->reserve ? (uint64_t)(o->intensity * (double)(avail0 - o->reserve)) : 0;
    if (o->mode == M_THRASH) {
        uint64_t swap0 = meminfo_bytes("SwapFree");
        if (swap0 <= o->reserve)
            ts_die(TS_EXIT_RESOURCE, "memthrash: SwapFree is %" PRIu64 " MiB, not above --reserve: without swap, "
                   "a working set larger than RAM ends in the OOM killer, not in paging", swap0 >> 20);
        target = (avail0 > o->reserve ? avail0 - o->reserve : 0) +
                 (uint64_t)(o->intensity * (double)(swap0 - o->reserve));
        while (held_bytes() + step <= target + step / 2 && !stopping(sigs) && now_ns() < deadline) {
            if (meminfo_bytes("MemAvailable") + meminfo_bytes("SwapFree") < 2 * o->reserve + step)
                break; /* leave --reserve of memory or swap to everyone else */
            if (!take(step, false))
                break;
        }
    }
    if (o->mode == M_EATER || o->mode == M_THP) {
        while (held_bytes() + step <= target + step / 2 && !stopping(sigs)) {
            if (meminfo_bytes("MemAvailable") < o->reserve + step)
                break;
            if (!take(step, o->mode == M_THP))
                break;
        }
    }
    uint64_t kept = 0, blocks = 0, grabbed = held_bytes();
    if (o->mode == M_THP && !atomic_load(&stop_flag))
        kept = fragment(&blocks);
    printf("{\"record\":\"ready\",\"mode\":\"%s\",\"available_bytes\":%" PRIu64 ",\"target_bytes\":%" PRIu64
           ",\"taken_bytes\":%" PRIu64 ",\"kept_pages\":%" PRIu64 ",\"blocks_covered\":%" PRIu64
           ",\"blocks_total\":%" PRIu64 "}\n",
           o->mode == M_THP ? "thp-fragment" : o->mode == M_EATER ? "memeater" : o->mode == M_THRASH ? "memthrash"
                                                                                            : "memleak",
           avail0, target,
           grabbed, kept, blocks, meminfo_bytes("MemTotal") / (PAGE * BLOCK_PAGES));
    if (fflush(stdout) != 0)
        ts_die(TS_EXIT_RUNTIME, "stdout: %s", strerror(errno));
    uint64_t next = now_ns(), retouch = now_ns() + 30ull * 1000000000ull;
    const size_t leak_step = 16ul << 20;
    uint64_t rounds = 0;
    while (o->mode == M_THRASH && !stopping(sigs) && now_ns() < deadline) {
        for (size_t r = 0; r < nregions && !atomic_load(&stop_flag); r++) {
            for (size_t i = 0; i < regions[r].bytes; i += PAGE)
                ((volatile char *)regions[r].addr)[i] += 1;
            if (stopping(sigs) || now_ns() >= deadline)
                break;
        }
        rounds++;
    }
    while (o->mode != M_THRASH && !stopping(sigs) && now_ns() < deadline) {
        if (o->mode == M_LEAK && now_ns() >= next) {
            if (meminfo_bytes("MemAvailable") > o->reserve + leak_step && take(leak_step, false))
                next += (uint64_t)(16.0 / o->intensity * 1e9);
            else
                next = UINT64_MAX; /* reached the reserve: hold what was taken */
        }
        if (o->mode == M_EATER && now_ns() >= retouch) { /* keep it resident where swap exists */
            for (size_t r = 0; r < nregions; r++)
                for (size_t i = 0; i < regions[r].bytes; i += PAGE)
                    ((volatile char *)regions[r].addr)[i] += 1;
            retouch = now_ns() + 30ull * 1000000000ull;
        }
        struct timespec tick = {0, 100 * 1000 * 1000};
        if (sigtimedwait(sigs, NULL, &tick) > 0)
            break;
    }
    printf("{\"record\":\"done\",\"held_bytes\":%" PRIu64 ",\"rounds\":%" PRIu64 ",\"seconds\":%.3f}\n",
           o->mode == M_THP ? kept * PAGE : held_bytes(), rounds, (double)(now_ns() - t0) / 1e9);
    for (size_t r = 0; r < nregions; r++)
        if (munmap(regions[r].addr, regions[r].bytes) != 0)
            ts_die(TS_EXIT_RUNTIME, "munmap: %s", strerror(errno));
    free(regions);
    return TS_EXIT_OK;
}

static int run_threads(const options *o, const sigset_t *sigs)
{
    worker *w = ts_xcalloc((size_t)o->ncpus, sizeof *w);
    int brc = pthread_barrier_init(&started, NULL, (unsigned)o->ncpus + 1);
    if (brc != 0)
        ts_die(TS_EXIT_RUNTIME, "pthread_barrier_init: %s", strerror(brc));
    for (int i = 0; i < o->ncpus; i++) {
        w[i].opt = o;
        w[i].cpu = o->cpus[i];
        int rc = pthread_create(&w[i].tid, NULL, o->mode == M_NOISE ? noise_thread : duty_thread, &w[i]);
        if (rc != 0)
            ts_die(TS_EXIT_RUNTIME, "pthread_create: %s", strerror(rc));
    }
    /* The main thread only waits for a signal, but /proc/PID/stat reports its CPU for the whole process:
     * keep it on the injector's CPUs so that tools which attribute a process's time by that field (the
     * per-trial co-runner scan of tailscope, top's P column) place the injector where its threads run. */
    cpu_set_t home;
    CPU_ZERO(&home);
    for (int i = 0; i < o->ncpus; i++)
        CPU_SET(o->cpus[i], &home);
    if (sched_setaffinity(0, sizeof home, &home) != 0)
        ts_die(TS_EXIT_RUNTIME, "sched_setaffinity (main thread): %s", strerror(errno));
    worker_started(); /* every worker pinned, its buffers written */
    for (int i = 0; i < o->ncpus; i++)
        if (w[i].err)
            ts_die(TS_EXIT_RUNTIME, "%s on CPU %d: %s", w[i].err_what, w[i].cpu, strerror(w[i].err));
    char list[256];
    printf("{\"record\":\"ready\",\"cpus\":\"%s\",\"intensity\":%g}\n",
           ts_format_cpulist(o->cpus, o->ncpus, list, sizeof list), o->intensity);
    if (fflush(stdout) != 0)
        ts_die(TS_EXIT_RUNTIME, "stdout: %s", strerror(errno));
    uint64_t t0 = now_ns();
    if (o->duration_s > 0) {
        double d = o->duration_s;
        struct timespec ts = {.tv_sec = (time_t)d, .tv_nsec = (long)((d - (double)(time_t)d) * 1e9)};
        while (sigtimedwait(sigs, NULL, &ts) < 0) {
            if (errno == EAGAIN)
                break;
            if (errno != EINTR)
                ts_die(TS_EXIT_RUNTIME, "sigtimedwait: %s", strerror(errno));
        }
    } else {
        int sig;
        int rc = sigwait(sigs, &sig);
        if (rc != 0)
            ts_die(TS_EXIT_RUNTIME, "sigwait: %s", strerror(rc));
    }
    atomic_store(&stop_flag, true);
    double wall = (double)(now_ns() - t0) / 1e9;
    printf("{\"record\":\"done\",\"seconds\":%.3f,\"threads\":[", wall);
    for (int i = 0; i < o->ncpus; i++) {
        int rc = pthread_join(w[i].tid, NULL);
        if (rc != 0)
            ts_die(TS_EXIT_RUNTIME, "pthread_join: %s", strerror(rc));
        if (w[i].err)
            ts_die(TS_EXIT_RUNTIME, "%s on CPU %d: %s", w[i].err_what, w[i].cpu, strerror(w[i].err));
        printf("%s{\"cpu\":%d,\"busy_s\":%.6f,\"busy_fraction\":%.4f,\"periods\":%" PRIu64 ",\"wakeups\":%" PRIu64
               ",\"missed\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"fifo\":%s}",
               i ? "," : "", w[i].cpu, (double)w[i].busy_ns / 1e9, (double)w[i].busy_ns / 1e9 / wall,
               w[i].periods, w[i].wakeups, w[i].missed, w[i].bytes, w[i].fifo ? "true" : "false");
    }
    printf("]}\n");
    free(w);
    return TS_EXIT_OK;
}

static uint64_t llc_bytes(void)
{
    uint64_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[128];
        uint64_t v;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (ts_read_u64(path, &v) == 0 && v > best)
            best = v;
    }
    return best ? best : 32ull << 20;
}

static void parse_cpus(const char *s, options *o)
{
    static bool flags[MAX_CPUS];
    if (ts_parse_kernel_cpulist(s, flags, MAX_CPUS) != 0)
        ts_die(TS_EXIT_USAGE, "--cpus %s: expected a CPU list like 0-3,8", s);
    o->ncpus = 0;
    long online = sysconf(_SC_NPROCESSORS_CONF);
    for (int i = 0; i < MAX_CPUS; i++)
        if (flags[i]) {
            if (i >= online)
                ts_die(TS_EXIT_USAGE, "--cpus %s: CPU %d does not exist (this node has %ld)", s, i, online);
            o->cpus[o->ncpus++] = i;
        }
    if (o->ncpus == 0)
        ts_die(TS_EXIT_USAGE, "--cpus %s: no CPU named", s);
}

int main(int argc, char **argv)
{
    ts_set_prog("tsinject");
    if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
        fputs(TSINJECT_MANUAL, stdout);
        return TS_EXIT_OK;
    }
    if (argc < 2)
        ts_die(TS_EXIT_USAGE, "expected a MODE (cpuoccupy, cachecopy, membw, os-noise, memeater, memleak, "
                              "memthrash, thp-fragment); --help for the manual");
    static const struct {
        const char *name;
        mode_t_ mode;
        double intensity;
    } modes[] = {{"cpuoccupy", M_CPU, 0.5},  {"cachecopy", M_CACHE, 0.5}, {"membw", M_MEMBW, 0.5},
                 {"os-noise", M_NOISE, 1000}, {"memeater", M_EATER, 0.5}, {"memleak", M_LEAK, 64},
                 {"memthrash", M_THRASH, 0.5}, {"thp-fragment", M_THP, 0.5}};
    static options o;
    bool known = false;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            o.mode = modes[i].mode, o.intensity = modes[i].intensity, known = true;
    if (!known)
        ts_die(TS_EXIT_USAGE, "unknown mode %s (cpuoccupy, cachecopy, membw, os-noise, memeater, memleak, "
                              "memthrash, thp-fragment)", argv[1]);
    o.cpus[0] = 0, o.ncpus = 1;
    o.period_ns = 10 * 1000 * 1000;
    o.work_ns = 5000;
    o.reserve = 1ull << 30;
    o.size = o.mode == M_CACHE ? llc_bytes() : 256ull << 20;
    for (int i = 2; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(opt, "--help") == 0) {
            fputs(TSINJECT_MANUAL, stdout);
            return TS_EXIT_OK;
        }
        if (!val)
            ts_die(TS_EXIT_USAGE, "%s: expected a value", opt);
        i++;
        uint64_t u;
        double d;
        if (strcmp(opt, "--cpus") == 0)
            parse_cpus(val, &o);
        else if (strcmp(opt, "--intensity") == 0) {
            if (ts_parse_double(val, &d) != 0 || !(d > 0))
                ts_die(TS_EXIT_USAGE, "--intensity %s: expected a number above 0", val);
            o.intensity = d;
        } else if (strcmp(opt, "--duration") == 0) {
            if (ts_parse_double(val, &d) != 0 || !(d >= 0) || d > 604800)
                ts_die(TS_EXIT_USAGE, "--duration %s: expected seconds from 0 to 604800 (a week)", val);
            o.duration_s = d;
        } else if (strcmp(opt, "--period-us") == 0) {
            if (ts_parse_u64(val, &u) != 0 || u < 100 || u > 10000000)
                ts_die(TS_EXIT_USAGE, "--period-us %s: expected 100 to 10000000", val);
            o.period_ns = u * 1000;
        } else if (strcmp(opt, "--work-us") == 0) {
            if (ts_parse_u64(val, &u) != 0 || u > 1000000)
                ts_die(TS_EXIT_USAGE, "--work-us %s: expected 0 to 1000000", val);
            o.work_ns = u * 1000;
        } else if (strcmp(opt, "--size") == 0) {
            if (ts_parse_bytes(val, &u) != 0 || u < 16384)
                ts_die(TS_EXIT_USAGE, "--size %s: expected bytes >= 16k (suffix k, m, g)", val);
            o.size = u;
        } else if (strcmp(opt, "--reserve") == 0) {
            if (ts_parse_bytes(val, &u) != 0)
                ts_die(TS_EXIT_USAGE, "--reserve %s: expected bytes (suffix k, m, g)", val);
            o.reserve = u;
        } else
            ts_die(TS_EXIT_USAGE, "unknown option %s; --help for the manual", opt);
    }
    bool fraction = o.mode != M_NOISE && o.mode != M_LEAK;
    if (fraction && o.intensity > 1)
        ts_die(TS_EXIT_USAGE, "--intensity %g: %s takes a fraction in (0, 1]", o.intensity, argv[1]);
    if (o.mode == M_NOISE && o.intensity > 1e6)
        ts_die(TS_EXIT_USAGE, "--intensity %g: os-noise takes at most 1000000 wake-ups/s", o.intensity);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
        ts_die(TS_EXIT_RUNTIME, "prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    int rc = pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* threads inherit the mask; main waits for them */
    if (rc != 0)
        ts_die(TS_EXIT_RUNTIME, "pthread_sigmask: %s", strerror(rc));
    bool memory = o.mode == M_EATER || o.mode == M_LEAK || o.mode == M_THP || o.mode == M_THRASH;
    return memory ? run_memory(&o, &sigs) : run_threads(&o, &sigs);
}
