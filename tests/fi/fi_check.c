/* Galaxy's libfabric provider as an application meets it: a C program against libfabric's API
 * alone, loading the provider through FI_PROVIDER_PATH, run as two processes (ranks 0 and 1)
 * that exchange their endpoint names through files in a directory. Each check prints
 * "ok <name>" or "FAIL <name>: why"; the exit status is the number of failures.
 *
 *   fi_check <rank 0|1> <rendezvous directory> [small]
 *
 * `small` leaves out the two largest sizes (a simulated fabric under the sanitizers).
 *
 * Checks: message sizes across the MP train and the rendezvous (0 B .. 1 MiB, expected and
 * unexpected), matching order per source across both protocols, tag masks, truncation (FI_ETRUNC
 * with the overflow length), cancel (FI_ECANCELED), peek and claim (FI_ENOMSG when nothing
 * matches), untagged messages with remote CQ data, RMA write/read/writedata on a registered
 * region, a wrong key refused with nothing written, an unknown address refused, counters. */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct fid_fabric* fabric;
static struct fid_domain* domain;
static struct fid_ep* ep;
static struct fid_cq* cq;
static struct fid_av* av;
static struct fid_cntr* send_cntr;
static fi_addr_t peer, self;
static int rank, failures, small;
/* How long any one completion may take (a simulated fabric under the sanitizers is slow). */
static const double kDeadline = 60;
static uint64_t sends_done;

#define CTRL_TAG 0xC000000000000000ull

static void fail(const char* check, const char* why, long a, long b) {
  printf("FAIL %s: %s (%ld, %ld)\n", check, why, a, b);
  ++failures;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Waits for the completion of `ctx` (any other completion is an error); returns it, or an error
 * entry's err negated in *err. */
static int wait_for(void* ctx, struct fi_cq_tagged_entry* out, struct fi_cq_err_entry* errout) {
  const double deadline = now_s() + kDeadline;
  for (;;) {
    struct fi_cq_tagged_entry e;
    ssize_t n = fi_cq_read(cq, &e, 1);
    if (n == 1) {
      if (e.flags & FI_SEND) ++sends_done;
      if (e.op_context != ctx) {
        printf("unexpected completion of %p (flags %#llx) while waiting for %p\n", e.op_context,
               (unsigned long long)e.flags, ctx);
        ++failures;
        continue;
      }
      if (out) *out = e;
      return 0;
    }
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err;
      memset(&err, 0, sizeof err);
      fi_cq_readerr(cq, &err, 0);
      if (errout) *errout = err;
      if (err.op_context != ctx) {
        printf("error completion of %p (err %d) while waiting for %p\n", err.op_context, err.err,
               ctx);
        ++failures;
        continue;
      }
      return -err.err;
    }
    if (n != -FI_EAGAIN) return (int)n;
    if (now_s() > deadline) return -FI_ETIMEDOUT;
  }
}

static void pattern(char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = (char)((i * 7 + seed) & 0xff);
}
static int check_pattern(const char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != (char)((i * 7 + seed) & 0xff)) return (int)i;
  return -1;
}

static int send_tagged(const void* buf, size_t len, uint64_t tag) {
  struct fi_context ctx;
  ssize_t r;
  while ((r = fi_tsend(ep, buf, len, NULL, peer, tag, &ctx)) == -FI_EAGAIN) fi_cq_read(cq, NULL, 0);
  if (r) return (int)r;
  return wait_for(&ctx, NULL, NULL);
}

static int recv_tagged(void* buf, size_t len, uint64_t tag, uint64_t ignore,
                       struct fi_cq_tagged_entry* e, struct fi_cq_err_entry* err) {
  struct fi_context ctx;
  ssize_t r = fi_trecv(ep, buf, len, NULL, peer, tag, ignore, &ctx);
  if (r) return (int)r;
  return wait_for(&ctx, e, err);
}

/* Both ranks reach the same step. */
static void sync_step(unsigned step) {
  char b = 0;
  if (rank == 0) {
    send_tagged(&b, 1, CTRL_TAG | step);
    recv_tagged(&b, 1, CTRL_TAG | step, 0, NULL, NULL);
  } else {
    recv_tagged(&b, 1, CTRL_TAG | step, 0, NULL, NULL);
    send_tagged(&b, 1, CTRL_TAG | step);
  }
}

static void check_sizes(void) {
  static const size_t sizes[] = {0, 1, 88, 89, 200, 4096, 4097, 65536, 1 << 20};
  char* buf = malloc(1 << 20);
  const unsigned count = sizeof sizes / sizeof sizes[0] - (small ? 2 : 0);
  for (unsigned i = 0; i < count; ++i) {
    const size_t n = sizes[i];
    const uint64_t tag = 0x100 + i;
    if (rank == 0) {
      pattern(buf, n, i);
      if (send_tagged(buf, n, tag)) fail("sizes", "send", (long)n, 0);
      memset(buf, 0, n);
      struct fi_cq_tagged_entry e;
      if (recv_tagged(buf, n, tag, 0, &e, NULL) || e.len != n || check_pattern(buf, n, i + 1) >= 0)
        fail("sizes", "echo", (long)n, (long)e.len);
    } else {
      if (i % 2) usleep(20000); /* the odd sizes arrive before their receive */
      struct fi_cq_tagged_entry e;
      memset(buf, 0, n);
      int r = recv_tagged(buf, n, tag, 0, &e, NULL);
      if (r || e.len != n || e.tag != tag || check_pattern(buf, n, i) >= 0)
        fail("sizes", "received", (long)n, r);
      pattern(buf, n, i + 1);
      if (send_tagged(buf, n, tag)) fail("sizes", "echo send", (long)n, 0);
    }
  }
  free(buf);
  printf("ok sizes\n");
}

/* Messages of one source match in the order they were sent, whichever way each travels. */
static void check_order(void) {
  enum { kCount = 60 };
  char* buf = malloc(8192);
  const int before = failures;
  if (rank == 0) {
    struct fi_context ctx[kCount];
    char* bufs = malloc((size_t)kCount * 8192);
    for (int i = 0; i < kCount; ++i) {
      const size_t n = (i % 3 == 0) ? 6000 : (i % 3 == 1 ? 40 : 1000);
      char* b = bufs + (size_t)i * 8192;
      pattern(b, n, (unsigned)i);
      ssize_t r;
      while ((r = fi_tsend(ep, b, n, NULL, peer, 7, &ctx[i])) == -FI_EAGAIN)
        fi_cq_read(cq, NULL, 0);
      if (r) fail("order", "send", i, (long)r);
    }
    int done = 0;
    const double deadline = now_s() + kDeadline;
    while (done < kCount && now_s() < deadline) {
      struct fi_cq_tagged_entry e;
      const ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) ++done, ++sends_done;
      if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err;
        memset(&err, 0, sizeof err);
        fi_cq_readerr(cq, &err, 0);
        fail("order", fi_strerror(err.err), (long)err.len, err.prov_errno);
        ++done;
      }
    }
    if (done != kCount) fail("order", "sends completed", done, kCount);
    free(bufs);
  } else {
    usleep(20000);
    for (int i = 0; i < kCount; ++i) {
      const size_t n = (i % 3 == 0) ? 6000 : (i % 3 == 1 ? 40 : 1000);
      struct fi_cq_tagged_entry e;
      if (recv_tagged(buf, 8192, 7, 0, &e, NULL) || e.len != n ||
          check_pattern(buf, n, (unsigned)i) >= 0)
        fail("order", "message out of order or damaged", i, (long)e.len);
    }
  }
  free(buf);
  if (failures == before) printf("ok order\n");
}

/* A window of long messages whose reads, all at once, are more than the NIC lets be in flight
 * to one peer (between hosts, 1 MiB): the receiver's reads wait and go as room comes, every
 * message lands whole and each send and receive completes once. */
static void check_window(void) {
  enum { kCount = 24 };
  const size_t n = small ? 20000 : 200000;
  char* bufs = malloc((size_t)kCount * n);
  struct fi_context ctx[kCount];
  const int before = failures;
  if (rank == 1) {
    for (int i = 0; i < kCount; ++i) {
      memset(bufs + (size_t)i * n, 0, n);
      ssize_t r = fi_trecv(ep, bufs + (size_t)i * n, n, NULL, peer, 0x900 + (uint64_t)i, 0,
                           &ctx[i]);
      if (r) fail("window", "post receive", i, (long)r);
    }
  }
  sync_step(30); /* every receive is posted before the first message arrives */
  if (rank == 0)
    for (int i = 0; i < kCount; ++i) {
      pattern(bufs + (size_t)i * n, n, 50u + (unsigned)i);
      ssize_t r;
      while ((r = fi_tsend(ep, bufs + (size_t)i * n, n, NULL, peer, 0x900 + (uint64_t)i,
                           &ctx[i])) == -FI_EAGAIN)
        fi_cq_read(cq, NULL, 0);
      if (r) fail("window", "send", i, (long)r);
    }
  int done = 0, seen[kCount] = {0};
  const double deadline = now_s() + kDeadline;
  while (done < kCount && now_s() < deadline) {
    struct fi_cq_tagged_entry e;
    const ssize_t got = fi_cq_read(cq, &e, 1);
    if (got == -FI_EAVAIL) {
      struct fi_cq_err_entry err;
      memset(&err, 0, sizeof err);
      fi_cq_readerr(cq, &err, 0);
      fail("window", fi_strerror(err.err), (long)err.len, err.prov_errno);
      ++done;
      continue;
    }
    if (got != 1) continue;
    const long i = (struct fi_context*)e.op_context - ctx;
    if (i < 0 || i >= kCount || seen[i]++) {
      fail("window", "a completion twice or of no operation", i, 0);
      continue;
    }
    ++done;
    if (rank == 0) {
      ++sends_done;
    } else if (e.len != n || check_pattern(bufs + (size_t)i * n, n, 50u + (unsigned)i) >= 0) {
      fail("window", "message damaged", i, (long)e.len);
    }
  }
  if (done != kCount) fail("window", "operations completed", done, kCount);
  free(bufs);
  if (failures == before) printf("ok window\n");
}

static void check_tags_and_errors(void) {
  const int before = failures;
  char small[50], big[10000];
  if (rank == 0) {
    uint64_t v = 0x12345678;
    send_tagged(&v, sizeof v, 0x12345678);
    pattern(big, 100, 3);
    send_tagged(big, 100, 0x200);
    pattern(big, sizeof big, 4);
    send_tagged(big, sizeof big, 0x201);
    send_tagged(big, 30, 0x300); /* the claimed one */
  } else {
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry err;
    uint64_t v = 0;
    /* Tag masks: the low 16 bits ignored. */
    if (recv_tagged(&v, sizeof v, 0x12340000, 0xFFFF, &e, NULL) || e.tag != 0x12345678 ||
        v != 0x12345678)
      fail("tags", "masked receive", (long)e.tag, (long)v);
    /* Truncation: the first bytes placed, the rest reported. */
    int r = recv_tagged(small, sizeof small, 0x200, 0, NULL, &err);
    if (r != -FI_ETRUNC || err.olen != 50 || check_pattern(small, 50, 3) >= 0)
      fail("truncate", "short message", r, (long)err.olen);
    r = recv_tagged(small, sizeof small, 0x201, 0, NULL, &err);
    if (r != -FI_ETRUNC || err.olen != sizeof big - 50 || check_pattern(small, 50, 4) >= 0)
      fail("truncate", "long message", r, (long)err.olen);
    /* Cancel. */
    struct fi_context c;
    fi_trecv(ep, small, sizeof small, NULL, peer, 0x999, 0, &c);
    if (fi_cancel(&ep->fid, &c) != 0) fail("cancel", "fi_cancel", 0, 0);
    r = wait_for(&c, NULL, &err);
    if (r != -FI_ECANCELED) fail("cancel", "status", r, -FI_ECANCELED);
    /* Peek: nothing there, then the message; claim it. */
    struct fi_msg_tagged m;
    struct iovec iov = {small, sizeof small};
    struct fi_context pc;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.iov_count = 1;
    m.addr = peer;
    m.tag = 0x301;
    m.context = &pc;
    fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION);
    if ((r = wait_for(&pc, NULL, NULL)) != -FI_ENOMSG) fail("peek", "nothing to find", r, 0);
    m.tag = 0x300;
    const double deadline = now_s() + kDeadline;
    do {
      fi_trecvmsg(ep, &m, FI_PEEK | FI_CLAIM | FI_COMPLETION);
      r = wait_for(&pc, &e, NULL);
    } while (r == -FI_ENOMSG && now_s() < deadline);
    if (r || e.len != 30) fail("peek", "found", r, (long)e.len);
    memset(small, 0, sizeof small);
    fi_trecvmsg(ep, &m, FI_CLAIM | FI_COMPLETION);
    if ((r = wait_for(&pc, &e, NULL)) || e.len != 30 || check_pattern(small, 30, 4) >= 0)
      fail("claim", "received", r, (long)e.len);
  }
  if (failures == before) printf("ok tags truncate cancel peek claim\n");
}

static void check_msg(void) {
  const int before = failures;
  char buf[300];
  struct fi_context ctx;
  struct fi_cq_tagged_entry e;
  if (rank == 0) {
    pattern(buf, sizeof buf, 9);
    ssize_t r;
    while ((r = fi_senddata(ep, buf, sizeof buf, NULL, 0xABCDEF, peer, &ctx)) == -FI_EAGAIN)
      fi_cq_read(cq, NULL, 0);
    if (r || wait_for(&ctx, NULL, NULL)) fail("msg", "senddata", (long)r, 0);
    while ((r = fi_inject(ep, buf, 10, peer)) == -FI_EAGAIN) fi_cq_read(cq, NULL, 0);
    if (r) fail("msg", "inject", (long)r, 0);
    ++sends_done; /* no completion, but the counter counts it */
  } else {
    fi_recv(ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, &ctx);
    if (wait_for(&ctx, &e, NULL) || e.len != sizeof buf || !(e.flags & FI_REMOTE_CQ_DATA) ||
        e.data != 0xABCDEF || check_pattern(buf, sizeof buf, 9) >= 0 || !(e.flags & FI_MSG))
      fail("msg", "received with data", (long)e.len, (long)e.data);
    fi_recv(ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, &ctx);
    if (wait_for(&ctx, &e, NULL) || e.len != 10) fail("msg", "injected", (long)e.len, 0);
  }
  if (failures == before) printf("ok msg\n");
}

static void check_rma(void) {
  const int before = failures;
  enum { kRegion = 256 * 1024 };
  char* region = calloc(1, kRegion);
  char* local = malloc(kRegion);
  struct fid_mr* mr;
  if (fi_mr_reg(domain, region, kRegion, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL)) {
    fail("rma", "fi_mr_reg", 0, 0);
    return;
  }
  uint64_t mine[2] = {(uint64_t)(uintptr_t)region, fi_mr_key(mr)}, theirs[2];
  if (rank == 0) {
    send_tagged(mine, sizeof mine, 0x400);
    recv_tagged(theirs, sizeof theirs, 0x400, 0, NULL, NULL);
  } else {
    recv_tagged(theirs, sizeof theirs, 0x400, 0, NULL, NULL);
    send_tagged(mine, sizeof mine, 0x400);
  }
  if (rank == 0) {
    struct fi_context ctx;
    pattern(local, 100000, 11);
    ssize_t r = fi_write(ep, local, 100000, NULL, peer, theirs[0] + 1000, theirs[1], &ctx);
    if (r || wait_for(&ctx, NULL, NULL)) fail("rma", "write", (long)r, 0);
    memset(local, 0, kRegion);
    r = fi_read(ep, local, 100000, NULL, peer, theirs[0] + 1000, theirs[1], &ctx);
    if (r || wait_for(&ctx, NULL, NULL) || check_pattern(local, 100000, 11) >= 0)
      fail("rma", "read back", (long)r, check_pattern(local, 100000, 11));
    /* A wrong key: refused, at once or in the completion. */
    pattern(local, 64, 12);
    r = fi_write(ep, local, 64, NULL, peer, theirs[0], theirs[1] ^ 0x5A5A0000ull, &ctx);
    if (r == 0) r = wait_for(&ctx, NULL, NULL);
    if (r == 0) fail("rma", "a wrong key was accepted", 0, 0);
    /* An injected write: the buffer is the caller's again as soon as the call returns. */
    pattern(local + 100000, 200, 14);
    while ((r = fi_inject_write(ep, local + 100000, 200, peer, theirs[0] + 210000, theirs[1])) ==
           -FI_EAGAIN)
      fi_cq_read(cq, NULL, 0);
    if (r) fail("rma", "inject write", (long)r, 0);
    memset(local + 100000, 0xEE, 200);
    /* Write with remote CQ data. */
    pattern(local, 500, 13);
    r = fi_writedata(ep, local, 500, NULL, 0x77, peer, theirs[0] + 200000, theirs[1], &ctx);
    if (r || wait_for(&ctx, NULL, NULL)) fail("rma", "writedata", (long)r, 0);
  } else {
    /* The remote CQ data arrives after the data it tells of. */
    const double deadline = now_s() + kDeadline;
    struct fi_cq_tagged_entry e;
    ssize_t n;
    do {
      n = fi_cq_read(cq, &e, 1);
    } while (n == -FI_EAGAIN && now_s() < deadline);
    if (n != 1 || !(e.flags & FI_REMOTE_CQ_DATA) || e.data != 0x77)
      fail("rma", "remote CQ data", (long)n, (long)e.data);
    if (check_pattern(region + 1000, 100000, 11) >= 0) fail("rma", "written bytes", 0, 0);
    if (check_pattern(region + 200000, 500, 13) >= 0) fail("rma", "writedata bytes", 0, 0);
    /* The injected write reports no completion: its bytes arrive (the copy's, not what the
     * sender wrote into its buffer after the call). */
    while (check_pattern(region + 210000, 200, 14) >= 0 && now_s() < deadline)
      fi_cq_read(cq, NULL, 0);
    if (check_pattern(region + 210000, 200, 14) >= 0)
      fail("rma", "injected write's bytes", check_pattern(region + 210000, 200, 14), 0);
    for (int i = 0; i < 1000; ++i)
      if (region[i]) {
        fail("rma", "a byte before the write (the wrong key's target) changed", i, region[i]);
        break;
      }
  }
  sync_step(40);
  fi_close(&mr->fid);
  free(region);
  free(local);
  if (failures == before) printf("ok rma write read inject writedata wrong-key\n");
}

static void check_bad_input(void) {
  const int before = failures;
  char b[8] = {0};
  ssize_t r = fi_tsend(ep, b, sizeof b, NULL, (fi_addr_t)999, 1, NULL);
  if (r != -FI_EINVAL) fail("bad input", "send to an address the AV does not hold", (long)r, 0);
  r = fi_tinject(ep, b, 1 << 20, peer, 1);
  if (r != -FI_EMSGSIZE) fail("bad input", "inject beyond the inject size", (long)r, 0);
  if (fi_cntr_read(send_cntr) != sends_done)
    fail("counters", "send counter", (long)fi_cntr_read(send_cntr), (long)sends_done);
  if (failures == before) printf("ok bad-input counters\n");
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || (strcmp(argv[1], "0") && strcmp(argv[1], "1")) ||
      (argc == 4 && strcmp(argv[3], "small"))) {
    fprintf(stderr, "usage: fi_check <rank 0|1> <rendezvous directory> [small]\n");
    return 2;
  }
  small = argc == 4;
  rank = atoi(argv[1]);
  setvbuf(stdout, NULL, _IONBF, 0);
  struct fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_DIRECTED_RECV;
  hints->mode = FI_CONTEXT;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
  hints->fabric_attr->prov_name = strdup("galaxy");
  struct fi_info* info;
  int r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
  if (r) {
    printf("FAIL setup: fi_getinfo: %s\n", fi_strerror(-r));
    return 1;
  }
  if (fi_fabric(info->fabric_attr, &fabric, NULL) || fi_domain(fabric, info, &domain, NULL)) {
    printf("FAIL setup: fabric or domain\n");
    return 1;
  }
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP};
  if (fi_cq_open(domain, &cq_attr, &cq, NULL) || fi_av_open(domain, &av_attr, &av, NULL) ||
      fi_cntr_open(domain, &cntr_attr, &send_cntr, NULL) || fi_endpoint(domain, info, &ep, NULL) ||
      fi_ep_bind(ep, &av->fid, 0) || fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) ||
      fi_ep_bind(ep, &send_cntr->fid, FI_SEND) || fi_enable(ep)) {
    printf("FAIL setup: endpoint\n");
    return 1;
  }
  /* Names through the directory. */
  char name[64], their[64], path[4096], tmp[4200];
  size_t len = 0;
  if (fi_getname(&ep->fid, NULL, &len) != -FI_ETOOSMALL || len == 0 || len > sizeof name) {
    printf("FAIL setup: fi_getname length\n");
    return 1;
  }
  fi_getname(&ep->fid, name, &len);
  snprintf(path, sizeof path, "%s/name%d", argv[2], rank);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "wb");
  if (!f || fwrite(name, 1, len, f) != len || fclose(f) || rename(tmp, path)) {
    printf("FAIL setup: writing %s\n", path);
    return 1;
  }
  snprintf(path, sizeof path, "%s/name%d", argv[2], 1 - rank);
  const double deadline = now_s() + 30;
  while (!(f = fopen(path, "rb")) && now_s() < deadline) usleep(10000);
  if (!f || fread(their, 1, len, f) != len) {
    printf("FAIL setup: reading %s\n", path);
    return 1;
  }
  fclose(f);
  if (fi_av_insert(av, their, 1, &peer, 0, NULL) != 1 ||
      fi_av_insert(av, name, 1, &self, 0, NULL) != 1) {
    printf("FAIL setup: fi_av_insert\n");
    return 1;
  }
  sync_step(1);
  check_sizes();
  sync_step(2);
  check_order();
  sync_step(3);
  check_window();
  sync_step(31);
  check_tags_and_errors();
  sync_step(4);
  check_msg();
  sync_step(5);
  check_rma();
  sync_step(6);
  check_bad_input();
  sync_step(7);
  if (fi_close(&ep->fid) || fi_close(&send_cntr->fid) || fi_close(&av->fid) || fi_close(&cq->fid) ||
      fi_close(&domain->fid) || fi_close(&fabric->fid)) {
    printf("FAIL close\n");
    ++failures;
  }
  fi_freeinfo(info);
  fi_freeinfo(hints);
  printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
  return failures;
}
