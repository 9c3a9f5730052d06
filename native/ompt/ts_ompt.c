/* ts_ompt.c -- tailscope's OpenMP tool (OMPT): every parallel region, worksharing construct and barrier of an
 * unmodified OpenMP program, with its code address, TSC timestamps, the CPU it ran on, and optional counter
 * deltas, written to a directory when the program ends.
 *
 * Use (tailscope trace sets all of this up):
 *     OMP_TOOL_LIBRARIES=/path/libtailscope_ompt.so TAILSCOPE_OMPT_OUT=DIR ./app args
 * The OpenMP runtime must implement OMPT: LLVM's libomp does, GCC's libgomp does not. A gcc-built program runs
 * on libomp through a directory holding `libgomp.so.1 -> libomp.so.5` on LD_LIBRARY_PATH.
 *
 * Environment:
 *   TAILSCOPE_OMPT_OUT        directory to write into (required; created if missing). Without it the tool
 *                             declines to start (ompt_start_tool returns NULL) and the program runs untraced.
 *   TAILSCOPE_OMPT_EVENTS     per-thread counters read at every recorded event: entries separated by ';', each
 *                             `NAME:SPEC` or `SPEC` (any event string of ts_evsel.h: task-clock, page-faults,
 *                             cpu/event=0x..,umask=../, ...). Events that cannot be opened are listed in
 *                             meta.tsv (`skipped`) and left out.
 *   TAILSCOPE_OMPT_UNCORE     uncore counters (same syntax; e.g. `upi_rx:uncore_upi/event=0x3,umask=0xf/`) opened
 *                             on every unit of every socket by the initial thread and read by the thread that
 *                             starts and ends each parallel region, at its begin and end.
 *   TAILSCOPE_OMPT_NUMA       off | first (default) | every: copy /proc/self/numa_maps after the end of each
 *                             parallel region (first: only the first instance of each code address), and once
 *                             when the program ends.
 *   TAILSCOPE_OMPT_TOUCHED    off | first (default) | every: measure the bytes the process touched while a
 *                             parallel region ran (first: the first two instances of each code address; the
 *                             first may include the runtime creating its threads): before it,
 *                             "1" to /proc/self/clear_refs clears the accessed bit of every page; after it, the
 *                             Referenced: lines of /proc/self/smaps over the anonymous mappings are summed.
 *                             One region at a time (one nested in or running beside a measured one is not).
 *                             It costs a page-table walk per measured region and ages the pages' LRU state;
 *                             nothing else of the program is changed.
 *   TAILSCOPE_OMPT_MAX_RECORDS  records kept per thread (default 16777216); later ones are counted as dropped.
 *   TAILSCOPE_OMPT_SYSFS      sysfs root for the uncore PMUs (tests: a fixture tree); default /sys.
 *   TAILSCOPE_OMPT_NOOP=1     register the callbacks but record nothing (bench: what OMPT dispatch costs alone).
 *
 * Output (DIR; a process started by the traced one with the same environment writes into DIR/child-PID/, a
 * process it fork()s without exec into DIR/fork-PID/, with its own record numbering and parent_pid in meta.tsv):
 *   meta.tsv       key<TAB>value: pid, parent_pid (a fork()ed child), runtime (omp runtime version string), tsc_hz, anchors (TSC, CLOCK_MONOTONIC
 *                  ns, CLOCK_REALTIME ns at start and at end), events, uncore events, skipped events, dropped.
 *   threads.tsv    thread, tid, type (initial|worker|other), first_cpu.
 *   objects.tsv    object, path, base (hex): the loaded objects the code addresses fall in (dladdr).
 *   events.tsv     thread, kind, sub, endpoint, parallel, object, offset, tsc, cpu, node, aux, count columns...
 *                  kind: parallel | implicit_task | work | sync; sub: the work or sync-region type;
 *                  endpoint: begin | end; parallel: the tool's id of the parallel region (from 1); object and
 *                  offset: codeptr_ra as object index and offset from its base (-1 when the runtime gives none);
 *                  cpu and node: from RDTSCP's TSC_AUX (Linux writes node << 12 | cpu there);
 *                  aux: team size (parallel begin: requested; implicit_task: actual), thread number in the team
 *                  (implicit_task: after a '/'), iteration count (work).
 *   uncore.tsv     parallel, endpoint, tsc, pmu, unit, socket, width, event, value, enabled, running.
 *   numa/NNNNNN.txt and numa.tsv (snapshot, parallel, tsc, file): numa_maps copies.
 *   touched.tsv    parallel, referenced (bytes of anonymous pages referenced while it ran), faults (minor + major
 *                  page faults of the process meanwhile: pages first touched), page_size.
 *
 * Cost: one callback appends a 40-byte record (plus 8 bytes per counter) to the calling thread's own buffer
 * (no lock, no system call unless counters are read; an mmap per 65536 records); the files are written when
 * the runtime finalizes. The buffers are mapped with the policy MPOL_LOCAL, which numa_maps shows as `local`:
 * the placement analysis leaves them out of the program's data.
 * Code addresses are resolved with dladdr only then. bench/bench_ompt.py measures the cost per region.
 */
#define _GNU_SOURCE
#include "omp-tools.h"
#include "ts_perf.h"
#include "ts_tsc.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { K_PARALLEL = 0, K_IMPLICIT = 1, K_WORK = 2, K_SYNC = 3 };
static const char *const KIND_NAME[] = {"parallel", "implicit_task", "work", "sync"};

typedef struct rec {
    uint64_t tsc;
    uint64_t parallel;
    const void *codeptr;
    uint32_t aux;      /* RDTSCP TSC_AUX: node << 12 | cpu */
    uint32_t count;    /* team size / iteration count (saturated) */
    uint16_t index;    /* thread number in the team (implicit_task) */
    uint8_t kind;
    uint8_t sub;
    uint8_t endpoint;  /* 1 begin, 2 end (ompt_scope_endpoint_t) */
    uint8_t pad[3];
} rec;

/* A chunk of CHUNK_RECS records (and their counter values), mmapped with the memory policy MPOL_LOCAL: the
 * policy keeps the kernel from merging the tool's buffers with the program's anonymous memory, and numa_maps
 * shows them as `local`, so the placement analysis leaves them out (tailscope/trace/placement.py). */
#define CHUNK_RECS 65536
typedef struct chunk {
    rec *recs;
    uint64_t *vals;      /* nevents values per record */
} chunk;

typedef struct tbuf {
    int thread;          /* tool's thread number, in order of first event */
    pid_t tid;
    int type;            /* ompt_thread_t, 0 when unknown */
    uint32_t first_aux;
    struct chunk *chunks; /* records in fixed-size chunks: never moved, so appending never copies */
    size_t nchunks, capchunks;
    size_t n;            /* records kept */
    uint64_t dropped;
    ts_counters counters;
    bool counting;
    struct tbuf *next;
} tbuf;

typedef struct uncore_rec {
    uint64_t parallel, tsc;
    int endpoint;
    size_t first;        /* index into g_uvals (ncounts values) */
} uncore_rec;

static struct {
    char out[4096];
    ompt_set_callback_t set_callback;
    const char *runtime;
    double tsc_hz;
    ts_anchor start, end;
    pthread_mutex_t lock;
    tbuf *threads;
    int nthreads;
    _Alignas(128) _Atomic uint64_t next_parallel; /* written by every region's master: a line of its own */
    char pad_next[120];
    _Alignas(128) size_t max_records;
    /* per-thread counters */
    ts_evlist ev;
    size_t nevents;
    char skipped[8192];
    /* uncore counters */
    ts_evlist uev;
    ts_counters ucounters;
    bool uncore;
    uncore_rec *urecs;
    size_t nurecs, capurecs;
    uint64_t *uvals;
    size_t nuvals, capuvals;
    /* numa_maps snapshots */
    int numa_mode;       /* 0 off, 1 first, 2 every */
    FILE *numa_index;
    int nsnapshots;
    const void **seen;   /* code addresses already snapshotted (first mode) */
    size_t nseen, capseen;
    /* bytes touched per parallel region (clear_refs + smaps Referenced) */
    int touch_mode;      /* 0 off, 1 first (default), 2 every */
    _Atomic uint64_t touch_active; /* the parallel region being measured (0: none): one at a time */
    uint64_t touch_minflt;
    FILE *touch_index;
    const void **touch_seen, **touch_seen2; /* addresses measured once, twice */
    size_t ntouch_seen, captouch_seen, ntouch_seen2, captouch_seen2;
    bool failed;
    bool written;        /* the files are written (finalize, or exit of a fork()ed child) */
    pid_t pid;
    pid_t parent_pid;    /* a fork()ed child: the process it was forked from (0: none) */
    char root[4096];     /* TAILSCOPE_OMPT_OUT: fork()ed children write into root/fork-PID/ */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local tbuf *t_buf;

static void note(const char *fmt, const char *a, const char *b)
{
    size_t len = strlen(g.skipped);
    if (len + 2 >= sizeof g.skipped)
        return;
    snprintf(g.skipped + len, sizeof g.skipped - len, fmt, a, b);
}

static uint64_t now(uint32_t *aux)
{
#if TS_HAVE_TSC
    unsigned a;
    uint64_t t = __rdtscp(&a);
    *aux = a;
    return t;
#else
    *aux = 0;
    return ts_tsc();
#endif
}

static tbuf *thread_buf(void)
{
    tbuf *b = t_buf;
    if (b)
        return b;
    /* each thread's buffer on its own cache lines: `n` is written at every event */
    b = aligned_alloc(128, (sizeof *b + 127) / 128 * 128);
    if (b)
        memset(b, 0, sizeof *b);
    if (!b) {
        g.failed = true;
        return NULL;
    }
    b->tid = (pid_t)syscall(SYS_gettid);
    now(&b->first_aux);
    if (g.nevents) {
        ts_counters_init(&b->counters, &g.ev);
        int opened = ts_counters_open_self(&b->counters, -1);
        if (opened == (int)g.nevents && ts_counters_enable(&b->counters) == 0) {
            b->counting = true;
        } else {
            pthread_mutex_lock(&g.lock);
            for (size_t i = 0; i < b->counters.nskipped; i++)
                note("%s%s\n", "thread counter: ", b->counters.skipped[i]);
            if (opened != (int)g.nevents)
                note("%s%s\n", "thread counters off on a thread: ", "not every event could be opened");
            pthread_mutex_unlock(&g.lock);
            ts_counters_close(&b->counters);
        }
    }
    pthread_mutex_lock(&g.lock);
    b->thread = g.nthreads++;
    b->next = g.threads;
    g.threads = b;
    pthread_mutex_unlock(&g.lock);
    t_buf = b;
    return b;
}

#ifndef MPOL_LOCAL
#define MPOL_LOCAL 4
#endif
static void *tool_map(size_t bytes)
{
    /* MAP_POPULATE: fault the pages in now, by this (the recording) thread, not one trap per page later */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef SYS_mbind
    if (syscall(SYS_mbind, p, bytes, MPOL_LOCAL, NULL, 0UL, 0U) != 0) {
        /* a kernel without NUMA: placement has one node anyway; the buffer stays usable */
    }
#endif
    return p;
}

/* The slot for the next record of this thread and its counter values, or NULL (dropped, counted). */
static rec *append(tbuf *b, uint64_t **vals)
{
    size_t idx = b->n % CHUNK_RECS;
    if (idx == 0) {
        if (b->n >= g.max_records) {
            b->dropped++;
            return NULL;
        }
        if (b->nchunks == b->capchunks) {
            size_t cap = b->capchunks ? b->capchunks * 2 : 16;
            chunk *c = realloc(b->chunks, cap * sizeof *c);
            if (!c) {
                b->dropped++;
                return NULL;
            }
            b->chunks = c;
            b->capchunks = cap;
        }
        chunk c = {tool_map(CHUNK_RECS * sizeof(rec)), NULL};
        if (c.recs && g.nevents)
            c.vals = tool_map(CHUNK_RECS * g.nevents * sizeof(uint64_t));
        if (!c.recs || (g.nevents && !c.vals)) {
            if (c.recs)
                munmap(c.recs, CHUNK_RECS * sizeof(rec));
            b->dropped++;
            return NULL;
        }
        b->chunks[b->nchunks++] = c;
    }
    chunk *c = &b->chunks[b->n / CHUNK_RECS];
    b->n++;
    *vals = c->vals ? &c->vals[idx * g.nevents] : NULL;
    return &c->recs[idx];
}

static bool g_noop; /* TAILSCOPE_OMPT_NOOP=1: callbacks return at once (bench: the runtime's own OMPT cost) */

static void record(int kind, int sub, int endpoint, uint64_t parallel, const void *codeptr, uint64_t count,
                   unsigned index)
{
    if (g_noop)
        return;
    tbuf *b = thread_buf();
    if (!b)
        return;
    uint32_t aux;
    uint64_t t = now(&aux);
    uint64_t *v;
    rec *r = append(b, &v);
    if (!r)
        return;
    r->tsc = t;
    r->aux = aux;
    r->parallel = parallel;
    r->codeptr = codeptr;
    r->count = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
    r->index = index > UINT16_MAX ? UINT16_MAX : (uint16_t)index;
    r->kind = (uint8_t)kind;
    r->sub = (uint8_t)sub;
    r->endpoint = (uint8_t)endpoint;
    if (v) {
        if (b->counting && ts_counters_read(&b->counters) == 0) {
            for (size_t i = 0; i < g.nevents; i++)
                v[i] = b->counters.counts[i].value;
        } else {
            memset(v, 0xff, g.nevents * sizeof *v); /* UINT64_MAX: not read */
        }
    }
}

/* ---- uncore reads at parallel begin/end (by the encountering thread) ---- */
static void uncore_read(uint64_t parallel, int endpoint)
{
    if (!g.uncore)
        return;
    uint32_t aux;
    pthread_mutex_lock(&g.lock);
    uint64_t t = now(&aux);
    if (ts_counters_read(&g.ucounters) != 0)
        goto out;
    if (g.nurecs == g.capurecs) {
        size_t cap = g.capurecs ? g.capurecs * 2 : 256;
        uncore_rec *r = realloc(g.urecs, cap * sizeof *r);
        if (!r)
            goto out;
        g.urecs = r;
        g.capurecs = cap;
    }
    size_t need = g.nuvals + 3 * g.ucounters.n;
    if (need > g.capuvals) {
        size_t cap = g.capuvals ? g.capuvals : 1024;
        while (cap < need)
            cap *= 2;
        uint64_t *v = realloc(g.uvals, cap * sizeof *v);
        if (!v)
            goto out;
        g.uvals = v;
        g.capuvals = cap;
    }
    g.urecs[g.nurecs++] = (uncore_rec){.parallel = parallel, .tsc = t, .endpoint = endpoint, .first = g.nuvals};
    for (size_t i = 0; i < g.ucounters.n; i++) {
        g.uvals[g.nuvals++] = g.ucounters.counts[i].value;
        g.uvals[g.nuvals++] = g.ucounters.counts[i].enabled;
        g.uvals[g.nuvals++] = g.ucounters.counts[i].running;
    }
out:
    pthread_mutex_unlock(&g.lock);
}

/* ---- numa_maps snapshots ---- */
static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "r");
    if (!in)
        return -1;
    FILE *out = fopen(to, "w");
    if (!out) {
        fclose(in);
        return -1;
    }
    char buf[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (fwrite(buf, 1, n, out) != n) {
            rc = -1;
            break;
        }
    }
    if (ferror(in))
        rc = -1;
    fclose(in);
    if (fclose(out) != 0)
        rc = -1;
    return rc;
}

static void numa_snapshot(uint64_t parallel, const void *codeptr, bool final)
{
    if (g.numa_mode == 0 || !g.numa_index)
        return;
    pthread_mutex_lock(&g.lock);
    if (!final && g.numa_mode == 1) {
        for (size_t i = 0; i < g.nseen; i++)
            if (g.seen[i] == codeptr)
                goto out;
        if (g.nseen == g.capseen) {
            size_t cap = g.capseen ? g.capseen * 2 : 64;
            const void **s = realloc(g.seen, cap * sizeof *s);
            if (!s)
                goto out;
            g.seen = s;
            g.capseen = cap;
        }
        g.seen[g.nseen++] = codeptr;
    }
    char path[4200], name[32];
    snprintf(name, sizeof name, "%06d.txt", g.nsnapshots);
    snprintf(path, sizeof path, "%s/numa/%s", g.out, name);
    uint32_t aux;
    uint64_t t = now(&aux);
    if (copy_file("/proc/self/numa_maps", path) == 0) {
        fprintf(g.numa_index, "%d\t%llu\t%llu\tnuma/%s\n", g.nsnapshots, (unsigned long long)parallel,
                (unsigned long long)t, name);
        g.nsnapshots++;
    } else if (g.nsnapshots == 0) {
        note("%s%s\n", "numa_maps: ", strerror(errno));
        g.numa_mode = 0;
    }
out:
    pthread_mutex_unlock(&g.lock);
}

/* ---- bytes touched per parallel region ----
 * Before a measured region the tool writes "1" to /proc/self/clear_refs (the kernel clears the accessed bit of
 * every page of the process); after it, the Referenced: lines of /proc/self/smaps over the anonymous mappings
 * (heap, stack, anonymous mmap: the program's data, as for the placement) are the bytes the process touched,
 * read or written, while the region ran, at page granularity. One region at a time is measured (a nested or
 * concurrent one is not). The page-fault count (getrusage) is taken too: the pages first touched inside. */
static bool seen_add(const void ***set, size_t *n, size_t *cap, const void *codeptr)
{
    for (size_t i = 0; i < *n; i++)
        if ((*set)[i] == codeptr)
            return true;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        const void **s = realloc(*set, c * sizeof *s);
        if (!s)
            return true; /* out of memory: treat as seen (measure nothing more) */
        *set = s;
        *cap = c;
    }
    (*set)[(*n)++] = codeptr;
    return false;
}

static uint64_t faults_now(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
}

/* Sum of Referenced: over the anonymous mappings of /proc/self/smaps, in bytes; -1 when it cannot be read. */
static long long smaps_referenced_anon(void)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return -1;
    char line[512];
    bool at_start = true, anon = false;
    long long kb = 0;
    while (fgets(line, sizeof line, f)) {
        bool start = at_start;
        at_start = strchr(line, '\n') != NULL; /* a long line (a path) comes in pieces */
        if (!start)
            continue;
        unsigned long long lo, hi, inode;
        char perms[8], dev[16];
        int name_at = 0;
        if (sscanf(line, "%llx-%llx %7s %*x %15s %llu %n", &lo, &hi, perms, dev, &inode, &name_at) == 5) {
            const char *name = line + name_at;
            anon = inode == 0 && (*name == '\n' || *name == '\0' ||
                                  (name[0] == '[' && strncmp(name, "[v", 2) != 0)); /* not [vdso] [vvar] */
            continue;
        }
        long long v;
        if (anon && sscanf(line, "Referenced: %lld kB", &v) == 1)
            kb += v;
    }
    bool bad = ferror(f);
    fclose(f);
    return bad ? -1 : kb * 1024;
}

static void touch_begin(uint64_t parallel, const void *codeptr)
{
    if (g_noop || !g.touch_mode || !g.touch_index)
        return;
    uint64_t idle = 0;
    if (!atomic_compare_exchange_strong(&g.touch_active, &idle, UINT64_MAX))
        return; /* a region is being measured: this one is nested in it or runs beside it */
    pthread_mutex_lock(&g.lock);
    /* first: the first two instances of each address (the first may include the runtime starting threads) */
    bool go = g.touch_mode == 2 || !seen_add(&g.touch_seen, &g.ntouch_seen, &g.captouch_seen, codeptr) ||
              !seen_add(&g.touch_seen2, &g.ntouch_seen2, &g.captouch_seen2, codeptr);
    pthread_mutex_unlock(&g.lock);
    if (go) {
        int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
        if (fd >= 0 && write(fd, "1", 1) == 1) {
            close(fd);
            g.touch_minflt = faults_now();
            atomic_store(&g.touch_active, parallel);
            return;
        }
        int err = errno;
        if (fd >= 0)
            close(fd);
        pthread_mutex_lock(&g.lock);
        note("%s%s\n", "bytes touched: /proc/self/clear_refs: ", strerror(err));
        pthread_mutex_unlock(&g.lock);
        g.touch_mode = 0;
    }
    atomic_store(&g.touch_active, 0);
}

static void touch_end(uint64_t parallel)
{
    if (parallel == 0 || atomic_load(&g.touch_active) != parallel)
        return;
    long long bytes = smaps_referenced_anon();
    uint64_t faults = faults_now() - g.touch_minflt;
    pthread_mutex_lock(&g.lock);
    if (bytes >= 0 && g.touch_index)
        fprintf(g.touch_index, "%llu\t%lld\t%llu\t%ld\n", (unsigned long long)parallel, bytes,
                (unsigned long long)faults, sysconf(_SC_PAGESIZE));
    pthread_mutex_unlock(&g.lock);
    atomic_store(&g.touch_active, 0);
}

static FILE *open_index(const char *name, const char *header)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", g.out, name);
    FILE *f = fopen(path, "we");
    if (f)
        fputs(header, f);
    return f;
}

/* ---- callbacks ---- */
static void on_thread_begin(ompt_thread_t type, ompt_data_t *thread_data)
{
    tbuf *b = thread_buf();
    if (b)
        b->type = (int)type;
    thread_data->ptr = b;
}

static void on_parallel_begin(ompt_data_t *task, const ompt_frame_t *frame, ompt_data_t *parallel,
                              unsigned int requested, int flags, const void *codeptr)
{
    (void)task, (void)frame, (void)flags;
    uint64_t id = atomic_fetch_add(&g.next_parallel, 1) + 1;
    parallel->value = id;
    touch_begin(id, codeptr);
    uncore_read(id, 1);
    record(K_PARALLEL, 0, ompt_scope_begin, id, codeptr, requested, 0);
}

static void on_parallel_end(ompt_data_t *parallel, ompt_data_t *task, int flags, const void *codeptr)
{
    (void)task, (void)flags;
    record(K_PARALLEL, 0, ompt_scope_end, parallel->value, codeptr, 0, 0);
    uncore_read(parallel->value, 2);
    touch_end(parallel->value);
    numa_snapshot(parallel->value, codeptr, false);
}

static void on_implicit_task(ompt_scope_endpoint_t endpoint, ompt_data_t *parallel, ompt_data_t *task,
                             unsigned int actual, unsigned int index, int flags)
{
    if (flags & ompt_task_initial)
        return; /* the initial task of the program, not a region's */
    uint64_t id;
    if (endpoint == ompt_scope_begin) {
        id = parallel ? parallel->value : 0;
        task->value = id;
    } else {
        id = task->value;
    }
    record(K_IMPLICIT, 0, endpoint, id, NULL, actual, index);
}

static void on_work(ompt_work_t type, ompt_scope_endpoint_t endpoint, ompt_data_t *parallel, ompt_data_t *task,
                    uint64_t count, const void *codeptr)
{
    uint64_t id = task ? task->value : (parallel ? parallel->value : 0);
    record(K_WORK, (int)type, endpoint, id, codeptr, count, 0);
}

static void on_sync(ompt_sync_region_t kind, ompt_scope_endpoint_t endpoint, ompt_data_t *parallel,
                    ompt_data_t *task, const void *codeptr)
{
    uint64_t id = task ? task->value : (parallel ? parallel->value : 0);
    record(K_SYNC, (int)kind, endpoint, id, codeptr, 0, 0);
}

/* ---- set-up ---- */
static void add_events(ts_evlist *ev, const char *list, const char *what)
{
    char *copy = strdup(list);
    if (!copy)
        return;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        while (*tok == ' ')
            tok++;
        if (!*tok)
            continue;
        const char *name = tok, *spec = tok;
        char *colon = strchr(tok, ':');
        char *slash = strchr(tok, '/');
        if (colon && (!slash || colon < slash)) {
            *colon = '\0';
            spec = colon + 1;
        }
        char err[512];
        if (ts_evlist_add(ev, name, spec, err, sizeof err) != 0) {
            char line[700];
            snprintf(line, sizeof line, "%s %s", what, name);
            note("%s: %s\n", line, err);
        }
    }
    free(copy);
}

static int set_cb(ompt_callbacks_t which, ompt_callback_t cb, const char *name)
{
    int rc = g.set_callback(which, cb);
    if (rc == ompt_set_never || rc == ompt_set_error) {
        note("%s%s\n", "runtime never dispatches ", name);
        return -1;
    }
    return 0;
}

/* The files written while the program runs (numa.tsv and its copies, touched.tsv), in g.out. */
static void open_indexes(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/numa", g.out);
    if (g.numa_mode && mkdir(path, 0755) != 0 && errno != EEXIST)
        g.numa_mode = 0;
    if (g.numa_mode && !(g.numa_index = open_index("numa.tsv", "snapshot\tparallel\ttsc\tfile\n")))
        g.numa_mode = 0;
    if (g.touch_mode && !(g.touch_index = open_index("touched.tsv", "parallel\treferenced\tfaults\tpage_size\n")))
        g.touch_mode = 0;
}

/* ---- fork() without exec: the child keeps tracing, into ROOT/fork-PID/ ----
 * Before the fork the tool's lock is taken (no thread holds it half-way through an update) and the buffered
 * index files are flushed (the child must not write the parent's pending lines a second time). The child
 * starts with no records: the thread that forked is its thread 0 (its counters reopened: the inherited ones
 * count the parent's thread), the other threads' buffers are dropped (those threads do not exist in it),
 * uncore counters are off (they belong to the parent). Its files are written at the runtime's finalize, as the
 * parent's: libomp's fork handler re-initialises the runtime in the child, which finalizes it (and the tool)
 * when it exits, after joining its worker threads. A child ended by _exit or a signal writes nothing. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&g.lock);
    if (g.numa_index)
        fflush(g.numa_index);
    if (g.touch_index)
        fflush(g.touch_index);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&g.lock);
}

static void fork_child(void)
{
    pthread_mutex_unlock(&g.lock);
    g.parent_pid = g.pid;
    g.pid = getpid();
    g.written = false;
    int n = snprintf(g.out, sizeof g.out, "%s/fork-%d", g.root, (int)g.pid);
    if (n < 0 || (size_t)n >= sizeof g.out || (mkdir(g.out, 0755) != 0 && errno != EEXIST)) {
        g_noop = true; /* nowhere to write: the child runs untraced */
        g.written = true;
        g.numa_mode = g.touch_mode = 0;
        return;
    }
    tbuf *self = t_buf;
    for (tbuf *b = g.threads, *next; b; b = next) {
        next = b->next;
        for (size_t i = 0; i < b->nchunks; i++) {
            munmap(b->chunks[i].recs, CHUNK_RECS * sizeof(rec));
            if (b->chunks[i].vals)
                munmap(b->chunks[i].vals, CHUNK_RECS * g.nevents * sizeof(uint64_t));
        }
        free(b->chunks);
        b->chunks = NULL;
        b->nchunks = b->capchunks = b->n = 0;
        b->dropped = 0;
        if (b->counting)
            ts_counters_close(&b->counters);
        b->counting = false;
        if (b != self)
            free(b);
    }
    g.threads = self;
    g.nthreads = self ? 1 : 0;
    if (self) {
        self->next = NULL;
        self->thread = 0;
        self->tid = (pid_t)syscall(SYS_gettid);
        if (g.nevents) {
            ts_counters_init(&self->counters, &g.ev);
            if (ts_counters_open_self(&self->counters, -1) == (int)g.nevents &&
                ts_counters_enable(&self->counters) == 0)
                self->counting = true;
            else
                ts_counters_close(&self->counters);
        }
    }
    if (g.uncore)
        ts_counters_close(&g.ucounters);
    g.uncore = false;
    g.nurecs = g.nuvals = 0;
    if (g.numa_index)
        fclose(g.numa_index); /* flushed before the fork: closes the child's descriptor only */
    if (g.touch_index)
        fclose(g.touch_index);
    g.numa_index = g.touch_index = NULL;
    g.nsnapshots = 0;
    g.nseen = g.ntouch_seen = g.ntouch_seen2 = 0;
    atomic_store(&g.touch_active, 0);
    g.skipped[0] = '\0';
    open_indexes();
}

static int tool_initialize(ompt_function_lookup_t lookup, int initial_device, ompt_data_t *tool_data)
{
    (void)initial_device, (void)tool_data;
    g.set_callback = (ompt_set_callback_t)lookup("ompt_set_callback");
    if (!g.set_callback)
        return 0;
    const char *root = getenv("TAILSCOPE_OMPT_SYSFS");
    ts_evlist_init(&g.ev, root && *root ? root : NULL);
    ts_evlist_init(&g.uev, root && *root ? root : NULL);
    const char *events = getenv("TAILSCOPE_OMPT_EVENTS");
    if (events && *events)
        add_events(&g.ev, events, "event");
    g.nevents = g.ev.n;
    const char *uncore = getenv("TAILSCOPE_OMPT_UNCORE");
    if (uncore && *uncore) {
        add_events(&g.uev, uncore, "uncore event");
        if (g.uev.n) {
            ts_counters_init(&g.ucounters, &g.uev);
            int n = ts_counters_open_uncore(&g.ucounters, -1);
            for (size_t i = 0; i < g.ucounters.nskipped; i++)
                note("%s%s\n", "uncore: ", g.ucounters.skipped[i]);
            if (n > 0 && ts_counters_enable(&g.ucounters) == 0)
                g.uncore = true;
            else
                ts_counters_close(&g.ucounters);
        }
    }
    open_indexes();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    set_cb(ompt_callback_thread_begin, (ompt_callback_t)on_thread_begin, "thread_begin");
    int bad = 0;
    bad |= set_cb(ompt_callback_parallel_begin, (ompt_callback_t)on_parallel_begin, "parallel_begin");
    bad |= set_cb(ompt_callback_parallel_end, (ompt_callback_t)on_parallel_end, "parallel_end");
    set_cb(ompt_callback_implicit_task, (ompt_callback_t)on_implicit_task, "implicit_task");
    set_cb(ompt_callback_work, (ompt_callback_t)on_work, "work");
    set_cb(ompt_callback_sync_region, (ompt_callback_t)on_sync, "sync_region");
    if (bad)
        g.failed = true;
    g.tsc_hz = ts_tsc_hz_cpuid();
    if (g.tsc_hz <= 0)
        g.tsc_hz = ts_tsc_hz_calibrate(20);
    ts_anchor_take(&g.start, g.tsc_hz);
    thread_buf(); /* the initial thread first: thread 0 */
    return 1;     /* keep the tool */
}

/* ---- output ---- */
typedef struct objmap {
    const void **addr;   /* code address -> object index (open addressing on addr) */
    int *obj;
    size_t cap;
    char **paths;
    uintptr_t *bases;
    int nobj;
} objmap;

static int object_of(objmap *m, const void *addr, uintptr_t *base)
{
    size_t h = ((uintptr_t)addr >> 2) * 0x9E3779B97F4A7C15ull & (m->cap - 1);
    while (m->addr[h] && m->addr[h] != addr)
        h = (h + 1) & (m->cap - 1);
    if (m->addr[h]) {
        *base = m->bases[m->obj[h]];
        return m->obj[h];
    }
    Dl_info info;
    const char *path = "?";
    uintptr_t b = 0;
    char real[4096];
    if (dladdr(addr, &info) && info.dli_fname) {
        path = info.dli_fname;
        b = (uintptr_t)info.dli_fbase;
        /* the main program is named as it was started ("./app", or ""): make it absolute */
        if (realpath(*path ? path : "/proc/self/exe", real))
            path = real;
    }
    int idx = -1;
    for (int i = 0; i < m->nobj; i++)
        if (m->bases[i] == b && strcmp(m->paths[i], path) == 0)
            idx = i;
    if (idx < 0 && m->nobj < 4096) {
        idx = m->nobj++;
        m->paths[idx] = strdup(path);
        m->bases[idx] = b;
    }
    if (idx < 0)
        return -1;
    if (m->nobj * 2 < (int)m->cap) { /* never fills: cap is 8192 and objects at most 4096 */
        m->addr[h] = addr;
        m->obj[h] = idx;
    }
    *base = b;
    return idx;
}

static FILE *open_out(const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", g.out, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "tailscope ompt: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

static int close_out(FILE *f, const char *name)
{
    if (fclose(f) != 0) {
        fprintf(stderr, "tailscope ompt: error writing %s/%s: %s\n", g.out, name, strerror(errno));
        return -1;
    }
    return 0;
}

static const char *thread_type(int t)
{
    switch (t) {
    case ompt_thread_initial: return "initial";
    case ompt_thread_worker: return "worker";
    case ompt_thread_other: return "other";
    default: return "unknown";
    }
}

static void write_files(void);

static void tool_finalize(ompt_data_t *tool_data)
{
    (void)tool_data;
    write_files();
}

static void write_files(void)
{
    if (g.written || getpid() != g.pid)
        return; /* written already (a fork()ed child at exit, then the runtime's finalize) */
    g.written = true;
    numa_snapshot(0, NULL, true);
    ts_anchor_take(&g.end, g.tsc_hz);
    if (g.numa_index && fclose(g.numa_index) != 0)
        fprintf(stderr, "tailscope ompt: error writing %s/numa.tsv\n", g.out);
    g.numa_index = NULL;
    if (g.touch_index && fclose(g.touch_index) != 0)
        fprintf(stderr, "tailscope ompt: error writing %s/touched.tsv\n", g.out);
    g.touch_index = NULL;

    objmap m = {.cap = 8192};
    m.addr = calloc(m.cap, sizeof *m.addr);
    m.obj = calloc(m.cap, sizeof *m.obj);
    m.paths = calloc(4096, sizeof *m.paths);
    m.bases = calloc(4096, sizeof *m.bases);
    if (!m.addr || !m.obj || !m.paths || !m.bases) {
        fprintf(stderr, "tailscope ompt: out of memory writing the trace\n");
        return;
    }

    uint64_t dropped = 0;
    FILE *f = open_out("threads.tsv");
    if (f) {
        fputs("thread\ttid\ttype\tfirst_cpu\trecords\n", f);
        for (tbuf *b = g.threads; b; b = b->next) {
            fprintf(f, "%d\t%d\t%s\t%u\t%zu\n", b->thread, (int)b->tid, thread_type(b->type),
                    b->first_aux & 0xfff, b->n);
            dropped += b->dropped;
        }
        close_out(f, "threads.tsv");
    }

    f = open_out("events.tsv");
    if (f) {
        static char buf[1 << 20];
        setvbuf(f, buf, _IOFBF, sizeof buf);
        fputs("thread\tkind\tsub\tendpoint\tparallel\tobject\toffset\ttsc\tcpu\tnode\tcount\tindex", f);
        for (size_t i = 0; i < g.nevents; i++)
            fprintf(f, "\tc%zu", i);
        fputc('\n', f);
        for (tbuf *b = g.threads; b; b = b->next) {
            for (size_t i = 0; i < b->n; i++) {
                const chunk *c = &b->chunks[i / CHUNK_RECS];
                const rec *r = &c->recs[i % CHUNK_RECS];
                int obj = -1;
                uintptr_t base = 0, off = 0;
                if (r->codeptr) {
                    obj = object_of(&m, r->codeptr, &base);
                    off = (uintptr_t)r->codeptr - base;
                }
                fprintf(f, "%d\t%s\t%u\t%s\t%llu\t%d\t%lld\t%llu\t%u\t%u\t%u\t%u", b->thread, KIND_NAME[r->kind],
                        r->sub, r->endpoint == ompt_scope_begin ? "begin" : "end",
                        (unsigned long long)r->parallel, obj, obj < 0 ? -1ll : (long long)off,
                        (unsigned long long)r->tsc, r->aux & 0xfff, r->aux >> 12, r->count, r->index);
                for (size_t e = 0; e < g.nevents; e++) {
                    uint64_t v = c->vals[(i % CHUNK_RECS) * g.nevents + e];
                    if (v == UINT64_MAX)
                        fputs("\t", f);
                    else
                        fprintf(f, "\t%llu", (unsigned long long)v);
                }
                fputc('\n', f);
            }
        }
        close_out(f, "events.tsv");
    }

    f = open_out("objects.tsv");
    if (f) {
        fputs("object\tpath\tbase\n", f);
        for (int i = 0; i < m.nobj; i++)
            fprintf(f, "%d\t%s\t%#llx\n", i, m.paths[i], (unsigned long long)m.bases[i]);
        close_out(f, "objects.tsv");
    }

    if (g.uncore) {
        f = open_out("uncore.tsv");
        if (f) {
            fputs("parallel\tendpoint\ttsc\tpmu\tunit\tsocket\twidth\tevent\tvalue\tenabled\trunning\n", f);
            for (size_t i = 0; i < g.nurecs; i++) {
                const uncore_rec *u = &g.urecs[i];
                for (size_t c = 0; c < g.ucounters.n; c++) {
                    const ts_count *k = &g.ucounters.counts[c];
                    const uint64_t *v = &g.uvals[u->first + 3 * c];
                    fprintf(f, "%llu\t%s\t%llu\t%s\t%d\t%d\t%d\t%s\t%llu\t%llu\t%llu\n",
                            (unsigned long long)u->parallel, u->endpoint == 1 ? "begin" : "end",
                            (unsigned long long)u->tsc, k->pmu, k->unit, k->socket, k->width, k->name,
                            (unsigned long long)v[0], (unsigned long long)v[1], (unsigned long long)v[2]);
                }
            }
            close_out(f, "uncore.tsv");
        }
    }

    f = open_out("meta.tsv");
    if (f) {
        fprintf(f, "pid\t%d\n", (int)getpid());
        if (g.parent_pid)
            fprintf(f, "parent_pid\t%d\n", (int)g.parent_pid);
        fprintf(f, "runtime\t%s\n", g.runtime ? g.runtime : "");
        fprintf(f, "tsc_hz\t%.1f\n", g.tsc_hz);
        fprintf(f, "start_tsc\t%llu\nstart_mono_ns\t%lld\nstart_real_ns\t%lld\n", (unsigned long long)g.start.tsc,
                (long long)g.start.mono_ns, (long long)g.start.real_ns);
        fprintf(f, "end_tsc\t%llu\nend_mono_ns\t%lld\nend_real_ns\t%lld\n", (unsigned long long)g.end.tsc,
                (long long)g.end.mono_ns, (long long)g.end.real_ns);
        fputs("events\t", f);
        for (size_t i = 0; i < g.nevents; i++)
            fprintf(f, "%s%s", i ? ";" : "", g.ev.ev[i].name);
        fputs("\nuncore\t", f);
        for (size_t i = 0; g.uncore && i < g.uev.n; i++)
            fprintf(f, "%s%s", i ? ";" : "", g.uev.ev[i].name);
        fprintf(f, "\nthreads\t%d\nparallel_regions\t%llu\nnuma_snapshots\t%d\ndropped\t%llu\n", g.nthreads,
                (unsigned long long)atomic_load(&g.next_parallel), g.nsnapshots, (unsigned long long)dropped);
        for (char *s = g.skipped; *s;) {
            char *nl = strchr(s, '\n');
            size_t len = nl ? (size_t)(nl - s) : strlen(s);
            fprintf(f, "skipped\t%.*s\n", (int)len, s);
            s += len + (nl ? 1 : 0);
        }
        fprintf(f, "complete\t%d\n", g.failed ? 0 : 1);
        close_out(f, "meta.tsv");
    }
    for (int i = 0; i < m.nobj; i++)
        free(m.paths[i]);
    free(m.addr), free(m.obj), free(m.paths), free(m.bases);
}

ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version, const char *runtime_version);

ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version, const char *runtime_version)
{
    (void)omp_version;
    const char *out = getenv("TAILSCOPE_OMPT_OUT");
    if (!out || !*out || strlen(out) >= sizeof g.out)
        return NULL;
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tailscope ompt: cannot create %s: %s; tracing off\n", out, strerror(errno));
        return NULL;
    }
    /* The first process claims the directory (O_EXCL on `owner`); an OpenMP program it starts inherits the
     * environment and writes into child-PID/ instead of over the traced program's files. */
    char owner[4200];
    snprintf(owner, sizeof owner, "%s/owner", out);
    int fd = open(owner, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
        dprintf(fd, "%d\n", (int)getpid());
        close(fd);
        strcpy(g.out, out);
    } else {
        int n = snprintf(g.out, sizeof g.out, "%s/child-%d", out, (int)getpid());
        if (n < 0 || (size_t)n >= sizeof g.out || (mkdir(g.out, 0755) != 0 && errno != EEXIST))
            return NULL;
    }
    g.pid = getpid();
    g.runtime = runtime_version;
    const char *mode = getenv("TAILSCOPE_OMPT_NUMA");
    g.numa_mode = 1;
    if (mode && strcmp(mode, "off") == 0)
        g.numa_mode = 0;
    else if (mode && strcmp(mode, "every") == 0)
        g.numa_mode = 2;
    const char *touch = getenv("TAILSCOPE_OMPT_TOUCHED");
    g.touch_mode = 1;
    if (touch && strcmp(touch, "off") == 0)
        g.touch_mode = 0;
    else if (touch && strcmp(touch, "every") == 0)
        g.touch_mode = 2;
    strcpy(g.root, out);
    const char *noop = getenv("TAILSCOPE_OMPT_NOOP");
    g_noop = noop && strcmp(noop, "1") == 0;
    const char *max = getenv("TAILSCOPE_OMPT_MAX_RECORDS");
    g.max_records = max && *max ? strtoull(max, NULL, 10) : (size_t)1 << 24;
    if (g.max_records < 16)
        g.max_records = 16;
    static ompt_start_tool_result_t result = {tool_initialize, tool_finalize, {0}};
    return &result;
}
