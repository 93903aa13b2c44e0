/* SPDX-License-Identifier: BSD-3-Clause */
/* rpmem-obj-bench: the workload users run through librpmem -- libpmemobj
 * transactions on a persistent hash map, on a pool set with a remote replica
 * and, in the same run, on one without it.
 *
 * Each thread owns a fixed-bucket hash map (as PMDK's hashmap_tx example:
 * chained entries, a bucket array, every change in a transaction) and its
 * own keys. Two operations:
 *   insert  a transaction that allocates a new entry (pmemobj_tx_alloc) with
 *           a value of SIZE bytes, links it into its bucket
 *           (pmemobj_tx_add_range on the bucket head) and, when the key was
 *           there already, unlinks and frees the old entry (pmemobj_tx_free);
 *           the keys cycle through a range of KEYS per thread, so the pool
 *           does not fill up
 *   update  a transaction that snapshots the whole value of an existing
 *           entry (pmemobj_tx_add_range) and rewrites it
 * Cases (operation, value size, threads) run interleaved with the pool sets
 * alternating, REPEAT times; every figure is the median over the runs.
 *
 * With the counting librpmem.so.1 of this directory first on
 * LD_LIBRARY_PATH (run-local.sh does that), the rpmem calls each
 * transaction made are counted, by kind and size.
 *
 * usage: see usage() or run-local.sh. */
#define _GNU_SOURCE
#include "tools/rpmem-obj-bench/rpmem_count.h"

#include <libpmemobj.h>

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define LAYOUT "rpmem-obj-bench"
#define MAX_THREADS 64
#define MAX_LIST 16
#define NBUCKETS 1024
#define TYPE_MAP 1
#define TYPE_ENTRY 2
#define INSERT_KEYS (UINT64_C(1) << 31) /* insert keys: this bit set */

struct root {
  PMEMoid maps[MAX_THREADS];
};

struct map {
  PMEMoid buckets[NBUCKETS];
};

struct entry {
  uint64_t key;
  uint64_t size;
  PMEMoid next;
  uint64_t seed; /* value is fill_value(seed) */
  uint8_t value[];
};

enum op { OP_INSERT, OP_UPDATE };
static const char *const op_names[] = {"insert", "update"};

struct config {
  const char *name; /* "local-only" or "replica" */
  const char *path;
  PMEMobjpool *pop;
  int remote;
};

struct options {
  const char *local_set, *replica_set;
  unsigned threads[MAX_LIST], nthreads;
  size_t sizes[MAX_LIST];
  unsigned nsizes;
  enum op ops[2];
  unsigned nops;
  double duration_s, warmup_s;
  unsigned repeat;
  uint64_t keys; /* per thread, per value size */
  int csv;
};

/* One run of one case on one pool set. */
struct run {
  double tx_s, p50_us, p99_us;
  uint64_t txs;
  int error;
  char error_text[256];
};

struct result {
  enum op op;
  size_t size;
  unsigned threads;
  struct config *cfg;
  struct run runs[64];
  unsigned nruns;
  uint64_t txs;             /* all runs */
  struct rpmem_count delta; /* rpmem calls made in all runs */
  int counted;
};

static rpmem_count_snapshot_fn snapshot_fn;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: rpmem-obj-bench [options]\n"
          "  -L, --local SET     pool set without a remote replica (created)\n"
          "  -R, --replica SET   pool set with a REPLICA line (created)\n"
          "  -t, --threads LIST  thread counts (default 1,2,4)\n"
          "  -s, --sizes LIST    value sizes, K suffix allowed (default 64,256,1K,4K)\n"
          "  -o, --ops LIST      insert, update (default insert,update)\n"
          "  -d, --duration SEC  measured time per case and run (default 1)\n"
          "  -w, --warmup SEC    unmeasured transactions before each (default 0.1)\n"
          "  -r, --repeat N      runs of every case, interleaved (default 1)\n"
          "  -k, --keys N        keys per thread and value size (default 256)\n"
          "  -f, --format FMT    table (default) or csv\n"
          "Pools are created with pmemobj_create (the size from the pool set) and\n"
          "libpmemobj's defaults. Either pool set may be left out.\n"
          "       rpmem-obj-bench --verify SET\n"
          "  opens a pool the benchmark made and checks every value in it.\n");
}

static int parse_list(const char *arg, uint64_t *out, unsigned max, int sizes) {
  unsigned n = 0;
  char *copy = strdup(arg), *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *end;
    unsigned long long v = strtoull(tok, &end, 10);
    if (sizes && (*end == 'K' || *end == 'k')) v <<= 10, ++end;
    if (*end || v == 0 || n == max) {
      free(copy);
      return -1;
    }
    out[n++] = v;
  }
  free(copy);
  return (int)n;
}

static void parse(int argc, char **argv, struct options *o) {
  static const struct option longopts[] = {
      {"local", required_argument, NULL, 'L'},   {"replica", required_argument, NULL, 'R'},
      {"threads", required_argument, NULL, 't'}, {"sizes", required_argument, NULL, 's'},
      {"ops", required_argument, NULL, 'o'},     {"duration", required_argument, NULL, 'd'},
      {"warmup", required_argument, NULL, 'w'},  {"repeat", required_argument, NULL, 'r'},
      {"keys", required_argument, NULL, 'k'},    {"format", required_argument, NULL, 'f'},
      {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
  memset(o, 0, sizeof(*o));
  o->threads[0] = 1, o->threads[1] = 2, o->threads[2] = 4, o->nthreads = 3;
  o->sizes[0] = 64, o->sizes[1] = 256, o->sizes[2] = 1024, o->sizes[3] = 4096, o->nsizes = 4;
  o->ops[0] = OP_INSERT, o->ops[1] = OP_UPDATE, o->nops = 2;
  o->duration_s = 1, o->warmup_s = 0.1, o->repeat = 1, o->keys = 256;
  uint64_t list[MAX_LIST];
  int c, n;
  while ((c = getopt_long(argc, argv, "L:R:t:s:o:d:w:r:k:f:h", longopts, NULL)) != -1) {
    switch (c) {
      case 'L':
        o->local_set = optarg;
        break;
      case 'R':
        o->replica_set = optarg;
        break;
      case 't':
        if ((n = parse_list(optarg, list, MAX_LIST, 0)) < 0) goto bad;
        for (int i = 0; i < n; ++i) {
          if (list[i] > MAX_THREADS) goto bad;
          o->threads[i] = (unsigned)list[i];
        }
        o->nthreads = (unsigned)n;
        break;
      case 's':
        if ((n = parse_list(optarg, list, MAX_LIST, 1)) < 0) goto bad;
        for (int i = 0; i < n; ++i) {
          if (list[i] > (1u << 20)) goto bad;
          o->sizes[i] = (size_t)list[i];
        }
        o->nsizes = (unsigned)n;
        break;
      case 'o': {
        o->nops = 0;
        char *copy = strdup(optarg), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
          if (o->nops == 2) {
            free(copy);
            goto bad;
          }
          if (!strcmp(t, "insert"))
            o->ops[o->nops++] = OP_INSERT;
          else if (!strcmp(t, "update"))
            o->ops[o->nops++] = OP_UPDATE;
          else {
            free(copy);
            goto bad;
          }
        }
        free(copy);
        if (!o->nops) goto bad;
        break;
      }
      case 'd':
        o->duration_s = atof(optarg);
        if (!(o->duration_s > 0)) goto bad;
        break;
      case 'w':
        o->warmup_s = atof(optarg);
        if (!(o->warmup_s >= 0)) goto bad;
        break;
      case 'r':
        o->repeat = (unsigned)atoi(optarg);
        if (o->repeat < 1 || o->repeat > 64) goto bad;
        break;
      case 'k':
        o->keys = strtoull(optarg, NULL, 10);
        if (o->keys < 1 || o->keys >= INSERT_KEYS) goto bad;
        break;
      case 'f':
        if (!strcmp(optarg, "csv"))
          o->csv = 1;
        else if (strcmp(optarg, "table"))
          goto bad;
        break;
      case 'h':
        usage(stdout);
        exit(0);
      default:
        goto bad;
    }
  }
  if (optind == argc && (o->local_set || o->replica_set)) return;
bad:
  usage(stderr);
  exit(2);
}

/* --- the hash map -------------------------------------------------------- */

static uint64_t hash(uint64_t k) {
  k ^= k >> 33;
  k *= UINT64_C(0xff51afd7ed558ccd);
  k ^= k >> 33;
  return k;
}

static void fill_value(uint8_t *v, size_t n, uint64_t seed) {
  uint64_t x = seed * UINT64_C(0x9e3779b97f4a7c15) + 1;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t k = n - i < 8 ? n - i : 8;
    memcpy(v + i, &x, k);
  }
}

static struct map *map_of(PMEMobjpool *pop, unsigned thread) {
  struct root *r = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
  return pmemobj_direct(r->maps[thread]);
}

/* The link that points at key's entry, or at the end of its chain. */
static PMEMoid *find_link(struct map *m, uint64_t key) {
  PMEMoid *link = &m->buckets[hash(key) % NBUCKETS];
  while (!OID_IS_NULL(*link)) {
    struct entry *e = pmemobj_direct(*link);
    if (e->key == key) break;
    link = &e->next;
  }
  return link;
}

/* Inserts (or replaces) key with a fresh entry; inside a transaction. */
static void tx_insert(struct map *m, uint64_t key, size_t size, uint64_t seed) {
  PMEMoid *link = find_link(m, key);
  if (!OID_IS_NULL(*link)) {
    PMEMoid old = *link;
    struct entry *e = pmemobj_direct(old);
    pmemobj_tx_add_range_direct(link, sizeof(*link));
    *link = e->next;
    pmemobj_tx_free(old);
  }
  PMEMoid *head = &m->buckets[hash(key) % NBUCKETS];
  PMEMoid n = pmemobj_tx_alloc(sizeof(struct entry) + size, TYPE_ENTRY);
  struct entry *e = pmemobj_direct(n);
  e->key = key;
  e->size = size;
  e->next = *head;
  e->seed = seed;
  fill_value(e->value, size, seed);
  pmemobj_tx_add_range_direct(head, sizeof(*head));
  *head = n;
}

static int do_insert(PMEMobjpool *pop, struct map *m, uint64_t key, size_t size, uint64_t seed) {
  volatile int ok = 1;
  TX_BEGIN(pop) { tx_insert(m, key, size, seed); }
  TX_ONABORT { ok = 0; }
  TX_END
  return ok ? 0 : (errno ? errno : EIO);
}

static int do_update(PMEMobjpool *pop, struct map *m, uint64_t key, size_t size, uint64_t seed) {
  PMEMoid oid = *find_link(m, key);
  if (OID_IS_NULL(oid)) return ENOENT;
  struct entry *e = pmemobj_direct(oid);
  if (e->size != size) return EINVAL;
  volatile int ok = 1;
  TX_BEGIN(pop) {
    pmemobj_tx_add_range(oid, offsetof(struct entry, seed), sizeof(e->seed) + size);
    e->seed = seed;
    fill_value(e->value, size, seed);
  }
  TX_ONABORT { ok = 0; }
  TX_END
  return ok ? 0 : (errno ? errno : EIO);
}

static uint64_t key_of(enum op op, unsigned size_index, uint64_t i, uint64_t keys) {
  return ((uint64_t)size_index << 32) | (op == OP_INSERT ? INSERT_KEYS : 0) | (i % keys);
}

/* Keys first..first+31 of the updates of value size si, in one transaction. */
static int insert_batch(PMEMobjpool *pop, struct map *m, const struct options *o, unsigned si,
                        uint64_t first) {
  volatile int ok = 1;
  TX_BEGIN(pop) {
    for (uint64_t k = first; k < first + 32 && k < o->keys; ++k)
      tx_insert(m, key_of(OP_UPDATE, si, k, o->keys), o->sizes[si], k);
  }
  TX_ONABORT { ok = 0; }
  TX_END
  return ok ? 0 : -1;
}

/* The maps of every thread and the keys the updates rewrite, a batch of
 * inserts per transaction. */
static int populate(struct config *cfg, const struct options *o, unsigned max_threads) {
  PMEMobjpool *pop = cfg->pop;
  PMEMoid root = pmemobj_root(pop, sizeof(struct root));
  struct root *r = pmemobj_direct(root);
  volatile int ok = 1;
  TX_BEGIN(pop) {
    pmemobj_tx_add_range(root, 0, sizeof(struct root));
    for (unsigned t = 0; t < max_threads; ++t)
      if (OID_IS_NULL(r->maps[t])) r->maps[t] = pmemobj_tx_zalloc(sizeof(struct map), TYPE_MAP);
  }
  TX_ONABORT { ok = 0; }
  TX_END
  if (!ok) return -1;
  for (unsigned t = 0; t < max_threads; ++t)
    for (unsigned si = 0; si < o->nsizes; ++si)
      for (uint64_t k = 0; k < o->keys; k += 32)
        if (insert_batch(pop, map_of(pop, t), o, si, k)) return -1;
  return ok ? 0 : -1;
}

/* --- running a case ------------------------------------------------------ */

struct shared {
  struct config *cfg;
  enum op op;
  unsigned size_index;
  size_t size;
  uint64_t keys;
  pthread_barrier_t start;
  atomic_int phase; /* 0 warm-up, 1 measure, 2 stop */
  atomic_int failed;
};

struct worker {
  struct shared *sh;
  unsigned thread;
  uint32_t *lat;
  size_t nlat, cap;
  uint64_t next; /* keeps going from run to run */
  int error;
  double t_end;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct shared *sh = w->sh;
  struct map *m = map_of(sh->cfg->pop, w->thread);
  pthread_barrier_wait(&sh->start);
  int measuring = 0;
  for (;;) {
    int phase = atomic_load_explicit(&sh->phase, memory_order_acquire);
    /* Every thread measures at least one transaction, however slow. */
    if ((phase == 2 && w->nlat > 0) || atomic_load_explicit(&sh->failed, memory_order_relaxed))
      break;
    if (phase >= 1 && !measuring) measuring = 1;
    uint64_t i = w->next++;
    uint64_t key = key_of(sh->op, sh->size_index, i, sh->keys);
    uint64_t t0 = now_ns();
    int err = sh->op == OP_INSERT ? do_insert(sh->cfg->pop, m, key, sh->size, i)
                                  : do_update(sh->cfg->pop, m, key, sh->size, i);
    uint64_t dt = now_ns() - t0;
    if (err) {
      w->error = err;
      atomic_store(&sh->failed, 1);
      break;
    }
    if (!measuring) continue;
    if (w->nlat == w->cap) {
      size_t cap = w->cap ? w->cap * 2 : 1 << 16;
      uint32_t *p = realloc(w->lat, cap * sizeof(*p));
      if (!p) {
        w->error = ENOMEM;
        atomic_store(&sh->failed, 1);
        break;
      }
      w->lat = p, w->cap = cap;
    }
    w->lat[w->nlat++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
  }
  w->t_end = now_s();
  return NULL;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static double pct_us(const uint32_t *sorted, size_t n, double p) {
  if (!n) return 0;
  size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return sorted[rank - 1] / 1000.0;
}

static struct worker workers[MAX_THREADS];

static void run_case(const struct options *o, struct result *r) {
  struct run *run = &r->runs[r->nruns++];
  memset(run, 0, sizeof(*run));
  struct shared sh = {.cfg = r->cfg, .op = r->op, .size = r->size, .keys = o->keys};
  for (unsigned s = 0; s < o->nsizes; ++s)
    if (o->sizes[s] == r->size) sh.size_index = s;
  atomic_init(&sh.phase, 0);
  atomic_init(&sh.failed, 0);
  pthread_barrier_init(&sh.start, NULL, r->threads + 1);
  pthread_t tids[MAX_THREADS];
  for (unsigned t = 0; t < r->threads; ++t) {
    workers[t].sh = &sh;
    workers[t].thread = t;
    workers[t].nlat = 0;
    workers[t].error = 0;
    if (pthread_create(&tids[t], NULL, worker_main, &workers[t]) != 0) {
      fprintf(stderr, "rpmem-obj-bench: pthread_create failed\n");
      exit(1);
    }
  }
  pthread_barrier_wait(&sh.start);
  struct timespec ws = {(time_t)o->warmup_s,
                        (long)((o->warmup_s - (double)(time_t)o->warmup_s) * 1e9)};
  nanosleep(&ws, NULL);
  struct rpmem_count before, after;
  if (snapshot_fn) snapshot_fn(&before);
  double t0 = now_s();
  atomic_store_explicit(&sh.phase, 1, memory_order_release);
  struct timespec ds = {(time_t)o->duration_s,
                        (long)((o->duration_s - (double)(time_t)o->duration_s) * 1e9)};
  nanosleep(&ds, NULL);
  atomic_store_explicit(&sh.phase, 2, memory_order_release);
  double t_end = t0;
  for (unsigned t = 0; t < r->threads; ++t) {
    pthread_join(tids[t], NULL);
    if (workers[t].t_end > t_end) t_end = workers[t].t_end;
  }
  pthread_barrier_destroy(&sh.start);

  size_t n = 0;
  for (unsigned t = 0; t < r->threads; ++t) {
    n += workers[t].nlat;
    if (workers[t].error && !run->error) {
      run->error = workers[t].error;
      snprintf(run->error_text, sizeof(run->error_text), "%s: %s (%s)", op_names[r->op],
               strerror(workers[t].error), pmemobj_errormsg());
    }
  }
  uint32_t *all = malloc((n ? n : 1) * sizeof(*all));
  size_t k = 0;
  for (unsigned t = 0; t < r->threads; ++t) {
    memcpy(all + k, workers[t].lat, workers[t].nlat * sizeof(*all));
    k += workers[t].nlat;
  }
  qsort(all, n, sizeof(*all), cmp_u32);
  run->txs = n;
  run->tx_s = (double)n / (t_end - t0);
  run->p50_us = pct_us(all, n, 50);
  run->p99_us = pct_us(all, n, 99);
  free(all);
  r->txs += n;
  if (snapshot_fn) {
    /* Transactions still running when the clock started or stopped
     * make the counts a little off, by at most one per thread. */
    snapshot_fn(&after);
    r->counted = 1;
    for (int kind = 0; kind < RPMEM_COUNT_NKINDS; ++kind) {
      r->delta.calls[kind] += after.calls[kind] - before.calls[kind];
      r->delta.bytes[kind] += after.bytes[kind] - before.bytes[kind];
      for (int b = 0; b < RPMEM_COUNT_NBUCKETS; ++b)
        r->delta.hist[kind][b] += after.hist[kind][b] - before.hist[kind][b];
    }
  }
}

/* --- the report ----------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median_of(const struct result *r, size_t field) {
  double v[64];
  for (unsigned i = 0; i < r->nruns; ++i)
    v[i] = *(const double *)((const char *)&r->runs[i] + field);
  qsort(v, r->nruns, sizeof(double), cmp_double);
  unsigned n = r->nruns;
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static const char *failed(const struct result *r) {
  for (unsigned i = 0; i < r->nruns; ++i)
    if (r->runs[i].error) return r->runs[i].error_text;
  return NULL;
}

static void size_text(char *buf, size_t len, uint64_t s) {
  if (s >= 1024 && s % 1024 == 0)
    snprintf(buf, len, "%llu KiB", (unsigned long long)(s >> 10));
  else
    snprintf(buf, len, "%llu B", (unsigned long long)s);
}

/* "persist 3.00 (<=64 B 2.00, <=4 KiB 1.00); drain 1.00" per transaction. */
static void calls_text(char *buf, size_t len, const struct result *r, int csv) {
  size_t at = 0;
  buf[0] = 0;
  if (!r->counted || !r->txs) {
    snprintf(buf, len, "%s", csv ? "" : "-");
    return;
  }
  double txs = (double)r->txs;
  for (int k = 0; k < RPMEM_COUNT_NKINDS; ++k) {
    if (!r->delta.calls[k]) continue;
    at += (size_t)snprintf(buf + at, len - at, "%s%s %.2f", at ? (csv ? " | " : "; ") : "",
                           rpmem_count_kind_name((enum rpmem_count_kind)k),
                           (double)r->delta.calls[k] / txs);
    if (k == RPMEM_COUNT_DRAIN) continue;
    at += (size_t)snprintf(buf + at, len - at, " (");
    int first = 1;
    for (int b = 0; b < RPMEM_COUNT_NBUCKETS && at < len; ++b) {
      /* The table leaves out sizes of fewer than 1 call in 200 transactions. */
      if (!r->delta.hist[k][b] || (!csv && (double)r->delta.hist[k][b] / txs < 0.005)) continue;
      char st[32];
      size_text(st, sizeof(st), UINT64_C(1) << b);
      at += (size_t)snprintf(buf + at, len - at, "%s<=%s %.2f", first ? "" : (csv ? " " : ", "), st,
                             (double)r->delta.hist[k][b] / txs);
      first = 0;
    }
    at += (size_t)snprintf(buf + at, len - at, ")");
    if (at >= len) break;
  }
  if (!at) snprintf(buf, len, "none");
}

static const struct result *partner(const struct result *rs, size_t n, const struct result *r,
                                    int remote) {
  for (size_t i = 0; i < n; ++i)
    if (rs[i].op == r->op && rs[i].size == r->size && rs[i].threads == r->threads &&
        rs[i].cfg->remote == remote)
      return &rs[i];
  return NULL;
}

static void print_results(const struct options *o, const struct result *rs, size_t n) {
  if (o->csv)
    printf(
        "op,size,threads,config,tx_per_s,p50_us,p99_us,replica_over_local,txs,"
        "rpmem_calls_per_tx,error\n");
  else
    printf("%-7s %8s %7s %-10s %9s %9s %9s %9s  %s\n", "op", "value", "threads", "config", "tx/s",
           "p50 us", "p99 us", "rep/loc", "rpmem calls per transaction");
  for (size_t i = 0; i < n; ++i) {
    const struct result *r = &rs[i];
    char st[32], calls[2048], ratio[32] = "";
    size_text(st, sizeof(st), r->size);
    const char *err = failed(r);
    double tx_s = err ? 0 : median_of(r, offsetof(struct run, tx_s));
    double p50 = err ? 0 : median_of(r, offsetof(struct run, p50_us));
    double p99 = err ? 0 : median_of(r, offsetof(struct run, p99_us));
    const struct result *loc = r->cfg->remote ? partner(rs, n, r, 0) : NULL;
    if (loc && !err && !failed(loc)) {
      double lt = median_of(loc, offsetof(struct run, tx_s));
      if (lt > 0) snprintf(ratio, sizeof(ratio), "%.3g", tx_s / lt);
    }
    calls_text(calls, sizeof(calls), r, o->csv);
    if (o->csv) {
      printf("%s,%zu,%u,%s,%.1f,%.2f,%.2f,%s,%llu,%s,%s\n", op_names[r->op], r->size, r->threads,
             r->cfg->name, tx_s, p50, p99, ratio, (unsigned long long)r->txs, calls,
             err ? err : "");
    } else if (err) {
      printf("%-7s %8s %7u %-10s failed: %s\n", op_names[r->op], st, r->threads, r->cfg->name, err);
    } else {
      char rt[40] = "";
      if (*ratio) snprintf(rt, sizeof(rt), "%sx", ratio);
      printf("%-7s %8s %7u %-10s %9.0f %9.1f %9.1f %9s  %s\n", op_names[r->op], st, r->threads,
             r->cfg->name, tx_s, p50, p99, rt, calls);
    }
  }
}

/* --- main ------------------------------------------------------------------ */

static int open_pool(struct config *cfg) {
  cfg->pop = pmemobj_create(cfg->path, LAYOUT, 0, 0600);
  if (!cfg->pop) {
    fprintf(stderr, "rpmem-obj-bench: pmemobj_create %s: %s\n", cfg->path, pmemobj_errormsg());
    return -1;
  }
  return 0;
}

/* --verify SET: every entry of every map holds the value its seed makes. */
static int verify(const char *path) {
  PMEMobjpool *pop = pmemobj_open(path, LAYOUT);
  if (!pop) {
    fprintf(stderr, "rpmem-obj-bench: pmemobj_open %s: %s\n", path, pmemobj_errormsg());
    return 1;
  }
  struct root *r = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
  uint64_t entries = 0, bad = 0, maps = 0;
  static uint8_t want[1u << 20];
  for (unsigned t = 0; t < MAX_THREADS; ++t) {
    if (OID_IS_NULL(r->maps[t])) continue;
    ++maps;
    struct map *m = pmemobj_direct(r->maps[t]);
    for (unsigned b = 0; b < NBUCKETS; ++b) {
      for (PMEMoid o = m->buckets[b]; !OID_IS_NULL(o);) {
        struct entry *e = pmemobj_direct(o);
        ++entries;
        if (e->size > sizeof(want) || hash(e->key) % NBUCKETS != b) {
          ++bad;
        } else {
          fill_value(want, e->size, e->seed);
          if (memcmp(want, e->value, e->size) != 0) ++bad;
        }
        o = e->next;
      }
    }
  }
  pmemobj_close(pop);
  printf("verified %s: %llu maps, %llu entries, %llu bad\n", path, (unsigned long long)maps,
         (unsigned long long)entries, (unsigned long long)bad);
  return bad || !entries ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--verify")) return verify(argv[2]);
  struct options o;
  parse(argc, argv, &o);
  struct config cfgs[2];
  unsigned ncfg = 0;
  if (o.local_set) cfgs[ncfg++] = (struct config){"local-only", o.local_set, NULL, 0};
  if (o.replica_set) cfgs[ncfg++] = (struct config){"replica", o.replica_set, NULL, 1};
  unsigned max_threads = 0;
  for (unsigned i = 0; i < o.nthreads; ++i)
    if (o.threads[i] > max_threads) max_threads = o.threads[i];

  for (unsigned c = 0; c < ncfg; ++c) {
    double t = now_s();
    if (open_pool(&cfgs[c]) || populate(&cfgs[c], &o, max_threads)) {
      fprintf(stderr, "rpmem-obj-bench: cannot set up %s: %s\n", cfgs[c].path, pmemobj_errormsg());
      return 1;
    }
    fprintf(stderr, "rpmem-obj-bench: %s (%s) created and filled in %.2f s\n", cfgs[c].name,
            cfgs[c].path, now_s() - t);
  }
  /* libpmemobj dlopens librpmem.so.1 for the replica; if that is the
   * counting one, its counters are there. */
  void *h = dlopen("librpmem.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h) *(void **)&snapshot_fn = dlsym(h, "rpmem_count_snapshot");

  size_t ncases = (size_t)o.nthreads * o.nsizes * o.nops * ncfg;
  struct result *rs = calloc(ncases, sizeof(*rs));
  size_t n = 0;
  for (unsigned ti = 0; ti < o.nthreads; ++ti)
    for (unsigned si = 0; si < o.nsizes; ++si)
      for (unsigned oi = 0; oi < o.nops; ++oi)
        for (unsigned c = 0; c < ncfg; ++c)
          rs[n++] = (struct result){
              .op = o.ops[oi], .size = o.sizes[si], .threads = o.threads[ti], .cfg = &cfgs[c]};
  /* Interleaved: run k of every case, then run k+1; the two pool sets
   * alternate case by case. */
  for (unsigned rep = 0; rep < o.repeat; ++rep)
    for (size_t i = 0; i < n; ++i)
      if (!failed(&rs[i])) run_case(&o, &rs[i]);

  if (!o.csv) {
    struct utsname u;
    uname(&u);
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    printf("# rpmem-obj-bench");
    for (int i = 1; i < argc; ++i) printf(" %s", argv[i]);
    printf("\n# machine  %ld CPUs, %s %s\n# date     %s\n", sysconf(_SC_NPROCESSORS_ONLN),
           u.sysname, u.release, date);
    if (snapshot_fn) {
      struct rpmem_count c;
      snapshot_fn(&c);
      printf("# librpmem %s (counted); libpmemobj asked for %u lanes, granted %u\n", c.real_lib,
             c.lanes_asked, c.lanes_granted);
    } else if (o.replica_set) {
      printf("# librpmem not counted (the counting librpmem.so.1 is not loaded)\n");
    }
    printf(
        "# %u run(s) of %.2f s per case, medians; rep/loc: replica tx/s over "
        "local-only tx/s\n",
        o.repeat, o.duration_s);
  }
  print_results(&o, rs, n);
  int rc = 0;
  for (size_t i = 0; i < n; ++i)
    if (failed(&rs[i])) rc = 1;
  for (unsigned c = 0; c < ncfg; ++c) pmemobj_close(cfgs[c].pop);
  for (unsigned t = 0; t < MAX_THREADS; ++t) free(workers[t].lat);
  free(rs);
  return rc;
}
