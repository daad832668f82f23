/* Open MPI peer for Galaxy's communication benchmarks (spec/ANCHORS.md, "Communication on one
 * host"). Two ranks; rank 0 measures and prints one parseable line:
 *   mpi_pingpong mode=<mode> bytes=<n> iters=<n> lat_us=<one-way us> bw_mbps=<10^6 B/s>
 *     rate_mmps=<10^6 msg/s>
 * Modes: lat (MPI_Send/MPI_Recv ping-pong, half round trip), put_lat/get_lat (MPI_Put/MPI_Get +
 * MPI_Win_flush: completion time of one operation), put_bw/get_bw (window of kWindow operations,
 * then flush), rate (window of kWindow MPI_Isend, then a 1-byte ack). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kWindow = 64 };

static double run(const char* mode, char* buf, MPI_Win win, int rank, long bytes, long iters) {
  const int peer = 1 - rank;
  int n = (int)bytes;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  if (strcmp(mode, "lat") == 0) {
    for (long i = 0; i < iters; ++i) {
      if (rank == 0) {
        MPI_Send(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
      }
    }
  } else if (strcmp(mode, "rate") == 0) {
    MPI_Request req[kWindow];
    for (long i = 0; i < iters; i += kWindow) {
      for (int w = 0; w < kWindow; ++w) {
        char* b = buf + (size_t)w * (size_t)bytes;
        if (rank == 0)
          MPI_Isend(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[w]);
        else
          MPI_Irecv(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[w]);
      }
      MPI_Waitall(kWindow, req, MPI_STATUSES_IGNORE);
      if (rank == 0)
        MPI_Recv(buf, 1, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else
        MPI_Send(buf, 1, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
    }
  } else if (rank == 0) {
    const int put = strncmp(mode, "put", 3) == 0;
    const int window = strstr(mode, "_bw") ? kWindow : 1;
    for (long i = 0; i < iters; i += window) {
      for (int w = 0; w < window; ++w) {
        if (put)
          MPI_Put(buf, n, MPI_BYTE, peer, 0, n, MPI_BYTE, win);
        else
          MPI_Get(buf, n, MPI_BYTE, peer, 0, n, MPI_BYTE, win);
      }
      MPI_Win_flush(peer, win);
    }
  }
  double t = MPI_Wtime() - t0;
  MPI_Barrier(MPI_COMM_WORLD);
  return t;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 4 || size != 2) {
    if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 mpi_pingpong <mode> <bytes> <iters>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char* mode = argv[1];
  const long bytes = atol(argv[2]);
  long iters = atol(argv[3]);
  if (bytes <= 0 || iters <= 0) MPI_Abort(MPI_COMM_WORLD, 2);
  if (strstr(mode, "_bw") || strcmp(mode, "rate") == 0) {
    iters = (iters + kWindow - 1) / kWindow * kWindow;
  }
  /* Concurrent receives need distinct buffers; bandwidth windows reuse one target buffer. */
  const size_t alloc = (size_t)bytes * (strcmp(mode, "rate") == 0 ? kWindow : 1);
  char* buf = NULL;
  MPI_Win win;
  /* MPI_Win_allocate lets Open MPI pick its shared-memory one-sided component (osc sm). */
  MPI_Win_allocate((MPI_Aint)alloc, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &buf, &win);
  memset(buf, rank, alloc);
  MPI_Win_lock_all(0, win);
  run(mode, buf, win, rank, bytes, iters / 10 + 1); /* warm-up */
  double t = run(mode, buf, win, rank, bytes, iters);
  MPI_Win_unlock_all(win);
  if (rank == 0) {
    /* A ping-pong iteration carries two messages; its one-way latency is half of it. */
    const double msgs = (double)iters * (strcmp(mode, "lat") == 0 ? 2.0 : 1.0);
    printf("mpi_pingpong mode=%s bytes=%ld iters=%ld lat_us=%.4f bw_mbps=%.2f rate_mmps=%.4f\n",
           mode, bytes, iters, t * 1e6 / msgs, (double)bytes * msgs / t / 1e6, msgs / t / 1e6);
  }
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}
