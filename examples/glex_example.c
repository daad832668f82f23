/* A complete libglex program (docs/glex.md): two processes find each other with the bootstrap,
 * exchange mini-packets, then rank 0 writes into rank 1's registered memory with an RDMA put
 * at an odd address and length, with a completion event at the target.
 *
 *   galaxy fabric up --fabric live:fattree:k=4,levels=2,hosts=h1:127.0.0.1
 *   mkdir /tmp/job && for r in 0 1; do
 *     GLEX_RANK=$r GLEX_SIZE=2 GLEX_RENDEZVOUS=/tmp/job build/release/bin/glex_example & done
 */
#include <glex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                     \
  do {                                                                                  \
    glex_ret_t r_ = (call);                                                             \
    if (r_ != GLEX_SUCCESS) {                                                           \
      fprintf(stderr, "%s: %s: %s\n", #call, glex_error_string(r_), glex_last_error()); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

int main(void) {
  glex_device_handle_t dev;
  glex_ep_handle_t ep;
  struct glex_ep_attr attr = {-1};
  uint32_t rank, size;
  glex_ep_addr_t* addrs;
  CHECK(glex_open_device(NULL, &dev)); /* $GLEX_FABRIC, $GLEX_HOST, NIC from $GLEX_RANK */
  CHECK(glex_create_ep(dev, &attr, &ep));
  CHECK(glex_bootstrap(ep, &rank, &size, &addrs));
  glex_ep_addr_t peer = addrs[1 - rank];
  free(addrs);

  /* Mini-packets: up to 120 bytes, in order per VP. */
  struct glex_mp mp;
  if (rank == 0) {
    CHECK(glex_send_mp(ep, peer, "ping", 4, 0));
    CHECK(glex_recv_mp(ep, 5000, &mp));
  } else {
    CHECK(glex_recv_mp(ep, 5000, &mp));
    CHECK(glex_send_mp(ep, peer, "pong", 4, 0));
  }
  printf("rank %u got '%.*s' from node %u vp %u\n", rank, (int)mp.len, (const char*)mp.data,
         GLEX_EP_ADDR_NODE(mp.src), GLEX_EP_ADDR_VP(mp.src));

  if (rank == 1) {
    /* Target: 4 KiB for data and a 16-byte event word, registered for remote writes. */
    static char buf[4096];
    static struct glex_event evt;
    glex_mem_handle_t mh, emh;
    CHECK(glex_register_mem(dev, buf, sizeof buf, GLEX_MEM_WRITE, &mh));
    CHECK(glex_register_mem(dev, &evt, sizeof evt, GLEX_MEM_WRITE, &emh));
    uint64_t where[4] = {(uint64_t)(uintptr_t)buf, mh, (uint64_t)(uintptr_t)&evt, emh};
    CHECK(glex_send_mp(ep, peer, where, sizeof where, 0));
    struct glex_event got;
    CHECK(glex_wait_event(&evt, 5000, &got)); /* the data are there when the event is */
    printf("rank 1: event %llu, buf[3..] = '%.*s'\n", (unsigned long long)got.data[0], 13, buf + 3);
    CHECK(glex_send_mp(ep, peer, "done", 4, 0));
  } else {
    static char msg[] = "hello, galaxy";
    glex_mem_handle_t lmh;
    uint64_t where[4];
    CHECK(glex_register_mem(dev, msg, sizeof msg, GLEX_MEM_READ, &lmh));
    CHECK(glex_recv_mp(ep, 5000, &mp));
    memcpy(where, mp.data, sizeof where);
    struct glex_rdma_req req = {0};
    req.target = peer;
    req.op = GLEX_OP_PUT;
    req.flags = GLEX_FLAG_REMOTE_EVT | GLEX_FLAG_LOCAL_CQ;
    req.local_addr = msg;
    req.local_mh = lmh;
    req.len = 13;                   /* any length ... */
    req.remote_addr = where[0] + 3; /* ... at any byte alignment */
    req.remote_mh = where[1];
    req.event_addr = where[2];
    req.event_mh = where[3];
    req.event.data[0] = 42;
    req.event.data[1] = 1; /* non-zero: written last, it signals the event */
    req.cookie = 7;
    CHECK(glex_rdma(ep, &req));
    struct glex_cq_entry e;
    CHECK(glex_wait_cq(ep, 5000, &e)); /* local completion (errors always arrive here) */
    printf("rank 0: put of %llu bytes, cookie %llu: %s\n", (unsigned long long)e.bytes,
           (unsigned long long)e.cookie, glex_error_string(e.status));
    CHECK(glex_recv_mp(ep, 5000, &mp));
    if (e.status != GLEX_SUCCESS) return 1;
  }
  CHECK(glex_destroy_ep(ep));
  CHECK(glex_close_device(dev));
  return 0;
}
