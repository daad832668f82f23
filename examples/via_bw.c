/* via_bw: MyVIA's window bandwidth program on Galaxy's VIA (include/via.h; docs/via.md).
 *
 *   via_bw [options] server
 *   via_bw [options] client <server NIC: chip id or hosts-file name>
 *
 * The client streams -n messages (after -w warm-up ones) in windows of -W: it posts a window of
 * sends, the server takes them into receives it posted beforehand, posts the next window's and
 * answers with one short message; bandwidth is the bytes the client sent over the time from its
 * first timed send to the last answer. The first and last bytes of every message are checked.
 *   -s bytes  message size (default 4096)    -n count  messages timed (default 2000)
 *   -w count  warm-up messages (default 200) -W count  window (default 50)
 *   -d device, -D discriminator, -r u|d|r, -H hosts: as via_pingpong
 *   -M seed   MyVIA's message-size mix instead of one size (see mix_size; both ends give the
 *             same seed, so the server knows every message's length; -n and -w multiples of 50)
 * Output, one line: via_bw bytes=<s> messages=<n> window=<W> MBps=<10^6 bytes/s>; with -M:
 *   via_bw mix=<seed> messages=<n> window=<W> mean_bytes=<b> pct_128B_4KiB=<%> pct_over_8KiB=<%>
 *     MBps=<10^6 bytes/s> msgps=<messages/s>  (the percentages are of the timed messages) */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "via.h"

#define TIMEOUT_MS 30000
#define SLOT 128 /* bytes per descriptor */

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int fail(const char* what, VIP_RETURN r) {
  fprintf(stderr, "via_bw: %s: %s (%s)\n", what, VipErrorString(r), VipLastError());
  return 1;
}

/* MyVIA's traffic model (docs/system.md 4; the MyVIA paper, after Gusella): bimodal, over 80% of the
 * messages 128 B - 4 KiB, about 8% over 8 KiB. Every block of 50 messages holds 41 (82%) in
 * [128 B, 4 KiB], 4 (8%) in (8 KiB, 64 KiB], 3 (6%) in [8 B, 128 B) and 2 (4%) in
 * (4 KiB, 8 KiB], in an order that changes from block to block; each size is log-uniform within
 * its class (an octave, then a size in it). Drawn from a hash of (seed, message number), so both
 * ends know every length. */
#define MIX_MAX 65536u
#define MIX_BLOCK 50u
static uint64_t mix_hash(uint64_t x) { /* splitmix64's finaliser */
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
static uint32_t mix_size(uint64_t seed, uint64_t n) {
  /* The message's place in its block, permuted (7 is prime to 50) by an offset per block. */
  const uint64_t turn = mix_hash(seed ^ (n / MIX_BLOCK) * 0x100000001B3ull);
  const unsigned place = (unsigned)((n % MIX_BLOCK * 7 + turn % MIX_BLOCK) % MIX_BLOCK);
  unsigned lo, hi, above; /* sizes in [2^lo, 2^hi), plus `above` */
  if (place < 41) lo = 7, hi = 12, above = 0;       /* 128 B .. 4 KiB */
  else if (place < 45) lo = 13, hi = 16, above = 1; /* over 8 KiB .. 64 KiB */
  else if (place < 48) lo = 3, hi = 7, above = 0;   /* 8 B .. 127 B */
  else lo = 12, hi = 13, above = 1;                 /* over 4 KiB .. 8 KiB */
  const uint64_t h = mix_hash(seed * 0x9E3779B97F4A7C15ull + n);
  const unsigned e = lo + (unsigned)(h % (hi - lo));
  return (1u << e) + (uint32_t)((h >> 16) % (1u << e)) + above;
}

static VIP_DESCRIPTOR* describe(uint8_t* slot, uint8_t* buf, VIP_MEM_HANDLE mh, uint32_t bytes) {
  VIP_DESCRIPTOR* d = (VIP_DESCRIPTOR*)slot;
  memset(d, 0, sizeof *d);
  d->CS.SegCount = 1;
  d->CS.Length = bytes;
  d->DS[0].Local.Data.Address = buf;
  d->DS[0].Local.Handle = mh;
  d->DS[0].Local.Length = bytes;
  return d;
}

int main(int argc, char** argv) {
  uint32_t bytes = 4096, count = 2000, warmup = 200, window = 50;
  const char* device = NULL;
  const char* disc = "via_bw";
  const char* hosts = NULL;
  VIP_RELIABILITY_LEVEL level = VIP_SERVICE_RELIABLE_DELIVERY;
  int mix = 0;
  uint64_t seed = 0;
  int opt;
  while ((opt = getopt(argc, argv, "s:n:w:W:d:D:r:H:M:")) != -1) {
    switch (opt) {
      case 's':
        bytes = (uint32_t)strtoul(optarg, NULL, 0);
        break;
      case 'n':
        count = (uint32_t)strtoul(optarg, NULL, 0);
        break;
      case 'w':
        warmup = (uint32_t)strtoul(optarg, NULL, 0);
        break;
      case 'W':
        window = (uint32_t)strtoul(optarg, NULL, 0);
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
      case 'M':
        mix = 1;
        seed = strtoull(optarg, NULL, 0);
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
      (client && optind + 1 >= argc) || bytes == 0 || bytes > (1u << 24) || count == 0 ||
      window == 0 || window > 256 || count % window || warmup % window ||
      (mix && (count % MIX_BLOCK || warmup % MIX_BLOCK)) ||
      strlen(disc) > VIP_MAX_DISCRIMINATOR_LEN) {
    fprintf(stderr,
            "usage: via_bw [-s bytes] [-n messages] [-w warmup] [-W window (<= 256, "
            "dividing -n and -w)] [-d device] [-D discriminator] [-r u|d|r] [-H hosts] [-M seed "
            "(-n, -w multiples of 50)] "
            "server | client <server NIC>\n");
    return 2;
  }
  if (mix) bytes = MIX_MAX; /* every buffer takes the largest message of the mix */
  VIP_NIC_HANDLE nic;
  VIP_PROTECTION_HANDLE tag;
  VIP_VI_HANDLE vi;
  VIP_MEM_HANDLE mh;
  VIP_RETURN r;
  if ((r = VipOpenNic(device, &nic)) != VIP_SUCCESS) return fail("VipOpenNic", r);
  if ((r = VipNSInit(nic, (VIP_PVOID)hosts)) != VIP_SUCCESS) return fail("VipNSInit", r);
  if ((r = VipCreatePtag(nic, &tag)) != VIP_SUCCESS) return fail("VipCreatePtag", r);
  /* Descriptor slots (a window of receives or sends, and one for the answer), then one buffer
   * per message of a window, then the answer's. */
  const size_t slots = (size_t)(window + 2) * SLOT;
  const size_t block = slots + (size_t)window * bytes + 64;
  uint8_t* mem = aligned_alloc(4096, (block + 4095) / 4096 * 4096);
  if (!mem) return 1;
  memset(mem, 0, block);
  uint8_t* data = mem + slots;
  uint8_t* answer = data + (size_t)window * bytes;
  VIP_MEM_ATTRIBUTES ma = {tag, VIP_FALSE, VIP_FALSE};
  if ((r = VipRegisterMem(nic, mem, block, &ma, &mh)) != VIP_SUCCESS)
    return fail("VipRegisterMem", r);
  VIP_VI_ATTRIBUTES va = {level, 1u << 24, NULL, tag, VIP_FALSE, VIP_FALSE};
  if ((r = VipCreateVi(nic, &va, NULL, NULL, &vi)) != VIP_SUCCESS) return fail("VipCreateVi", r);
  /* Receives before the connection: the server's first window, the client's first answer. */
  if (client) {
    r = VipPostRecv(vi, describe(mem + (size_t)window * SLOT, answer, mh, 8), mh);
  } else {
    for (uint32_t i = 0; i < window && r == VIP_SUCCESS; ++i)
      r = VipPostRecv(vi, describe(mem + i * SLOT, data + (size_t)i * bytes, mh, bytes), mh);
  }
  if (r != VIP_SUCCESS) return fail("VipPostRecv", r);

  _Alignas(8) uint8_t local_buf[VIP_NET_ADDRESS_BYTES], remote_buf[VIP_NET_ADDRESS_BYTES];
  VIP_NET_ADDRESS* local = (VIP_NET_ADDRESS*)local_buf;
  VIP_NET_ADDRESS* remote = (VIP_NET_ADDRESS*)remote_buf;
  VIP_NIC_ATTRIBUTES na;
  VipQueryNic(nic, &na);
  local->HostAddressLen = na.NicAddressLen;
  memcpy(local->HostAddress, na.LocalNicAddress, na.NicAddressLen);
  local->DiscriminatorLen = (VIP_UINT16)strlen(disc);
  memcpy(local->HostAddress + local->HostAddressLen, disc, local->DiscriminatorLen);
  VIP_VI_ATTRIBUTES theirs;
  if (client) {
    if ((r = VipNSGetHostByName(nic, argv[optind + 1], remote, 0)) != VIP_SUCCESS)
      return fail("VipNSGetHostByName", r);
    remote->DiscriminatorLen = (VIP_UINT16)strlen(disc);
    memcpy(remote->HostAddress + remote->HostAddressLen, disc, remote->DiscriminatorLen);
    if ((r = VipConnectRequest(vi, local, remote, TIMEOUT_MS, &theirs)) != VIP_SUCCESS)
      return fail("VipConnectRequest", r);
  } else {
    VIP_CONN_HANDLE conn;
    if ((r = VipConnectWait(nic, local, TIMEOUT_MS, remote, &theirs, &conn)) != VIP_SUCCESS)
      return fail("VipConnectWait", r);
    if ((r = VipConnectAccept(conn, vi)) != VIP_SUCCESS) return fail("VipConnectAccept", r);
  }
  VIP_DESCRIPTOR* d;
  double start = 0;
  uint64_t timed_bytes = 0, timed_mid = 0, timed_large = 0;
  const uint32_t rounds = (warmup + count) / window;
  for (uint32_t round = 0; round < rounds; ++round) {
    if (round * window == warmup) start = now_us();
    if (client) {
      for (uint32_t i = 0; i < window; ++i) {
        uint8_t* buf = data + (size_t)i * bytes;
        const uint32_t len = mix ? mix_size(seed, (uint64_t)round * window + i) : bytes;
        buf[0] = (uint8_t)round;
        if (len > 1) buf[len - 1] = (uint8_t)(round + i);
        if (round * window >= warmup) {
          timed_bytes += len;
          timed_mid += len >= 128 && len <= 4096;
          timed_large += len > 8192;
        }
        if ((r = VipPostSend(vi, describe(mem + i * SLOT, buf, mh, len), mh)) != VIP_SUCCESS)
          return fail("VipPostSend", r);
      }
      for (uint32_t i = 0; i < window; ++i)
        if ((r = VipSendWait(vi, TIMEOUT_MS, &d)) != VIP_SUCCESS) return fail("VipSendWait", r);
      if ((r = VipRecvWait(vi, TIMEOUT_MS, &d)) != VIP_SUCCESS) return fail("VipRecvWait", r);
      if ((r = VipPostRecv(vi, describe(mem + (size_t)window * SLOT, answer, mh, 8), mh)) !=
          VIP_SUCCESS)
        return fail("VipPostRecv", r);
    } else {
      for (uint32_t i = 0; i < window; ++i) {
        if ((r = VipRecvWait(vi, TIMEOUT_MS, &d)) != VIP_SUCCESS) return fail("VipRecvWait", r);
        uint8_t* buf = data + (size_t)i * bytes;
        const uint32_t len = mix ? mix_size(seed, (uint64_t)round * window + i) : bytes;
        if (d->CS.Length != len || buf[0] != (uint8_t)round ||
            (len > 1 && buf[len - 1] != (uint8_t)(round + i))) {
          fprintf(stderr, "via_bw: round %u message %u: wrong length or bytes\n", round, i);
          return 1;
        }
      }
      for (uint32_t i = 0; i < window; ++i)
        if ((r = VipPostRecv(vi, describe(mem + i * SLOT, data + (size_t)i * bytes, mh, bytes),
                             mh)) != VIP_SUCCESS)
          return fail("VipPostRecv", r);
      if ((r = VipPostSend(vi, describe(mem + (size_t)(window + 1) * SLOT, answer, mh, 8), mh)) !=
          VIP_SUCCESS)
        return fail("VipPostSend", r);
      if ((r = VipSendWait(vi, TIMEOUT_MS, &d)) != VIP_SUCCESS) return fail("VipSendWait", r);
    }
  }
  const double us = now_us() - start;
  if (client && mix)
    printf(
        "via_bw mix=%llu messages=%u window=%u mean_bytes=%.0f pct_128B_4KiB=%.1f "
        "pct_over_8KiB=%.1f MBps=%.1f msgps=%.0f\n",
        (unsigned long long)seed, count, window, (double)timed_bytes / count,
        100.0 * (double)timed_mid / count, 100.0 * (double)timed_large / count,
        (double)timed_bytes / us, count / us * 1e6);
  else if (client)
    printf("via_bw bytes=%u messages=%u window=%u MBps=%.1f\n", bytes, count, window,
           (double)bytes * count / us);
  VipDisconnect(vi);
  for (;;) { /* the receives still posted come back flushed */
    VIP_RETURN rr = VipRecvDone(vi, &d);
    if (rr != VIP_SUCCESS && rr != VIP_DESCRIPTOR_ERROR) break;
  }
  VipDestroyVi(vi);
  VipDeregisterMem(nic, mem, mh);
  VipDestroyPtag(nic, tag);
  VipCloseNic(nic);
  free(mem);
  return 0;
}
