/* via_pingpong: MyVIA's latency program on Galaxy's VIA (include/via.h; docs/via.md).
 *
 *   via_pingpong [options] server
 *   via_pingpong [options] client <server NIC: chip id or hosts-file name>
 *
 * The client sends a message, the server returns it, -n times after -w warm-up round trips; the
 * one-way latency is half the mean round trip. Every byte of the warm-up round trips and of one
 * after the timed ones is checked.
 *   -s bytes       message size (default 8)
 *   -n count       timed round trips (default 1000)
 *   -w count       warm-up round trips (default 100)
 *   -d device      VipOpenNic's device name (default: $GLEX_FABRIC, $GLEX_NIC)
 *   -D text        discriminator (default "via_pingpong")
 *   -r u|d|r       reliability: unreliable, reliable delivery (default), reliable reception
 *   -H file        name service hosts file (VipNSInit)
 *   -P NIC         connect peer to peer (VipConnectPeerRequest/Wait) with that NIC, which names
 *                  this one with its own -P; the client still sends first
 * Output, one line: via_pingpong bytes=<s> iterations=<n> one_way_us=<t> MBps=<s/t> */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "via.h"

#define TIMEOUT_MS 30000

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int fail(const char* what, VIP_RETURN r) {
  fprintf(stderr, "via_pingpong: %s: %s (%s)\n", what, VipErrorString(r), VipLastError());
  return 1;
}

struct side {
  VIP_VI_HANDLE vi;
  VIP_MEM_HANDLE mh;
  VIP_DESCRIPTOR* send;
  VIP_DESCRIPTOR* recv;
  uint8_t* out;
  uint8_t* in;
  uint32_t bytes;
};

static void describe(VIP_DESCRIPTOR* d, uint8_t* buf, VIP_MEM_HANDLE mh, uint32_t bytes) {
  memset(d, 0, sizeof *d);
  d->CS.SegCount = 1;
  d->CS.Length = bytes;
  d->DS[0].Local.Data.Address = buf;
  d->DS[0].Local.Handle = mh;
  d->DS[0].Local.Length = bytes;
}

static VIP_RETURN post_recv(struct side* s) {
  describe(s->recv, s->in, s->mh, s->bytes);
  return VipPostRecv(s->vi, s->recv, s->mh);
}

/* One message out and one back (client), or one in and one out (server). Rounds that check
 * (the warm-up and one after the timed ones) fill and verify every byte; timed rounds move the
 * bytes without touching them, as the peers' latency tests do. */
static int exchange(struct side* s, int client, uint32_t round, int check) {
  VIP_DESCRIPTOR* d;
  VIP_RETURN r;
  if (client) {
    for (uint32_t i = 0; check && i < s->bytes; ++i) s->out[i] = (uint8_t)(round + i);
    describe(s->send, s->out, s->mh, s->bytes);
    if ((r = VipPostSend(s->vi, s->send, s->mh)) != VIP_SUCCESS) return fail("VipPostSend", r);
  }
  if ((r = VipRecvWait(s->vi, TIMEOUT_MS, &d)) != VIP_SUCCESS) return fail("VipRecvWait", r);
  if (d->CS.Length != s->bytes) {
    fprintf(stderr, "via_pingpong: round %u: %u bytes, want %u\n", round, d->CS.Length, s->bytes);
    return 1;
  }
  for (uint32_t i = 0; check && i < s->bytes; ++i) {
    if (s->in[i] != (uint8_t)(round + i)) {
      fprintf(stderr, "via_pingpong: round %u: byte %u is %u\n", round, i, s->in[i]);
      return 1;
    }
  }
  if ((r = post_recv(s)) != VIP_SUCCESS) return fail("VipPostRecv", r);
  if (!client) {
    if (check) memcpy(s->out, s->in, s->bytes);
    describe(s->send, s->out, s->mh, s->bytes);
    if ((r = VipPostSend(s->vi, s->send, s->mh)) != VIP_SUCCESS) return fail("VipPostSend", r);
  }
  if ((r = VipSendWait(s->vi, TIMEOUT_MS, &d)) != VIP_SUCCESS) return fail("VipSendWait", r);
  return 0;
}

int main(int argc, char** argv) {
  uint32_t bytes = 8, iters = 1000, warmup = 100;
  const char* device = NULL;
  const char* disc = "via_pingpong";
  const char* hosts = NULL;
  const char* peer = NULL; /* -P: a peer-to-peer connection with this NIC */
  VIP_RELIABILITY_LEVEL level = VIP_SERVICE_RELIABLE_DELIVERY;
  int opt;
  while ((opt = getopt(argc, argv, "s:n:w:d:D:r:H:P:")) != -1) {
    switch (opt) {
      case 's':
        bytes = (uint32_t)strtoul(optarg, NULL, 0);
        break;
      case 'n':
        iters = (uint32_t)strtoul(optarg, NULL, 0);
        break;
      case 'w':
        warmup = (uint32_t)strtoul(optarg, NULL, 0);
        break;
      case 'd':
        device = optarg;
        break;
      case 'D':
        disc = optarg;
        break;
      case 'H':
        hosts = optarg;
        break;
      case 'P':
        peer = optarg;
        break;
      case 'r':
        level = optarg[0] == 'u'   ? VIP_SERVICE_UNRELIABLE
                : optarg[0] == 'r' ? VIP_SERVICE_RELIABLE_RECEPTION
                                   : VIP_SERVICE_RELIABLE_DELIVERY;
        break;
      default:
        return 2;
    }
  }
  const int client = optind < argc && strcmp(argv[optind], "client") == 0;
  if (optind >= argc || (!client && strcmp(argv[optind], "server") != 0) ||
      (client && optind + 1 >= argc) || bytes > (1u << 24) || iters == 0 ||
      strlen(disc) > VIP_MAX_DISCRIMINATOR_LEN) {
    fprintf(stderr,
            "usage: via_pingpong [-s bytes] [-n iterations] [-w warmup] [-d device] "
            "[-D discriminator] [-r u|d|r] [-H hosts] [-P peer NIC] server | client <server NIC>\n"
            "  -P: connect peer to peer (VipConnectPeerRequest) with that NIC, which names this "
            "one\n");
    return 2;
  }
  VIP_NIC_HANDLE nic;
  VIP_PROTECTION_HANDLE tag;
  VIP_RETURN r;
  if ((r = VipOpenNic(device, &nic)) != VIP_SUCCESS) return fail("VipOpenNic", r);
  if ((r = VipNSInit(nic, (VIP_PVOID)hosts)) != VIP_SUCCESS) return fail("VipNSInit", r);
  if ((r = VipCreatePtag(nic, &tag)) != VIP_SUCCESS) return fail("VipCreatePtag", r);
  struct side s;
  memset(&s, 0, sizeof s);
  s.bytes = bytes;
  const size_t block = 2 * 4096 + 2 * (size_t)bytes + 64;
  uint8_t* mem = aligned_alloc(4096, (block + 4095) / 4096 * 4096);
  if (!mem) return 1;
  memset(mem, 0, block);
  s.send = (VIP_DESCRIPTOR*)mem;
  s.recv = (VIP_DESCRIPTOR*)(mem + 4096);
  s.out = mem + 8192;
  s.in = mem + 8192 + bytes + 64;
  VIP_MEM_ATTRIBUTES ma = {tag, VIP_FALSE, VIP_FALSE};
  if ((r = VipRegisterMem(nic, mem, block, &ma, &s.mh)) != VIP_SUCCESS)
    return fail("VipRegisterMem", r);
  VIP_VI_ATTRIBUTES va = {level, 1u << 24, NULL, tag, VIP_FALSE, VIP_FALSE};
  if ((r = VipCreateVi(nic, &va, NULL, NULL, &s.vi)) != VIP_SUCCESS) return fail("VipCreateVi", r);
  if ((r = post_recv(&s)) != VIP_SUCCESS) return fail("VipPostRecv", r);

  _Alignas(8) uint8_t local_buf[VIP_NET_ADDRESS_BYTES], remote_buf[VIP_NET_ADDRESS_BYTES];
  VIP_NET_ADDRESS* local = (VIP_NET_ADDRESS*)local_buf;
  VIP_NET_ADDRESS* remote = (VIP_NET_ADDRESS*)remote_buf;
  VIP_NIC_ATTRIBUTES na;
  VipQueryNic(nic, &na);
  local->HostAddressLen = na.NicAddressLen;
  memcpy(local->HostAddress, na.LocalNicAddress, na.NicAddressLen);
  local->DiscriminatorLen = (VIP_UINT16)strlen(disc);
  memcpy(local->HostAddress + local->HostAddressLen, disc, local->DiscriminatorLen);
  if (peer) {
    if ((r = VipNSGetHostByName(nic, (VIP_CHAR*)peer, remote, 0)) != VIP_SUCCESS)
      return fail("VipNSGetHostByName", r);
    remote->DiscriminatorLen = (VIP_UINT16)strlen(disc);
    memcpy(remote->HostAddress + remote->HostAddressLen, disc, remote->DiscriminatorLen);
    VIP_VI_ATTRIBUTES theirs;
    if ((r = VipConnectPeerRequest(s.vi, local, remote, TIMEOUT_MS)) != VIP_SUCCESS)
      return fail("VipConnectPeerRequest", r);
    if ((r = VipConnectPeerWait(s.vi, &theirs)) != VIP_SUCCESS)
      return fail("VipConnectPeerWait", r);
  } else if (client) {
    if ((r = VipNSGetHostByName(nic, argv[optind + 1], remote, 0)) != VIP_SUCCESS)
      return fail("VipNSGetHostByName", r);
    remote->DiscriminatorLen = (VIP_UINT16)strlen(disc);
    memcpy(remote->HostAddress + remote->HostAddressLen, disc, remote->DiscriminatorLen);
    VIP_VI_ATTRIBUTES theirs;
    if ((r = VipConnectRequest(s.vi, local, remote, TIMEOUT_MS, &theirs)) != VIP_SUCCESS)
      return fail("VipConnectRequest", r);
  } else {
    VIP_CONN_HANDLE conn;
    VIP_VI_ATTRIBUTES theirs;
    if ((r = VipConnectWait(nic, local, TIMEOUT_MS, remote, &theirs, &conn)) != VIP_SUCCESS)
      return fail("VipConnectWait", r);
    if ((r = VipConnectAccept(conn, s.vi)) != VIP_SUCCESS) return fail("VipConnectAccept", r);
  }
  double start = 0, end = 0;
  for (uint32_t i = 0; i < warmup + iters + 1; ++i) {
    if (i == warmup) start = now_us();
    if (i == warmup + iters) end = now_us();
    if (exchange(&s, client, i, i < warmup || i == warmup + iters)) return 1;
  }
  const double one_way = (end - start) / iters / 2;
  if (client)
    printf("via_pingpong bytes=%u iterations=%u one_way_us=%.3f MBps=%.1f\n", bytes, iters, one_way,
           bytes / one_way);
  /* The server leaves last: the client disconnects once its last message is back. */
  if (client) {
    VipDisconnect(s.vi);
  } else {
    VIP_DESCRIPTOR* d;
    VipRecvWait(s.vi, TIMEOUT_MS, &d); /* flushed when the client disconnects */
    VipDisconnect(s.vi);
  }
  VipRecvDone(s.vi, &s.recv);
  VipDestroyVi(s.vi);
  VipDeregisterMem(nic, mem, s.mh);
  VipDestroyPtag(nic, tag);
  VipCloseNic(nic);
  free(mem);
  return 0;
}
