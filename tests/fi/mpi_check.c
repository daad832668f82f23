/* An MPI program whose results do not depend on the transport: run over Open MPI's own
 * transports and over Galaxy's libfabric provider, its "result" lines must be the same.
 *
 *   mpirun -n 2 mpi_check          ping-pong of verified messages (0 B .. 4 MiB), non-blocking
 *                                  sends matched in order, any-source and tag-selective receives,
 *                                  probe, a synchronous send, broadcast, allreduce (int64 sum,
 *                                  double min and max), reduce, allgather, alltoall
 *   mpirun -n 2 mpi_check die      rank 1 exits mid-job without finalising: rank 0's receive
 *                                  must end (the job fails), not hang
 *
 * Each result line carries a checksum of the bytes received and the values computed. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t fnv(const void* p, size_t n, uint64_t h) {
  const unsigned char* b = p;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static void fill(char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = (char)((i * 31 + seed * 7) & 0xff);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_check runs on 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int peer = 1 - rank;
  const int die = argc > 1 && strcmp(argv[1], "die") == 0;
  enum { kMax = 4 << 20 };
  char* buf = malloc(kMax);
  char* want = malloc(kMax);
  int bad = 0;

  if (die) {
    char b = 0;
    if (rank == 0) {
      MPI_Send(&b, 1, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
      MPI_Recv(&b, 1, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never sent */
    } else {
      MPI_Recv(&b, 1, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      _exit(3);
    }
    MPI_Finalize();
    return 0;
  }

  /* Ping-pong: each size there and back, every byte checked. */
  static const int sizes[] = {0, 1, 8, 88, 89, 120, 1000, 4096, 4097, 65536, 1 << 20, kMax};
  uint64_t h = 14695981039346656037ull;
  for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    const int n = sizes[i];
    for (int it = 0; it < 3; ++it) {
      if (rank == 0) {
        fill(buf, (size_t)n, i + it);
        MPI_Send(buf, n, MPI_BYTE, peer, 100 + (int)i, MPI_COMM_WORLD);
        MPI_Status st;
        MPI_Recv(buf, n, MPI_BYTE, peer, 200 + (int)i, MPI_COMM_WORLD, &st);
        int got;
        MPI_Get_count(&st, MPI_BYTE, &got);
        fill(want, (size_t)n, i + it + 1);
        if (got != n || memcmp(buf, want, (size_t)n)) ++bad;
        h = fnv(buf, (size_t)n, h);
      } else {
        MPI_Recv(buf, n, MPI_BYTE, peer, 100 + (int)i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        fill(want, (size_t)n, i + it);
        if (memcmp(buf, want, (size_t)n)) ++bad;
        fill(buf, (size_t)n, i + it + 1);
        MPI_Send(buf, n, MPI_BYTE, peer, 200 + (int)i, MPI_COMM_WORLD);
      }
    }
  }
  if (rank == 0)
    printf("result pingpong sizes=%zu checksum=%016llx\n", sizeof sizes / sizeof sizes[0],
           (unsigned long long)h);

  /* Non-blocking sends of mixed sizes on one tag arrive in order. */
  enum { kMsgs = 40 };
  MPI_Request req[kMsgs];
  char* many = malloc((size_t)kMsgs * 20000);
  if (rank == 0) {
    for (int i = 0; i < kMsgs; ++i) {
      const int n = (i % 4 == 0) ? 20000 : 50 + i;
      fill(many + (size_t)i * 20000, (size_t)n, (unsigned)i);
      MPI_Isend(many + (size_t)i * 20000, n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req[i]);
    }
    MPI_Waitall(kMsgs, req, MPI_STATUSES_IGNORE);
  } else {
    uint64_t ho = 14695981039346656037ull;
    for (int i = 0; i < kMsgs; ++i) {
      const int n = (i % 4 == 0) ? 20000 : 50 + i;
      MPI_Status st;
      MPI_Recv(buf, 20000, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
      int got;
      MPI_Get_count(&st, MPI_BYTE, &got);
      fill(want, (size_t)n, (unsigned)i);
      if (got != n || st.MPI_SOURCE != peer || memcmp(buf, want, (size_t)n)) ++bad;
      ho = fnv(buf, (size_t)got, ho);
    }
    printf("result order messages=%d checksum=%016llx\n", kMsgs, (unsigned long long)ho);
  }
  free(many);

  /* Tag-selective receives out of sending order, a probe, a synchronous send. */
  if (rank == 0) {
    int a = 11, b = 22, c = 33;
    MPI_Send(&a, 1, MPI_INT, peer, 31, MPI_COMM_WORLD);
    MPI_Send(&b, 1, MPI_INT, peer, 32, MPI_COMM_WORLD);
    MPI_Ssend(&c, 1, MPI_INT, peer, 33, MPI_COMM_WORLD);
  } else {
    int a = 0, b = 0, c = 0, count = 0;
    MPI_Recv(&b, 1, MPI_INT, peer, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&a, 1, MPI_INT, peer, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Status st;
    MPI_Probe(peer, 33, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    MPI_Recv(&c, 1, MPI_INT, peer, 33, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("result tags a=%d b=%d c=%d probed=%d\n", a, b, c, count);
  }

  /* Collectives. */
  int64_t v[64], sum[64];
  double d[64], mn[64], mx[64];
  for (int i = 0; i < 64; ++i) {
    v[i] = (int64_t)(i + 1) * (rank + 3) * 1000003;
    d[i] = (i - 20) * 0.5 * (rank ? -1.25 : 2.5);
  }
  MPI_Allreduce(v, sum, 64, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(d, mn, 64, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(d, mx, 64, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  uint64_t hc = fnv(sum, sizeof sum, fnv(mn, sizeof mn, fnv(mx, sizeof mx, 1)));
  static int64_t big_in[100000], big_out[100000];
  for (int i = 0; i < 100000; ++i) big_in[i] = (int64_t)i * (rank + 1);
  MPI_Allreduce(big_in, big_out, 100000, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  hc = fnv(big_out, sizeof big_out, hc);
  int64_t red = 0, one = rank + 5;
  MPI_Reduce(&one, &red, 1, MPI_INT64_T, MPI_PROD, 0, MPI_COMM_WORLD);
  if (rank == 0) fill(buf, 300000, 5);
  MPI_Bcast(buf, 300000, MPI_BYTE, 0, MPI_COMM_WORLD);
  hc = fnv(buf, 300000, hc);
  int64_t mine[3] = {rank, rank * 10, rank * 100}, all[6];
  MPI_Allgather(mine, 3, MPI_INT64_T, all, 3, MPI_INT64_T, MPI_COMM_WORLD);
  int64_t out[2] = {rank * 2, rank * 2 + 1}, in[2];
  MPI_Alltoall(out, 1, MPI_INT64_T, in, 1, MPI_INT64_T, MPI_COMM_WORLD);
  hc = fnv(all, sizeof all, fnv(in, sizeof in, hc));
  if (rank == 0)
    printf("result collectives sum0=%lld sum63=%lld min0=%g max63=%g prod=%lld checksum=%016llx\n",
           (long long)sum[0], (long long)sum[63], mn[0], mx[63], (long long)red,
           (unsigned long long)hc);

  int bad_all = 0;
  MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("result damaged=%d\n", bad_all);
  free(buf);
  free(want);
  MPI_Finalize();
  return bad_all ? 1 : 0;
}
