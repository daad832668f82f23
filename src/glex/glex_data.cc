// The data half of include/glex.h (docs/system.md 1.1): devices, registered memory, MPs, RDMA,
// completions and bootstrap. Parameters are checked here, once for every engine; the engine
// (glex/device.h) does the work.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/env.h"
#include "engine/live/segment.h"
#include "fabric/topology.h"
#include "glex.h"
#include "glex/device.h"
#include "glex/provider.h"

#ifdef GALAXY_HAVE_PMIX
#include <pmix.h>
#endif

using galaxy::glex::set_error;

// Engines without the data path (the simulated one) refuse clearly.
#define GALAXY_UNSUPPORTED(what) \
  return set_error(GLEX_UNSUPPORTED, "E6140 " what " is not available on this engine")
glex_ret_t glex_device::register_mem(void*, uint64_t, uint32_t, glex_mem_handle_t*) {
  GALAXY_UNSUPPORTED("memory registration");
}
glex_ret_t glex_device::deregister_mem(glex_mem_handle_t) {
  GALAXY_UNSUPPORTED("memory registration");
}
glex_ret_t glex_device::alloc_mem(uint64_t, void**) {
  GALAXY_UNSUPPORTED("shared memory allocation");
}
glex_ret_t glex_device::free_mem(void*) {
  GALAXY_UNSUPPORTED("shared memory allocation");
}
glex_ret_t glex_device::send_mp(uint8_t, glex_ep_addr_t, const void*, uint32_t, uint32_t) {
  GALAXY_UNSUPPORTED("glex_send_mp");
}
glex_ret_t glex_device::recv_mp(uint8_t, int32_t, glex_mp*) {
  GALAXY_UNSUPPORTED("glex_recv_mp");
}
glex_ret_t glex_device::rdma(uint8_t, const glex_rdma_req&) {
  GALAXY_UNSUPPORTED("RDMA");
}
glex_ret_t glex_device::poll_cq(uint8_t, int32_t, glex_cq_entry*) {
  GALAXY_UNSUPPORTED("the completion queue");
}
glex_ret_t glex_device::fence(uint8_t, int32_t) {
  GALAXY_UNSUPPORTED("glex_fence");
}
glex_ret_t glex_device::wait_event(uint64_t, int32_t, glex_event*) {
  GALAXY_UNSUPPORTED("waiting for an event by the device");
}
glex_ret_t glex_device::post_coll(uint8_t, const galaxy::chip::CollDescriptor&, uint64_t) {
  GALAXY_UNSUPPORTED("the NIC's collective engine");
}
glex_ret_t glex_device::rdma_triggered(uint8_t, const glex_rdma_req&, uint16_t) {
  GALAXY_UNSUPPORTED("a CP-triggered RDMA");
}
// A device without a timing model of its own: a level of a tree costs a few times what a child
// adds, so trees come out a few wide (coll::choose_degree). The simulated device gives its
// calibration's figures instead.
glex_device::CollTiming glex_device::coll_timing() const {
  return {2000000, 300000, 3000000, 600000};
}
glex_ret_t glex_device::resolve_nic(const char*, uint32_t*) {
  GALAXY_UNSUPPORTED("naming NICs");
}
glex_ret_t glex_device::node_name(uint32_t, std::string*) {
  GALAXY_UNSUPPORTED("naming chips");
}

namespace galaxy::glex {

glex_ret_t resolve_nic_in(const fabric::Topology& t, const char* name, uint32_t* chip) {
  auto node = t.resolve(name);
  if (!node.ok()) return set_error(GLEX_INVALID_PARAM, node.error().to_string());
  if (!t.is_nic(*node))
    return set_error(
        GLEX_INVALID_PARAM,
        fmt::format("E6162 glex_resolve_nic: '{}' is chip {} ({}), a router, not a NIC", name,
                    *node, t.name(*node)));
  *chip = *node;
  return GLEX_SUCCESS;
}

glex_ret_t node_name_in(const fabric::Topology& t, uint32_t chip, std::string* name) {
  if (chip >= t.num_nodes())
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6164 glex_node_name: chip {} is not in the fabric ({} chips)",
                                 chip, t.num_nodes()));
  *name = t.name(chip);
  return GLEX_SUCCESS;
}

}  // namespace galaxy::glex

namespace galaxy::glex {
namespace {
std::mutex g_waiters_mutex;
std::vector<glex_device*> g_waiters;
}  // namespace
void add_event_waiter(glex_device* d) {
  std::lock_guard<std::mutex> l(g_waiters_mutex);
  g_waiters.push_back(d);
}
void remove_event_waiter(glex_device* d) {
  std::lock_guard<std::mutex> l(g_waiters_mutex);
  std::erase(g_waiters, d);
}
}  // namespace galaxy::glex

namespace {

constexpr uint32_t kKnownFlags = GLEX_FLAG_FENCE | GLEX_FLAG_INTERRUPT | GLEX_FLAG_LOCAL_CQ |
                                 GLEX_FLAG_REMOTE_EVT | GLEX_FLAG_MORE;

glex_ret_t null_arg(const char* fn, const char* what) {
  return set_error(GLEX_INVALID_PARAM, fmt::format("E6141 {}: {} must not be NULL", fn, what));
}

glex_ret_t check_flags(const char* fn, uint32_t flags) {
  if (flags & ~kKnownFlags)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6142 {}: flags = {:#x} has unknown bits {:#x}", fn, flags,
                                 flags & ~kKnownFlags));
  return GLEX_SUCCESS;
}

#ifdef GALAXY_HAVE_PMIX
glex_ret_t bootstrap_pmix(glex_ep_addr_t me, uint32_t* rank, uint32_t* size,
                          glex_ep_addr_t** addrs) {
  pmix_proc_t proc;
  if (PMIx_Init(&proc, nullptr, 0) != PMIX_SUCCESS)
    return set_error(GLEX_NO_RESOURCE, "E6143 PMIx_Init failed (PMIX_RANK is set)");
  // The launcher expects every process that initialised PMIx to finalise it.
  static const bool finalize_at_exit = [] {
    std::atexit([] { PMIx_Finalize(nullptr, 0); });
    return true;
  }();
  (void)finalize_at_exit;
  pmix_value_t v;
  v.type = PMIX_UINT64;
  v.data.uint64 = me;
  pmix_proc_t wild = proc;
  wild.rank = PMIX_RANK_WILDCARD;
  pmix_value_t* sz = nullptr;
  if (PMIx_Put(PMIX_GLOBAL, "glex.addr", &v) != PMIX_SUCCESS || PMIx_Commit() != PMIX_SUCCESS ||
      PMIx_Get(&wild, PMIX_JOB_SIZE, nullptr, 0, &sz) != PMIX_SUCCESS || !sz)
    return set_error(GLEX_NO_RESOURCE, "E6144 PMIx put/commit/job size failed");
  *size = sz->data.uint32;
  PMIX_VALUE_RELEASE(sz);
  pmix_info_t collect;
  bool yes = true;
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  if (PMIx_Fence(&wild, 1, &collect, 1) != PMIX_SUCCESS)
    return set_error(GLEX_TIMEOUT, "E6145 PMIx_Fence failed");
  *rank = proc.rank;
  *addrs = static_cast<glex_ep_addr_t*>(std::calloc(*size, sizeof(glex_ep_addr_t)));
  for (uint32_t r = 0; r < *size; ++r) {
    pmix_proc_t p = proc;
    p.rank = r;
    pmix_value_t* got = nullptr;
    if (PMIx_Get(&p, "glex.addr", nullptr, 0, &got) != PMIX_SUCCESS || !got) {
      std::free(*addrs);
      *addrs = nullptr;
      return set_error(GLEX_TIMEOUT, fmt::format("E6146 PMIx_Get of rank {}'s address failed", r));
    }
    (*addrs)[r] = got->data.uint64;
    PMIX_VALUE_RELEASE(got);
  }
  return GLEX_SUCCESS;
}
#endif

glex_ret_t bootstrap_env(glex_ep_addr_t me, uint32_t* rank, uint32_t* size,
                         glex_ep_addr_t** addrs) {
  const std::optional<std::string> rank_env = galaxy::env_string("GLEX_RANK"),
                                   size_env = galaxy::env_string("GLEX_SIZE"),
                                   dir_env = galaxy::env_string("GLEX_RENDEZVOUS");
  const char* r = rank_env ? rank_env->c_str() : nullptr;
  const char* s = size_env ? size_env->c_str() : nullptr;
  const char* dir = dir_env ? dir_env->c_str() : nullptr;
  if (!r || !s || !dir)
    return set_error(GLEX_INVALID_PARAM,
                     "E6147 glex_bootstrap needs GLEX_RANK, GLEX_SIZE and GLEX_RENDEZVOUS (a "
                     "directory shared by the job) or a PMIx launcher");
  char* rend = nullptr;
  char* send = nullptr;
  errno = 0;
  unsigned long rk = std::strtoul(r, &rend, 10);
  unsigned long sz = std::strtoul(s, &send, 10);
  if (*r == '\0' || *s == '\0' || *rend != '\0' || *send != '\0' || errno != 0 || r[0] == '-' ||
      s[0] == '-' || sz == 0 || sz > 1000000 || rk >= sz)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6148 GLEX_RANK = '{}' and GLEX_SIZE = '{}': need 0 <= rank < "
                                 "size",
                                 r, s));
  mkdir(dir, 0700);
  const std::string mine = fmt::format("{}/rank.{}", dir, rk);
  {
    std::ofstream out(mine + ".tmp");
    out << fmt::format("{:x}\n", me);
    if (!out) return set_error(GLEX_NO_RESOURCE, fmt::format("E6149 cannot write {}.tmp", mine));
  }
  std::rename((mine + ".tmp").c_str(), mine.c_str());
  auto timeout_ms = galaxy::env_int_or_default("GLEX_BOOTSTRAP_TIMEOUT_MS");
  if (!timeout_ms.ok()) return set_error(GLEX_INVALID_PARAM, timeout_ms.error().to_string());
  const uint64_t deadline =
      galaxy::live::monotonic_ns() + static_cast<uint64_t>(*timeout_ms) * 1000000ull;
  auto* out = static_cast<glex_ep_addr_t*>(std::calloc(sz, sizeof(glex_ep_addr_t)));
  for (unsigned long i = 0; i < sz; ++i) {
    for (;;) {
      std::ifstream in(fmt::format("{}/rank.{}", dir, i));
      std::string line;
      if (in && std::getline(in, line) && !line.empty()) {
        out[i] = std::strtoull(line.c_str(), nullptr, 16);
        break;
      }
      if (galaxy::live::monotonic_ns() > deadline) {
        std::free(out);
        return set_error(
            GLEX_TIMEOUT,
            fmt::format("E6150 rank {} did not publish its address in {} in time", i, dir));
      }
      usleep(1000);
    }
  }
  *rank = static_cast<uint32_t>(rk);
  *size = static_cast<uint32_t>(sz);
  *addrs = out;
  return GLEX_SUCCESS;
}

}  // namespace

extern "C" {

glex_ret_t glex_open_device(const struct glex_device_attr* attr, glex_device_handle_t* dev) {
  if (!dev) return null_arg("glex_open_device", "dev");
  std::string fabric = attr && attr->fabric ? attr->fabric : "";
  if (fabric.empty())
    if (auto e = galaxy::env_string("GLEX_FABRIC")) fabric = *e;
  // The provider of the spec's scheme (glex/provider.h): `sim:` is served by `galaxy simd`,
  // anything else is a live fabric's name.
  auto d = galaxy::glex::provider_for(fabric).factory(fabric, attr && attr->host ? attr->host : "",
                                                      attr ? attr->nic : -1);
  if (!d.ok()) {
    const auto code = d.error().code;
    return set_error(code == galaxy::Code::kNotFound || code == galaxy::Code::kTimeout
                         ? GLEX_UNREACHABLE
                         : GLEX_INVALID_PARAM,
                     d.error().to_string());
  }
  *dev = d->release();
  return GLEX_SUCCESS;
}

glex_ret_t glex_close_device(glex_device_handle_t dev) {
  if (!dev) return null_arg("glex_close_device", "dev");
  delete dev;
  return GLEX_SUCCESS;
}

uint32_t glex_device_node(glex_device_handle_t dev) {
  return dev ? dev->chip_id() : 0;
}

glex_ret_t glex_resolve_nic(glex_device_handle_t dev, const char* name, uint32_t* chip_id) {
  if (!dev || !name || !chip_id) return null_arg("glex_resolve_nic", "dev, name and chip_id");
  const size_t len = strnlen(name, GLEX_NAME_MAX + 1);
  if (len == 0 || len > GLEX_NAME_MAX)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6163 glex_resolve_nic: name of {} bytes (1 to {})",
                                 len > GLEX_NAME_MAX ? "more than " + std::to_string(GLEX_NAME_MAX)
                                                     : std::to_string(len),
                                 GLEX_NAME_MAX));
  return dev->resolve_nic(name, chip_id);
}

glex_ret_t glex_node_name(glex_device_handle_t dev, uint32_t chip_id, char* name, size_t len) {
  if (!dev || !name) return null_arg("glex_node_name", "dev and name");
  std::string n;
  if (const glex_ret_t r = dev->node_name(chip_id, &n); r != GLEX_SUCCESS) return r;
  if (n.size() + 1 > len)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6165 glex_node_name: len = {}: the name of chip {} needs {}",
                                 len, chip_id, n.size() + 1));
  std::memcpy(name, n.c_str(), n.size() + 1);
  return GLEX_SUCCESS;
}

glex_ep_addr_t glex_ep_addr(glex_ep_handle_t ep) {
  return ep ? GLEX_EP_ADDR(ep->device->chip_id(), ep->vp) : 0;
}

glex_ret_t glex_register_mem(glex_device_handle_t dev, void* addr, uint64_t len, uint32_t access,
                             glex_mem_handle_t* mh) {
  if (!dev || !addr || !mh) return null_arg("glex_register_mem", "dev, addr and mh");
  if (len == 0) return set_error(GLEX_INVALID_PARAM, "E6151 glex_register_mem: len = 0");
  if (access == 0 || (access & ~uint32_t{GLEX_MEM_READ | GLEX_MEM_WRITE}))
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6152 glex_register_mem: access = {:#x} (use GLEX_MEM_READ | "
                                 "GLEX_MEM_WRITE)",
                                 access));
  if (reinterpret_cast<uint64_t>(addr) + len < reinterpret_cast<uint64_t>(addr))
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6153 addr + len = {} + {} overflows", addr, len));
  return dev->register_mem(addr, len, access, mh);
}

glex_ret_t glex_deregister_mem(glex_device_handle_t dev, glex_mem_handle_t mh) {
  if (!dev) return null_arg("glex_deregister_mem", "dev");
  return dev->deregister_mem(mh);
}

uint32_t glex_mem_key(glex_device_handle_t dev, glex_mem_handle_t mh) {
  return dev ? dev->descriptor_key(mh) : 0;
}

glex_mem_handle_t glex_mem_handle_of_key(glex_device_handle_t dev, uint32_t key) {
  return dev ? dev->handle_of_key(key) : 0;
}

glex_ret_t glex_alloc_mem(glex_device_handle_t dev, uint64_t len, void** addr) {
  if (!dev || !addr) return null_arg("glex_alloc_mem", "dev and addr");
  if (len == 0 || len > (uint64_t{1} << 40))
    return set_error(GLEX_INVALID_PARAM, fmt::format("E6154 glex_alloc_mem: len = {}", len));
  return dev->alloc_mem(len, addr);
}

glex_ret_t glex_free_mem(glex_device_handle_t dev, void* addr) {
  if (!dev || !addr) return null_arg("glex_free_mem", "dev and addr");
  return dev->free_mem(addr);
}

glex_ret_t glex_send_mp(glex_ep_handle_t ep, glex_ep_addr_t dest, const void* data, uint32_t len,
                        uint32_t flags) {
  if (!ep) return null_arg("glex_send_mp", "ep");
  if (len > GLEX_MP_PAYLOAD)
    return set_error(
        GLEX_INVALID_PARAM,
        fmt::format("E6155 glex_send_mp: len = {} exceeds {} bytes", len, GLEX_MP_PAYLOAD));
  if (len > 0 && !data) return null_arg("glex_send_mp", "data (len > 0)");
  if (flags & GLEX_FLAG_REMOTE_EVT)
    return set_error(GLEX_INVALID_PARAM, "E6156 glex_send_mp: GLEX_FLAG_REMOTE_EVT is for RDMA");
  if (glex_ret_t r = check_flags("glex_send_mp", flags); r != GLEX_SUCCESS) return r;
  return ep->device->send_mp(ep->vp, dest, data, len, flags);
}

glex_ret_t glex_recv_mp(glex_ep_handle_t ep, int32_t timeout_ms, struct glex_mp* mp) {
  if (!ep || !mp) return null_arg("glex_recv_mp", "ep and mp");
  return ep->device->recv_mp(ep->vp, timeout_ms, mp);
}

glex_ret_t glex_rdma(glex_ep_handle_t ep, const struct glex_rdma_req* req) {
  if (!ep || !req) return null_arg("glex_rdma", "ep and req");
  if (req->op != GLEX_OP_PUT && req->op != GLEX_OP_GET && req->op != GLEX_OP_IMM)
    return set_error(
        GLEX_INVALID_PARAM,
        fmt::format("E6157 glex_rdma: op = {} (use GLEX_OP_PUT, GET or IMM)", req->op));
  if (glex_ret_t r = check_flags("glex_rdma", req->flags); r != GLEX_SUCCESS) return r;
  if (req->flags & GLEX_FLAG_MORE)
    return set_error(GLEX_INVALID_PARAM, "E6139 glex_rdma: GLEX_FLAG_MORE is for MPs");
  if (req->op == GLEX_OP_IMM && (req->len < 1 || req->len > GLEX_IMM_MAX))
    return set_error(
        GLEX_INVALID_PARAM,
        fmt::format("E6158 glex_rdma: immediate len = {} outside 1..{}", req->len, GLEX_IMM_MAX));
  if (req->len > 0 && !req->local_addr) return null_arg("glex_rdma", "local_addr (len > 0)");
  if (req->remote_addr + req->len < req->remote_addr)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6159 glex_rdma: remote_addr + len = {:#x} + {} overflows",
                                 req->remote_addr, req->len));
  if ((req->flags & GLEX_FLAG_REMOTE_EVT) && req->event.data[1] == 0)
    return set_error(GLEX_INVALID_PARAM,
                     "E6160 glex_rdma: event.data[1] must be non-zero (it is written last and "
                     "signals the event)");
  return ep->device->rdma(ep->vp, *req);
}

glex_ret_t glex_poll_cq(glex_ep_handle_t ep, struct glex_cq_entry* e) {
  if (!ep || !e) return null_arg("glex_poll_cq", "ep and e");
  return ep->device->poll_cq(ep->vp, 0, e);
}

glex_ret_t glex_wait_cq(glex_ep_handle_t ep, int32_t timeout_ms, struct glex_cq_entry* e) {
  if (!ep || !e) return null_arg("glex_wait_cq", "ep and e");
  return ep->device->poll_cq(ep->vp, timeout_ms, e);
}

glex_ret_t glex_fence(glex_ep_handle_t ep, int32_t timeout_ms) {
  if (!ep) return null_arg("glex_fence", "ep");
  return ep->device->fence(ep->vp, timeout_ms);
}

glex_ret_t glex_wait_event(volatile struct glex_event* evt, int32_t timeout_ms,
                           struct glex_event* out) {
  if (!evt || !out) return null_arg("glex_wait_event", "evt and out");
  glex_device* waiter = nullptr;
  {
    std::lock_guard<std::mutex> l(galaxy::glex::g_waiters_mutex);
    for (glex_device* d : galaxy::glex::g_waiters)
      if (d->holds(reinterpret_cast<uint64_t>(evt))) waiter = d;
    if (!waiter && !galaxy::glex::g_waiters.empty()) waiter = galaxy::glex::g_waiters.front();
  }
  if (waiter) return waiter->wait_event(reinterpret_cast<uint64_t>(evt), timeout_ms, out);
  const uint64_t deadline = timeout_ms < 0 ? UINT64_MAX
                                           : galaxy::live::monotonic_ns() +
                                                 static_cast<uint64_t>(timeout_ms) * 1000000ull;
  auto* w1 = reinterpret_cast<volatile std::atomic<uint64_t>*>(&evt->data[1]);
  for (uint32_t i = 0;; ++i) {
    if (w1->load(std::memory_order_acquire) != 0) break;
    galaxy::live::cpu_relax();
    if ((i & 1023) == 1023) {
      if (galaxy::live::monotonic_ns() >= deadline)
        return set_error(GLEX_TIMEOUT, fmt::format("E6161 no event at {:#x} within {} ms",
                                                   reinterpret_cast<uint64_t>(evt), timeout_ms));
      if (i > 100000) usleep(20);
    }
  }
  out->data[0] = evt->data[0];
  out->data[1] = evt->data[1];
  evt->data[1] = 0;
  evt->data[0] = 0;
  return GLEX_SUCCESS;
}

glex_ret_t glex_bootstrap(glex_ep_handle_t ep, uint32_t* rank, uint32_t* size,
                          glex_ep_addr_t** addrs) {
  if (!ep || !rank || !size || !addrs) return null_arg("glex_bootstrap", "ep, rank, size, addrs");
#ifdef GALAXY_HAVE_PMIX
  if (galaxy::env_string("PMIX_RANK") && !galaxy::env_string("GLEX_RANK"))
    return bootstrap_pmix(glex_ep_addr(ep), rank, size, addrs);
#endif
  return bootstrap_env(glex_ep_addr(ep), rank, size, addrs);
}

}  // extern "C"
