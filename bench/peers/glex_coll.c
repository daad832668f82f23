/* Galaxy's side of the collectives benchmark (`galaxy bench coll-live`; bench/peers/mpi_coll.c is
 * Open MPI's): N processes bootstrap with glex_bootstrap, form a group with glex_coll_create and
 * time glex_barrier, an 8-byte glex_bcast and an 8-byte glex_allreduce (one int64) the way the OSU
 * micro-benchmarks do: a warm-up, then many iterations timed on every member (barriers as one
 * loop; each broadcast and allreduce on its own, an untimed barrier after it), the average per
 * operation, the maximum over members reported. Broadcast data and
 * allreduce sums are checked on every iteration; a wrong value ends the run with exit status 1.
 *
 * The "cpu" test measures the host CPU a member spends while its NIC runs a barrier: it posts
 * glex_ibarrier and blocks in glex_wait_cq (which polls for $GLEX_SPIN_US, then sleeps), and
 * reads CLOCK_PROCESS_CPUTIME_ID around the loop. With GLEX_COLL_P2P (--p2p) the hosts drive the
 * trees and have no non-blocking form: the test times glex_barrier instead.
 *
 * Rank 0 prints one JSON line (spin_us null: $GLEX_SPIN_US unset, libglex's default):
 *   {"impl":"galaxy","mode":"offloaded","np":4,"degree":4,"spin_us":50,"tests":{"barrier":
 *    {"iters":..,"us":<max over ranks>,"us_avg":..,"us_min":..},"bcast":{..,"bytes":8},...}}
 *
 *   glex_coll [--p2p] [--tests barrier,bcast,allreduce,cpu] [--iters N | --target-ms T]
 *             [--warmup N] [--cpu-iters N] [--degree D] [--timeout-ms T]
 *
 * The environment is libglex's (docs/glex.md): GLEX_FABRIC, GLEX_HOST, GLEX_NIC, GLEX_RANK,
 * GLEX_SIZE, GLEX_RENDEZVOUS, GLEX_SPIN_US. Times come from glex_time_ps: simulated time on a
 * simulated fabric, the monotonic clock on a live one. */
#define _POSIX_C_SOURCE 200809L
#include <glex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* Error ids of this program (E9680-E9689) are kept apart from src/'s (scripts/check-error-ids). */
#define CHECK(call)                                                            \
  do {                                                                         \
    glex_ret_t r_ = (call);                                                    \
    if (r_ != GLEX_SUCCESS) {                                                  \
      fprintf(stderr, "glex_coll: E9680 rank %u: %s: %s: %s\n", g_rank, #call, \
              glex_error_string(r_), glex_last_error());                       \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static uint32_t g_rank;

struct options {
  int p2p;
  int barrier, bcast, allreduce, cpu;
  long iters;     /* 0: calibrated from the warm-up to last about target_ms */
  long target_ms; /* per test */
  long warmup;
  long cpu_iters;
  uint32_t degree;
  int32_t timeout_ms;
};

struct result {
  long iters;
  double us_max, us_avg, us_min;
};

static void usage(const char* why) {
  fprintf(stderr,
          "glex_coll: E9681 %s\nusage: glex_coll [--p2p] [--tests barrier,bcast,allreduce,cpu] "
          "[--iters N | --target-ms T] [--warmup N] [--cpu-iters N] [--degree D] "
          "[--timeout-ms T]\n",
          why);
  exit(2);
}

static long number(const char* flag, const char* text, long lo, long hi) {
  char* end = NULL;
  long v = text ? strtol(text, &end, 10) : 0;
  if (!text || *text == '\0' || *end != '\0' || v < lo || v > hi) {
    char why[160];
    snprintf(why, sizeof why, "%s = '%s': expected an integer in [%ld, %ld]", flag,
             text ? text : "", lo, hi);
    usage(why);
  }
  return v;
}

static void parse_tests(struct options* o, const char* list) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", list);
  o->barrier = o->bcast = o->allreduce = o->cpu = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (strcmp(t, "barrier") == 0) {
      o->barrier = 1;
    } else if (strcmp(t, "bcast") == 0) {
      o->bcast = 1;
    } else if (strcmp(t, "allreduce") == 0) {
      o->allreduce = 1;
    } else if (strcmp(t, "cpu") == 0) {
      o->cpu = 1;
    } else {
      char why[160];
      snprintf(why, sizeof why, "--tests: '%s' is not a test (barrier, bcast, allreduce, cpu)", t);
      usage(why);
    }
  }
}

static struct options parse(int argc, char** argv) {
  struct options o = {0, 1, 1, 1, 0, 0, 300, 50, 2000, 0, 30000};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--p2p") == 0) {
      o.p2p = 1;
      continue;
    }
    if (!v) {
      char why[160];
      snprintf(why, sizeof why, "'%s' is not an option or lacks its value", a);
      usage(why);
    }
    ++i;
    if (strcmp(a, "--tests") == 0)
      parse_tests(&o, v);
    else if (strcmp(a, "--iters") == 0)
      o.iters = number(a, v, 0, 100000000);
    else if (strcmp(a, "--target-ms") == 0)
      o.target_ms = number(a, v, 1, 600000);
    else if (strcmp(a, "--warmup") == 0)
      o.warmup = number(a, v, 1, 1000000);
    else if (strcmp(a, "--cpu-iters") == 0)
      o.cpu_iters = number(a, v, 1, 100000000);
    else if (strcmp(a, "--degree") == 0)
      o.degree = (uint32_t)number(a, v, 0, 64);
    else if (strcmp(a, "--timeout-ms") == 0)
      o.timeout_ms = (int32_t)number(a, v, 1, 3600000);
    else {
      char why[160];
      snprintf(why, sizeof why, "'%s' is not an option", a);
      usage(why);
    }
  }
  return o;
}

static glex_device_handle_t g_dev;
static glex_coll_handle_t g_group;
static uint32_t g_size;

static double now_us(void) {
  return (double)glex_time_ps(g_dev) / 1e6;
}

static double cpu_us(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double allreduce_double(double v, uint32_t op) {
  double out = 0;
  CHECK(glex_allreduce(g_group, &v, &out, 1, GLEX_TYPE_DOUBLE, op));
  return out;
}

/* What every member knows of a figure: the maximum, the mean and the minimum over members. */
static struct result spread(long iters, double us) {
  struct result r;
  r.iters = iters;
  r.us_max = allreduce_double(us, GLEX_MAX);
  r.us_avg = allreduce_double(us, GLEX_SUM) / g_size;
  r.us_min = allreduce_double(us, GLEX_MIN);
  return r;
}

enum test { kBarrier, kBcast, kAllreduce };

/* The broadcast's 8 bytes of iteration i and the allreduce's expected sum: every value differs
 * from the one before, so a result left over from an earlier iteration is caught. */
static int64_t bcast_value(long i) {
  return (int64_t)0x5a17c0de00000000LL + i;
}
static int64_t reduce_in(uint32_t rank, long i) {
  return (int64_t)rank * 1000003 + i;
}
static int64_t reduce_sum(long i) {
  return (int64_t)g_size * (g_size - 1) / 2 * 1000003 + (int64_t)g_size * i;
}

/* Runs one operation of iteration i and checks its result. */
static void one(enum test t, long i) {
  if (t == kBarrier) {
    CHECK(glex_barrier(g_group));
  } else if (t == kBcast) {
    int64_t v = g_rank == 0 ? bcast_value(i) : -1;
    CHECK(glex_bcast(g_group, &v, sizeof v, 0));
    if (v != bcast_value(i)) {
      fprintf(stderr, "glex_coll: E9682 rank %u: broadcast %ld delivered %#llx, root sent %#llx\n",
              g_rank, i, (unsigned long long)v, (unsigned long long)bcast_value(i));
      exit(1);
    }
  } else {
    int64_t in = reduce_in(g_rank, i), out = -1;
    CHECK(glex_allreduce(g_group, &in, &out, 1, GLEX_TYPE_INT64, GLEX_SUM));
    if (out != reduce_sum(i)) {
      fprintf(stderr, "glex_coll: E9683 rank %u: allreduce %ld summed to %lld, expected %lld\n",
              g_rank, i, (long long)out, (long long)reduce_sum(i));
      exit(1);
    }
  }
}

/* As the OSU benchmarks: barriers are timed as one loop; a broadcast or an allreduce is timed
 * one at a time with an untimed barrier after each, so that no member runs ahead into the next
 * (a root would otherwise pipeline broadcasts and time its sends, not the latency). */
static double timed(enum test t, long first, long n) {
  double sum = 0;
  if (t == kBarrier) {
    const double t0 = now_us();
    for (long k = 0; k < n; ++k) one(t, first + k);
    return (now_us() - t0) / (double)n;
  }
  for (long k = 0; k < n; ++k) {
    const double t0 = now_us();
    one(t, first + k);
    sum += now_us() - t0;
    CHECK(glex_barrier(g_group));
  }
  return sum / (double)n;
}

static struct result measure(enum test t, const struct options* o) {
  CHECK(glex_barrier(g_group));
  const double t0 = now_us();
  (void)timed(t, 0, o->warmup);
  long iters = o->iters;
  if (iters == 0) {
    /* Every member computes the same count from the same maximum. */
    const double per = allreduce_double((now_us() - t0) / (double)o->warmup, GLEX_MAX);
    double n = (double)o->target_ms * 1000.0 / (per > 0 ? per : 1);
    iters = n < 20 ? 20 : n > 1000000 ? 1000000 : (long)n;
  }
  CHECK(glex_barrier(g_group));
  return spread(iters, timed(t, o->warmup, iters));
}

struct cpu_result {
  long iters;
  double wall_us, cpu_us_max, cpu_us_avg, post_us_max, post_cpu_us_max, switches_avg;
  double sleeps_avg;     /* voluntary context switches: the waits that slept */
  double cq_entries_avg; /* CQ entries taken per barrier */
};

/* Host CPU per barrier: posting the offloaded barrier, then sleeping in glex_wait_cq. */
static struct cpu_result measure_cpu(const struct options* o, glex_ep_handle_t ep) {
  struct cpu_result r;
  long iters = o->cpu_iters;
  double post = 0, post_cpu = 0, entries = 0;
  CHECK(glex_barrier(g_group));
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  const double c0 = cpu_us(CLOCK_PROCESS_CPUTIME_ID), t0 = now_us();
  for (long i = 0; i < iters; ++i) {
    if (o->p2p) {
      CHECK(glex_barrier(g_group));
      continue;
    }
    const uint64_t cookie = 0x6270000000ULL + (uint64_t)i;
    /* Posting's own CPU: this thread's clock, a system call on each side of the call. */
    const double p0 = now_us(), pc0 = cpu_us(CLOCK_THREAD_CPUTIME_ID);
    CHECK(glex_ibarrier(g_group, cookie));
    post_cpu += cpu_us(CLOCK_THREAD_CPUTIME_ID) - pc0;
    post += now_us() - p0;
    for (;;) {
      struct glex_cq_entry e;
      CHECK(glex_wait_cq(ep, o->timeout_ms, &e));
      ++entries;
      if (e.status != GLEX_SUCCESS) {
        fprintf(stderr, "glex_coll: E9684 rank %u: glex_ibarrier %ld failed: %s (E%u %s)\n", g_rank,
                i, glex_error_string(e.status), e.error_id, e.reason);
        exit(1);
      }
      if (e.op == GLEX_OP_COLL && e.cookie == cookie) break;
    }
  }
  const double wall = (now_us() - t0) / (double)iters,
               cpu = (cpu_us(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double)iters;
  getrusage(RUSAGE_SELF, &ru1);
  const double switches =
      (double)((ru1.ru_nvcsw - ru0.ru_nvcsw) + (ru1.ru_nivcsw - ru0.ru_nivcsw)) / (double)iters;
  r.iters = iters;
  r.wall_us = allreduce_double(wall, GLEX_MAX);
  r.cpu_us_max = allreduce_double(cpu, GLEX_MAX);
  r.cpu_us_avg = allreduce_double(cpu, GLEX_SUM) / g_size;
  r.post_us_max = allreduce_double(post / (double)iters, GLEX_MAX);
  r.post_cpu_us_max = allreduce_double(post_cpu / (double)iters, GLEX_MAX);
  r.switches_avg = allreduce_double(switches, GLEX_SUM) / g_size;
  r.sleeps_avg =
      allreduce_double((double)(ru1.ru_nvcsw - ru0.ru_nvcsw) / (double)iters, GLEX_SUM) / g_size;
  r.cq_entries_avg = allreduce_double(entries / (double)iters, GLEX_SUM) / g_size;
  return r;
}

static void print_result(const char* name, const struct result* r, int* first) {
  printf("%s\"%s\":{\"iters\":%ld,\"us\":%.4f,\"us_avg\":%.4f,\"us_min\":%.4f%s}",
         *first ? "" : ",", name, r->iters, r->us_max, r->us_avg, r->us_min,
         strcmp(name, "barrier") == 0 ? ""
         : strcmp(name, "bcast") == 0 ? ",\"bytes\":8"
                                      : ",\"bytes\":8,\"type\":\"int64\"");
  *first = 0;
}

int main(int argc, char** argv) {
  /* Errors before the bootstrap name the rank the launcher gave. */
  const char* r0 = getenv("GLEX_RANK");
  g_rank = r0 ? (uint32_t)strtoul(r0, NULL, 10) : 0;
  struct options o = parse(argc, argv);
  glex_ep_handle_t ep;
  struct glex_ep_attr attr = {-1};
  glex_ep_addr_t* addrs;
  CHECK(glex_open_device(NULL, &g_dev));
  CHECK(glex_create_ep(g_dev, &attr, &ep));
  CHECK(glex_bootstrap(ep, &g_rank, &g_size, &addrs));
  struct glex_coll_attr ca = {0};
  ca.flags = o.p2p ? GLEX_COLL_P2P : 0;
  ca.degree = o.degree;
  ca.timeout_ms = o.timeout_ms;
  CHECK(glex_coll_create(ep, g_rank, g_size, addrs, &ca, &g_group));
  free(addrs);

  struct result res[3];
  const int want[3] = {o.barrier, o.bcast, o.allreduce};
  for (int t = 0; t < 3; ++t)
    if (want[t]) res[t] = measure((enum test)t, &o);
  struct cpu_result cpu = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  if (o.cpu) cpu = measure_cpu(&o, ep);
  /* Nobody leaves while another still needs it in a collective. */
  CHECK(glex_barrier(g_group));

  if (g_rank == 0) {
    const char* spin = getenv("GLEX_SPIN_US");
    printf(
        "{\"impl\":\"galaxy\",\"mode\":\"%s\",\"np\":%u,\"degree\":%u,\"spin_us\":%s,"
        "\"timing\":\"OSU: mean per operation, max over ranks\","
        "\"tests\":{",
        o.p2p ? "host-driven" : "offloaded", g_size, glex_coll_degree(g_group),
        spin && *spin ? spin : "null");
    static const char* const names[3] = {"barrier", "bcast", "allreduce"};
    int first = 1;
    for (int t = 0; t < 3; ++t)
      if (want[t]) print_result(names[t], &res[t], &first);
    if (o.cpu)
      printf(
          "%s\"cpu\":{\"how\":\"%s\",\"iters\":%ld,\"wall_us\":%.4f,\"cpu_us\":%.4f,"
          "\"cpu_us_avg\":%.4f,\"post_us\":%.4f,\"post_cpu_us\":%.4f,"
          "\"context_switches\":%.3f,\"sleeps\":%.3f,\"cq_entries\":%.3f}",
          first ? "" : ",", o.p2p ? "glex_barrier" : "glex_ibarrier + glex_wait_cq", cpu.iters,
          cpu.wall_us, cpu.cpu_us_max, cpu.cpu_us_avg, cpu.post_us_max, cpu.post_cpu_us_max,
          cpu.switches_avg, cpu.sleeps_avg, cpu.cq_entries_avg);
    printf("}}\n");
    fflush(stdout);
  }
  CHECK(glex_coll_destroy(g_group));
  CHECK(glex_destroy_ep(ep));
  CHECK(glex_close_device(g_dev));
  return 0;
}
