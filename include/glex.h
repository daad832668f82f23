/* libglex — the Galaxy user-level communication library (docs/system.md 1.1, 2.3; docs/glex.md):
 * devices and endpoints (VPs), registered memory, mini-packets, connectionless RDMA, completion
 * events and queues, bootstrap, and the management request interface of the management server. */
#ifndef GLEX_H
#define GLEX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GLEX_SUCCESS = 0,
  GLEX_INVALID_PARAM = 1,    /* a field is out of range: see glex_last_error() */
  GLEX_NO_RESOURCE = 2,      /* no free VP, or the descriptor queue is full */
  GLEX_TIMEOUT = 3,          /* nothing arrived within the timeout */
  GLEX_DESCRIPTOR_ERROR = 4, /* the NIC rejected the descriptor */
  GLEX_BUSY = 5,             /* the target MPQ or our queue is full: retry */
  GLEX_NO_ENTRY = 6,         /* nothing to poll yet */
  GLEX_ACCESS_ERROR = 7,     /* remote access refused: wrong key, outside the range, no right */
  GLEX_UNREACHABLE = 8,      /* no route, link down, or the target endpoint is not open */
  GLEX_PEER_DEAD = 9,        /* the target process is gone */
  GLEX_UNSUPPORTED = 10      /* not available on this engine */
} glex_ret_t;

typedef struct glex_device* glex_device_handle_t;
typedef struct glex_ep* glex_ep_handle_t;

#define GLEX_MGMT_MAX_HOPS 31
#define GLEX_CHIP_NIC 0
#define GLEX_CHIP_NRC 1

/* glex_send_mgmt_req flags */
#define GLEX_MGMT_FENCE 0x1     /* execute after the previous descriptor of the VP completed */
#define GLEX_MGMT_INTERRUPT 0x2 /* raise an MPQ-not-empty interrupt instead of polling */
#define GLEX_MGMT_AUTO_TID 0x4  /* the library assigns transaction_id (16 bits, wraps) */

struct glex_route {
  uint8_t hop_num;                  /* 0..31 */
  uint8_t hops[GLEX_MGMT_MAX_HOPS]; /* output port at each NRC, 0..127; a route through a
                                       port above 31 goes as the wide variant of the packet,
                                       one of more than 20 hops as the long variant (ports
                                       0..31 only; docs/protocol.md) */
};

/* Every field of a management request and of its response (docs/system.md 2.2). */
struct glex_mgmt_info {
  uint32_t dest_id;  /* chip id, 0..0x1FFFE; 0x1FFFF: a chip whose id is not configured yet */
  uint8_t dest_type; /* GLEX_CHIP_NIC or GLEX_CHIP_NRC */
  uint8_t dest_vp;   /* VP receiving the response (filled in by send); SMInfo: the other
                        server's VP, set by the caller */
  uint32_t src_id;   /* response: the answering chip */
  uint8_t src_type;
  uint8_t src_vp;
  uint16_t transaction_id;
  struct glex_route forward_route;
  struct glex_route backward_route;
  uint8_t nmp_type; /* see wire/mgmt.h NmpType: 0x01 register read request ... 0x20 fault */
  uint8_t count;    /* registers (1-2) or EEPROM bytes (1-6) */
  uint16_t address[6];
  uint64_t value[2];
  uint8_t bytes[6];
  uint8_t error; /* error responses: why (1 address out of range, 2 unknown type, 3 bad length,
                    4 wrong key, 5 read only, 6 bad value) */
  uint16_t error_address;
  uint8_t fault_code;
  uint8_t fault_port;
  uint8_t fault_severity;
  uint32_t fault_detail;
  uint64_t m_key; /* SMInfo packets: the SM_Key */
  uint8_t lint;
  uint8_t rint;
  /* SMInfo packets between management servers (nmp_type 0x30 get, 0x31 set, 0x32 response;
     docs/protocol.md "SMInfo packets"): they go to the server at dest_id's VP dest_vp (which
     the sender fills in) by backward_route; forward_route is the way back to the sender. */
  uint64_t sm_guid;
  uint32_t sm_act_count;
  uint8_t sm_priority;     /* 0-15 */
  uint8_t sm_state;        /* 0 not active, 1 discovering, 2 standby, 3 master */
  uint8_t sm_control;      /* set: 1 handover, 2 acknowledge, 3 disable, 4 standby, 5 discover */
  uint8_t sm_successor_vp; /* 0xFF: no successor named */
  uint16_t sm_successor_id;
};

struct glex_ep_attr {
  int32_t vp; /* a VP 0..39, or -1 for any free one (DMA VPs 8..39 first); others: invalid */
};

/* ---- Devices (the NIC of this process) ---------------------------------------------------- */
struct glex_device_attr {
  const char* fabric; /* live fabric name, or sim:<topology> served by `galaxy simd`;
                         NULL: $GLEX_FABRIC, else "galaxy" */
  const char* host;   /* host of the fabric; NULL: $GLEX_HOST, else the only host running here */
  int32_t nic;        /* chip id of the NIC; -1: $GLEX_NIC, else local NIC ($GLEX_RANK mod n) */
};
/* Opens a NIC of a live fabric whose daemon (`galaxy fabricd`) runs on this host, or of a
   simulated fabric (docs/glex.md, "Linking and providers"). */
glex_ret_t glex_open_device(const struct glex_device_attr* attr, glex_device_handle_t* dev);
glex_ret_t glex_close_device(glex_device_handle_t dev);
uint32_t glex_device_node(glex_device_handle_t dev); /* the NIC's chip id */
/* The chip id of a NIC of this device's fabric as users name it (docs/topologies.md "Naming
   chips"): its chip id ("12"), "nic:<index>", its name, its NodeDescription ("node018 HCA-1") or
   its GUID ("0x2c90300500001", "H-0002c90300500001"); 1 to GLEX_NAME_MAX bytes. A name that
   matches no chip, several chips' description or a router is GLEX_INVALID_PARAM, with
   glex_last_error() saying which. */
#define GLEX_NAME_MAX 255
glex_ret_t glex_resolve_nic(glex_device_handle_t dev, const char* name, uint32_t* chip_id);
/* The name of chip `chip_id` of this device's fabric, NUL-terminated into name[0, len).
   GLEX_INVALID_PARAM for a chip outside the fabric or a name longer than len - 1. */
glex_ret_t glex_node_name(glex_device_handle_t dev, uint32_t chip_id, char* name, size_t len);

/* An endpoint address: NIC chip id << 8 | VP. Exchange it to talk to a peer. */
typedef uint64_t glex_ep_addr_t;
#define GLEX_EP_ADDR(node, vp) (((glex_ep_addr_t)(node) << 8) | (glex_ep_addr_t)(vp))
#define GLEX_EP_ADDR_NODE(a) ((uint32_t)((a) >> 8))
#define GLEX_EP_ADDR_VP(a) ((uint32_t)((a)&0xFF))
#define GLEX_MAX_NODE 0x1FFFE /* the largest chip id: ids are 17 bits, all ones unconfigured */
glex_ep_addr_t glex_ep_addr(glex_ep_handle_t ep);

glex_ret_t glex_create_ep(glex_device_handle_t dev, const struct glex_ep_attr* attr,
                          glex_ep_handle_t* ep);
glex_ret_t glex_destroy_ep(glex_ep_handle_t ep);
uint32_t glex_ep_vp(glex_ep_handle_t ep);

glex_ret_t glex_send_mgmt_req(glex_ep_handle_t ep, struct glex_mgmt_info* req, int32_t flag);
/* Waits up to timeout_ms (0 = poll) for the next response or fault report on ep's VP. */
glex_ret_t glex_receive_mgmt_ack(glex_ep_handle_t ep, int32_t timeout_ms,
                                 struct glex_mgmt_info* ack);
/* The same with a timeout in picoseconds, for management software that paces itself finer
 * than a millisecond (simulated time on a simulated fabric). */
glex_ret_t glex_receive_mgmt_ack_ps(glex_ep_handle_t ep, uint64_t timeout_ps,
                                    struct glex_mgmt_info* ack);
/* The host's clock in picoseconds: simulated time on a simulated fabric, else monotonic. */
uint64_t glex_time_ps(glex_device_handle_t dev);
/* Reads a register of this process's own NIC (no packet leaves it). */
glex_ret_t glex_read_local_reg(glex_device_handle_t dev, uint16_t addr, uint64_t* value);

/* ---- Registered memory (the ATT, docs/system.md 1.1) -------------------------------------------
 */
#define GLEX_MEM_READ 0x1  /* peers may RDMA-get from it */
#define GLEX_MEM_WRITE 0x2 /* peers may RDMA-put into it (and write events) */
/* A registration: ATT index << 32 | key. Give it to the peers that access the memory. */
typedef uint64_t glex_mem_handle_t;
glex_ret_t glex_register_mem(glex_device_handle_t dev, void* addr, uint64_t len, uint32_t access,
                             glex_mem_handle_t* mh);
glex_ret_t glex_deregister_mem(glex_device_handle_t dev, glex_mem_handle_t mh);
/* A registration as the 32 bits an RDMA descriptor carries (the key the target's NIC checks),
 * and back, on any NIC of the same fabric: for protocols above libglex whose memory handles are
 * 32-bit fields (VIA's VIP_MEM_HANDLE, include/via.h). */
uint32_t glex_mem_key(glex_device_handle_t dev, glex_mem_handle_t mh);
glex_mem_handle_t glex_mem_handle_of_key(glex_device_handle_t dev, uint32_t key);
/* Memory that peers on this host reach with a single memcpy (shared registered memory);
 * register it like any other. Other memory is reached by cross-memory attach, also one copy. */
glex_ret_t glex_alloc_mem(glex_device_handle_t dev, uint64_t len, void** addr);
glex_ret_t glex_free_mem(glex_device_handle_t dev, void* addr);

/* ---- Mini-packets (docs/system.md 1.1: 128 bytes, 120 of payload) -------------------------------
 */
#define GLEX_MP_PAYLOAD 120
#define GLEX_FLAG_FENCE 0x1      /* start after every earlier descriptor of the VP completed */
#define GLEX_FLAG_INTERRUPT 0x2  /* ask for the receiver's MPQ-not-empty interrupt */
#define GLEX_FLAG_LOCAL_CQ 0x4   /* write a completion into the local CQ (errors always are) */
#define GLEX_FLAG_REMOTE_EVT 0x8 /* RDMA: write a 16-byte event at the target when complete */
#define GLEX_FLAG_MORE                                              \
  0x10 /* MP: more MPs to the same target follow at once (a train); \
        * this one may wait to share their datagram, at most 1 ms */
struct glex_mp {
  glex_ep_addr_t src; /* the sender */
  uint32_t len;       /* 0..120 */
  uint8_t data[GLEX_MP_PAYLOAD];
};
glex_ret_t glex_send_mp(glex_ep_handle_t ep, glex_ep_addr_t dest, const void* data, uint32_t len,
                        uint32_t flags);
/* timeout_ms: 0 polls (GLEX_NO_ENTRY when empty), < 0 waits forever; polls for a bounded time
 * and then sleeps ($GLEX_SPIN_US, default 50). */
glex_ret_t glex_recv_mp(glex_ep_handle_t ep, int32_t timeout_ms, struct glex_mp* mp);

/* ---- RDMA (connectionless; any length, any byte alignment) --------------------------------- */
#define GLEX_OP_PUT 1
#define GLEX_OP_GET 2
#define GLEX_OP_IMM 3 /* immediate put: 1..128 bytes carried in the descriptor */
#define GLEX_OP_MP 4
#define GLEX_OP_COLL 5 /* a collective's completion (glex_ibarrier, ...) */
#define GLEX_IMM_MAX 128
struct glex_event {
  uint64_t data[2]; /* 16 bytes written at the event address when the RDMA has completed */
};
struct glex_rdma_req {
  glex_ep_addr_t target;      /* the target endpoint: NIC and VP */
  uint32_t op;                /* GLEX_OP_PUT, GLEX_OP_GET or GLEX_OP_IMM */
  uint32_t flags;             /* GLEX_FLAG_* */
  void* local_addr;           /* put: source, get: destination; in memory registered here */
  glex_mem_handle_t local_mh; /* its registration (not needed for GLEX_OP_IMM) */
  uint64_t len;               /* bytes; GLEX_OP_IMM: 1..128 */
  uint64_t remote_addr;       /* virtual address at the target, inside remote_mh */
  glex_mem_handle_t remote_mh;
  uint64_t event_addr; /* GLEX_FLAG_REMOTE_EVT: where the event goes (target memory) */
  glex_mem_handle_t event_mh;
  struct glex_event event;
  uint64_t cookie; /* returned in the CQ entry */
};
glex_ret_t glex_rdma(glex_ep_handle_t ep, const struct glex_rdma_req* req);

/* ---- Completions ---------------------------------------------------------------------------- */
struct glex_cq_entry {
  uint32_t op;       /* GLEX_OP_* */
  glex_ret_t status; /* GLEX_SUCCESS or why it failed */
  uint64_t cookie;
  uint64_t bytes;
  uint16_t error_id; /* stable error id (E<id>) of a failure */
  char reason[40];   /* short text of a failure */
};
/* The CQ holds 1,024 entries. A full CQ is never overwritten: same-host operations return
 * GLEX_BUSY until it is polled, and the daemon holds later completions back in order. */
glex_ret_t glex_poll_cq(glex_ep_handle_t ep, struct glex_cq_entry* e); /* GLEX_NO_ENTRY if none */
/* timeout_ms as glex_recv_mp: 0 polls, < 0 waits forever. */
glex_ret_t glex_wait_cq(glex_ep_handle_t ep, int32_t timeout_ms, struct glex_cq_entry* e);
/* Waits until every descriptor posted on ep has completed (at most timeout_ms; < 0 forever). */
glex_ret_t glex_fence(glex_ep_handle_t ep, int32_t timeout_ms);
/* Waits until the 16-byte event at `evt` is written (data[0] or data[1] non-zero), then
 * returns it and clears it for the next use. */
glex_ret_t glex_wait_event(volatile struct glex_event* evt, int32_t timeout_ms,
                           struct glex_event* out);

/* ---- Collectives (docs/system.md 1.1 "Offloaded collectives"; docs/glex.md "Collectives")
 * -------- */
/* A group of endpoints, one per member. By default its collectives are offloaded: each member
 * posts its part of a tree as CP-triggered descriptors and the NICs run it with no host thread.
 * GLEX_COLL_P2P runs the same trees host-driven (MPs and RDMA), for comparison. The endpoint
 * serves the group alone while it exists; members call collectives in the same order. */
typedef struct glex_coll* glex_coll_handle_t;
#define GLEX_COLL_P2P 0x1
struct glex_coll_attr {
  uint32_t flags;         /* GLEX_COLL_* */
  uint32_t degree;        /* the trees' degree, 2..64; 0: chosen from the timing model */
  int32_t timeout_ms;     /* creation and every blocking collective; 0: 10000 */
  uint64_t scratch_bytes; /* per member, for broadcasts over 120 bytes; 0: 262144 */
};
/* Every member calls it with its rank, the group's size and every member's endpoint address
 * (glex_bootstrap's array); it returns once all have joined. attr may be NULL. */
glex_ret_t glex_coll_create(glex_ep_handle_t ep, uint32_t rank, uint32_t size,
                            const glex_ep_addr_t* addrs, const struct glex_coll_attr* attr,
                            glex_coll_handle_t* group);
glex_ret_t glex_coll_destroy(glex_coll_handle_t group);
uint32_t glex_coll_degree(glex_coll_handle_t group);

#define GLEX_TYPE_INT64 1
#define GLEX_TYPE_DOUBLE 2
#define GLEX_SUM 1
#define GLEX_MIN 2
#define GLEX_MAX 3
#define GLEX_COLL_INLINE 120 /* bytes a broadcast or allreduce carries in control packets */

/* Blocking: they return when this member's part is done, or with an error within the group's
 * timeout (a member died or never came: GLEX_TIMEOUT, and the group is unusable after). */
glex_ret_t glex_barrier(glex_coll_handle_t group);
glex_ret_t glex_bcast(glex_coll_handle_t group, void* buf, uint64_t len, uint32_t root);
glex_ret_t glex_allreduce(glex_coll_handle_t group, const void* in, void* out, uint32_t count,
                          uint32_t type, uint32_t op);
glex_ret_t glex_reduce(glex_coll_handle_t group, const void* in, void* out, uint32_t count,
                       uint32_t type, uint32_t op, uint32_t root);

/* Non-blocking (offloaded groups): posting is the host's only work; completion is a CQ entry of
 * op GLEX_OP_COLL with `cookie` on the group's endpoint (errors too). Results are written by the
 * NIC into `buf`/`out`, which lie in memory registered as `mh` with GLEX_MEM_WRITE; a broadcast
 * carries at most GLEX_COLL_INLINE bytes, an allreduce at most 15 values. */
glex_ret_t glex_ibarrier(glex_coll_handle_t group, uint64_t cookie);
glex_ret_t glex_ibcast(glex_coll_handle_t group, void* buf, glex_mem_handle_t mh, uint32_t len,
                       uint32_t root, uint64_t cookie);
glex_ret_t glex_iallreduce(glex_coll_handle_t group, const void* in, void* out,
                           glex_mem_handle_t mh, uint32_t count, uint32_t type, uint32_t op,
                           uint64_t cookie);

/* ---- Bootstrap ------------------------------------------------------------------------------ */
/* Exchanges endpoint addresses among the processes of a job. Rank and size come from PMIx when
 * the job was started by mpirun/srun (PMIX_RANK set), otherwise from $GLEX_RANK and $GLEX_SIZE;
 * the rendezvous is PMIx or the directory $GLEX_RENDEZVOUS (fresh per job, shared by the
 * processes). On success *addrs holds `*size` addresses indexed by rank; free() it. */
glex_ret_t glex_bootstrap(glex_ep_handle_t ep, uint32_t* rank, uint32_t* size,
                          glex_ep_addr_t** addrs);

const char* glex_error_string(glex_ret_t ret);
/* The message of the last error on this thread, naming the field and value. */
const char* glex_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* GLEX_H */
