/* libglex — the Galaxy user-level communication library (SYSTEM.md 2.3; docs/glex.md).
 * This part: endpoints and the management request interface used by the management server. */
#ifndef GLEX_H
#define GLEX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GLEX_SUCCESS = 0,
  GLEX_INVALID_PARAM = 1,   /* a field is out of range: see glex_last_error() */
  GLEX_NO_RESOURCE = 2,     /* no free VP, or the descriptor queue is full */
  GLEX_TIMEOUT = 3,         /* nothing arrived within the timeout */
  GLEX_DESCRIPTOR_ERROR = 4 /* the NIC rejected the descriptor */
} glex_ret_t;

typedef struct glex_device* glex_device_handle_t;
typedef struct glex_ep* glex_ep_handle_t;

#define GLEX_MGMT_MAX_HOPS 20
#define GLEX_CHIP_NIC 0
#define GLEX_CHIP_NRC 1

/* glex_send_mgmt_req flags */
#define GLEX_MGMT_FENCE 0x1     /* execute after the previous descriptor of the VP completed */
#define GLEX_MGMT_INTERRUPT 0x2 /* raise an MPQ-not-empty interrupt instead of polling */
#define GLEX_MGMT_AUTO_TID 0x4  /* the library assigns transaction_id (16 bits, wraps) */

struct glex_route {
  uint8_t hop_num;                  /* 0..20 */
  uint8_t hops[GLEX_MGMT_MAX_HOPS]; /* output port at each NRC, 0..31 */
};

/* Every field of a management request and of its response (SYSTEM.md 2.2). */
struct glex_mgmt_info {
  uint16_t dest_id;  /* 0xFFFF: a chip whose id is not configured yet */
  uint8_t dest_type; /* GLEX_CHIP_NIC or GLEX_CHIP_NRC */
  uint8_t dest_vp;   /* VP receiving the response (filled in by send) */
  uint16_t src_id;   /* response: the answering chip */
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
  uint64_t m_key;
  uint8_t lint;
  uint8_t rint;
};

struct glex_ep_attr {
  int32_t vp; /* a DMA VP 8..39, or -1 for any free one */
};

glex_ret_t glex_create_ep(glex_device_handle_t dev, const struct glex_ep_attr* attr,
                          glex_ep_handle_t* ep);
glex_ret_t glex_destroy_ep(glex_ep_handle_t ep);
uint32_t glex_ep_vp(glex_ep_handle_t ep);

glex_ret_t glex_send_mgmt_req(glex_ep_handle_t ep, struct glex_mgmt_info* req, int32_t flag);
/* Waits up to timeout_ms (0 = poll) for the next response or fault report on ep's VP. */
glex_ret_t glex_receive_mgmt_ack(glex_ep_handle_t ep, int32_t timeout_ms,
                                 struct glex_mgmt_info* ack);

const char* glex_error_string(glex_ret_t ret);
/* The message of the last error on this thread, naming the field and value. */
const char* glex_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* GLEX_H */
