/* Open MPI peer of Galaxy's collectives benchmark (`galaxy bench coll-live`; spec/ANCHORS.md,
 * "Collectives on one host"). It times MPI_Barrier, an 8-byte MPI_Bcast and an 8-byte
 * MPI_Allreduce (one int64) exactly as bench/peers/glex_coll.c times Galaxy's, the OSU way: a
 * warm-up, then many iterations timed on every rank (barriers as one loop; each broadcast and
 * allreduce on its own, an untimed barrier after it), the average per operation, the maximum
 * over ranks reported. Broadcast data and allreduce sums are
 * checked on every iteration; a wrong value aborts with exit status 1. The "cpu" test posts
 * MPI_Ibarrier and waits in MPI_Wait, reading CLOCK_PROCESS_CPUTIME_ID around the loop, as
 * glex_coll does with glex_ibarrier.
 *
 * Rank 0 prints one JSON line, in glex_coll's shape with "impl":"openmpi".
 *
 *   mpirun -np N mpi_coll [--tests barrier,bcast,allreduce,cpu] [--iters N | --target-ms T]
 *                         [--warmup N] [--cpu-iters N] */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* Error ids of this program (E9690-E9699) are kept apart from src/'s (scripts/check-error-ids). */
static int g_rank, g_size;

struct options {
  int barrier, bcast, allreduce, cpu;
  long iters, target_ms, warmup, cpu_iters;
};

struct result {
  long iters;
  double us_max, us_avg, us_min;
};

static void usage(const char* why) {
  if (g_rank == 0)
    fprintf(stderr,
            "mpi_coll: E9690 %s\nusage: mpirun -np N mpi_coll [--tests barrier,bcast,allreduce,"
            "cpu] [--iters N | --target-ms T] [--warmup N] [--cpu-iters N]\n",
            why);
  MPI_Abort(MPI_COMM_WORLD, 2);
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

static struct options parse(int argc, char** argv) {
  struct options o = {1, 1, 1, 0, 0, 300, 50, 2000};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    char why[160];
    if (!v) {
      snprintf(why, sizeof why, "'%s' is not an option or lacks its value", a);
      usage(why);
    }
    ++i;
    if (strcmp(a, "--tests") == 0) {
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      o.barrier = o.bcast = o.allreduce = o.cpu = 0;
      for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int* pick = strcmp(t, "barrier") == 0     ? &o.barrier
                    : strcmp(t, "bcast") == 0     ? &o.bcast
                    : strcmp(t, "allreduce") == 0 ? &o.allreduce
                    : strcmp(t, "cpu") == 0       ? &o.cpu
                                                  : NULL;
        if (!pick) {
          snprintf(why, sizeof why, "--tests: '%s' is not a test (barrier, bcast, allreduce, cpu)",
                   t);
          usage(why);
        }
        *pick = 1;
      }
    } else if (strcmp(a, "--iters") == 0) {
      o.iters = number(a, v, 0, 100000000);
    } else if (strcmp(a, "--target-ms") == 0) {
      o.target_ms = number(a, v, 1, 600000);
    } else if (strcmp(a, "--warmup") == 0) {
      o.warmup = number(a, v, 1, 1000000);
    } else if (strcmp(a, "--cpu-iters") == 0) {
      o.cpu_iters = number(a, v, 1, 100000000);
    } else {
      snprintf(why, sizeof why, "'%s' is not an option", a);
      usage(why);
    }
  }
  return o;
}

static double cpu_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double reduce_double(double v, MPI_Op op) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
  return out;
}

static struct result spread(long iters, double us) {
  struct result r;
  r.iters = iters;
  r.us_max = reduce_double(us, MPI_MAX);
  r.us_avg = reduce_double(us, MPI_SUM) / g_size;
  r.us_min = reduce_double(us, MPI_MIN);
  return r;
}

enum test { kBarrier, kBcast, kAllreduce };

/* The same values as glex_coll.c: each iteration's differ from the one before. */
static int64_t bcast_value(long i) {
  return (int64_t)0x5a17c0de00000000LL + i;
}
static int64_t reduce_in(int rank, long i) {
  return (int64_t)rank * 1000003 + i;
}
static int64_t reduce_sum(long i) {
  return (int64_t)g_size * (g_size - 1) / 2 * 1000003 + (int64_t)g_size * i;
}

static void one(enum test t, long i) {
  if (t == kBarrier) {
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (t == kBcast) {
    int64_t v = g_rank == 0 ? bcast_value(i) : -1;
    MPI_Bcast(&v, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (v != bcast_value(i)) {
      fprintf(stderr, "mpi_coll: E9691 rank %d: broadcast %ld delivered %#llx, root sent %#llx\n",
              g_rank, i, (unsigned long long)v, (unsigned long long)bcast_value(i));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } else {
    int64_t in = reduce_in(g_rank, i), out = -1;
    MPI_Allreduce(&in, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (out != reduce_sum(i)) {
      fprintf(stderr, "mpi_coll: E9692 rank %d: allreduce %ld summed to %lld, expected %lld\n",
              g_rank, i, (long long)out, (long long)reduce_sum(i));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
}

/* As glex_coll.c and the OSU benchmarks: barriers as one loop; each broadcast and allreduce
 * timed on its own with an untimed barrier after it. */
static double timed(enum test t, long first, long n) {
  double sum = 0;
  if (t == kBarrier) {
    const double t0 = MPI_Wtime();
    for (long k = 0; k < n; ++k) one(t, first + k);
    return (MPI_Wtime() - t0) * 1e6 / (double)n;
  }
  for (long k = 0; k < n; ++k) {
    const double t0 = MPI_Wtime();
    one(t, first + k);
    sum += MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
  }
  return sum * 1e6 / (double)n;
}

static struct result measure(enum test t, const struct options* o) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  (void)timed(t, 0, o->warmup);
  long iters = o->iters;
  if (iters == 0) {
    const double per = reduce_double((MPI_Wtime() - t0) * 1e6 / (double)o->warmup, MPI_MAX);
    double n = (double)o->target_ms * 1000.0 / (per > 0 ? per : 1);
    iters = n < 20 ? 20 : n > 1000000 ? 1000000 : (long)n;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return spread(iters, timed(t, o->warmup, iters));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  struct options o = parse(argc, argv);
  struct result res[3];
  const int want[3] = {o.barrier, o.bcast, o.allreduce};
  for (int t = 0; t < 3; ++t)
    if (want[t]) res[t] = measure((enum test)t, &o);
  double wall = 0, cpu = 0, switches = 0;
  if (o.cpu) {
    MPI_Barrier(MPI_COMM_WORLD);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    const double c0 = cpu_us(), t0 = MPI_Wtime();
    for (long i = 0; i < o.cpu_iters; ++i) {
      MPI_Request rq;
      MPI_Ibarrier(MPI_COMM_WORLD, &rq);
      MPI_Wait(&rq, MPI_STATUS_IGNORE);
    }
    wall = (MPI_Wtime() - t0) * 1e6 / (double)o.cpu_iters;
    cpu = (cpu_us() - c0) / (double)o.cpu_iters;
    getrusage(RUSAGE_SELF, &ru1);
    switches = (double)((ru1.ru_nvcsw - ru0.ru_nvcsw) + (ru1.ru_nivcsw - ru0.ru_nivcsw)) /
               (double)o.cpu_iters;
  }
  double cpu_max = 0, cpu_avg = 0, wall_max = 0, switches_avg = 0;
  if (o.cpu) {
    wall_max = reduce_double(wall, MPI_MAX);
    cpu_max = reduce_double(cpu, MPI_MAX);
    cpu_avg = reduce_double(cpu, MPI_SUM) / g_size;
    switches_avg = reduce_double(switches, MPI_SUM) / g_size;
  }
  if (g_rank == 0) {
    printf(
        "{\"impl\":\"openmpi\",\"np\":%d,"
        "\"timing\":\"OSU: mean per operation, max over ranks\","
        "\"tests\":{",
        g_size);
    static const char* const names[3] = {"barrier", "bcast", "allreduce"};
    static const char* const extra[3] = {"", ",\"bytes\":8", ",\"bytes\":8,\"type\":\"int64\""};
    int first = 1;
    for (int t = 0; t < 3; ++t) {
      if (!want[t]) continue;
      printf("%s\"%s\":{\"iters\":%ld,\"us\":%.4f,\"us_avg\":%.4f,\"us_min\":%.4f%s}",
             first ? "" : ",", names[t], res[t].iters, res[t].us_max, res[t].us_avg, res[t].us_min,
             extra[t]);
      first = 0;
    }
    if (o.cpu)
      printf(
          "%s\"cpu\":{\"how\":\"MPI_Ibarrier + MPI_Wait\",\"iters\":%ld,\"wall_us\":%.4f,"
          "\"cpu_us\":%.4f,\"cpu_us_avg\":%.4f,\"context_switches\":%.3f}",
          first ? "" : ",", o.cpu_iters, wall_max, cpu_max, cpu_avg, switches_avg);
    printf("}}\n");
    fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
