// VIA NIC calls: open and close, attributes, protection tags, memory registration (the
// user-level registration table), the error callback and the name service (docs/via.md).
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "via/via_internal.h"

namespace galaxy::via {
namespace {

thread_local std::string g_last_error;

// "fabric[#host=h][#nic=n]" -> the device's attributes.
bool parse_device(const char* name, std::string* fabric, std::string* host, int32_t* nic) {
  *nic = -1;
  if (!name || !*name) return true;
  std::string s(name);
  size_t hash = s.find('#');
  *fabric = s.substr(0, hash);
  while (hash != std::string::npos) {
    const size_t next = s.find('#', hash + 1);
    const std::string part = s.substr(hash + 1, next == std::string::npos ? next : next - hash - 1);
    if (part.rfind("host=", 0) == 0) {
      *host = part.substr(5);
    } else if (part.rfind("nic=", 0) == 0) {
      char* end = nullptr;
      const long v = std::strtol(part.c_str() + 4, &end, 0);
      if (*end || v < 0 || v > GLEX_MAX_NODE) return false;
      *nic = static_cast<int32_t>(v);
    } else {
      return false;
    }
    hash = next;
  }
  return true;
}

}  // namespace

uint32_t random_u32() {
  static thread_local std::mt19937 gen{std::random_device{}()};
  uint32_t v = 0;
  while (v == 0) v = static_cast<uint32_t>(gen());
  return v;
}

VIP_RETURN fail(VIP_RETURN ret, std::string message) {
  g_last_error = std::move(message);
  return ret;
}

VIP_RETURN from_glex(glex_ret_t r) {
  switch (r) {
    case GLEX_SUCCESS:
      return VIP_SUCCESS;
    case GLEX_INVALID_PARAM:
      return VIP_INVALID_PARAMETER;
    case GLEX_NO_RESOURCE:
    case GLEX_BUSY:
      return VIP_ERROR_RESOURCE;
    case GLEX_TIMEOUT:
      return VIP_TIMEOUT;
    case GLEX_UNREACHABLE:
    case GLEX_PEER_DEAD:
      return VIP_NOT_REACHABLE;
    case GLEX_UNSUPPORTED:
      return VIP_ERROR_NOT_SUPPORTED;
    default:
      return VIP_DESCRIPTOR_ERROR;
  }
}

void Nic::report(via_vi* vi, VIP_DESCRIPTOR* d, VIP_RESOURCE_CODE resource, VIP_ERROR_CODE code) {
  VIP_ERROR_DESCRIPTOR e{};
  e.NicHandle = static_cast<via_nic*>(this);
  e.ViHandle = vi;
  e.DescriptorPtr = d;
  e.OpCode = d ? (d->CS.Control & VIP_CONTROL_OP_MASK) : 0;
  e.ResourceCode = resource;
  e.ErrorCode = code;
  if (handler) {
    handler(handler_context, &e);
    return;
  }
  // The default handler: one line per asynchronous error, as VIA's is left to the provider.
  std::fprintf(stderr, "E6500 VIA asynchronous error %d on VI %p (resource %d)\n",
               static_cast<int>(code), static_cast<void*>(vi), static_cast<int>(resource));
}

}  // namespace galaxy::via

using namespace galaxy::via;

extern "C" {

const char* VipLastError(void) {
  return g_last_error.c_str();
}

const char* VipErrorString(VIP_RETURN ret) {
  static const char* const kNames[] = {"VIP_SUCCESS",
                                       "VIP_NOT_DONE",
                                       "VIP_INVALID_PARAMETER",
                                       "VIP_ERROR_RESOURCE",
                                       "VIP_TIMEOUT",
                                       "VIP_REJECT",
                                       "VIP_INVALID_RELIABILITY_LEVEL",
                                       "VIP_INVALID_MTU",
                                       "VIP_INVALID_QOS",
                                       "VIP_INVALID_PTAG",
                                       "VIP_INVALID_RDMAREAD",
                                       "VIP_DESCRIPTOR_ERROR",
                                       "VIP_INVALID_STATE",
                                       "VIP_ERROR_NAMESERVICE",
                                       "VIP_NO_MATCH",
                                       "VIP_NOT_REACHABLE",
                                       "VIP_ERROR_NOT_SUPPORTED"};
  const auto i = static_cast<size_t>(ret);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "unknown VIP_RETURN";
}

VIP_RETURN VipOpenNic(const VIP_CHAR* DeviceName, VIP_NIC_HANDLE* NicHandle) {
  if (!NicHandle) return fail(VIP_INVALID_PARAMETER, "E6501 VipOpenNic: NicHandle is NULL");
  std::string fabric, host;
  int32_t nic_id = -1;
  if (!parse_device(DeviceName, &fabric, &host, &nic_id))
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6502 VipOpenNic: DeviceName = \"{}\": use <fabric>[#host=<h>]"
                            "[#nic=<chip id>]",
                            DeviceName));
  glex_device_attr a{fabric.empty() ? nullptr : fabric.c_str(),
                     host.empty() ? nullptr : host.c_str(), nic_id};
  glex_device_handle_t dev = nullptr;
  if (glex_ret_t r = glex_open_device(&a, &dev); r != GLEX_SUCCESS)
    return fail(r == GLEX_INVALID_PARAM ? VIP_INVALID_PARAMETER : VIP_NOT_REACHABLE,
                fmt::format("E6503 VipOpenNic: {}", glex_last_error()));
  const VIP_RETURN r = open_nic_on(dev, NicHandle);
  if (r != VIP_SUCCESS) {
    glex_close_device(dev);
    return r;
  }
  (*NicHandle)->owns_device = true;
  return VIP_SUCCESS;
}

}  // extern "C"

VIP_RETURN galaxy::via::open_nic_on(glex_device_handle_t dev, VIP_NIC_HANDLE* out) {
  auto n = std::make_unique<via_nic>();
  n->dev = dev;
  // The connection manager takes VP 7 where it is free (the name service's addresses name it);
  // a second NIC handle of the same NIC takes another and is reached by its own address.
  glex_ep_attr ea{kCmVp};
  if (glex_create_ep(n->dev, &ea, &n->cm) != GLEX_SUCCESS) {
    ea.vp = -1;
    if (glex_ret_t r = glex_create_ep(n->dev, &ea, &n->cm); r != GLEX_SUCCESS)
      return fail(VIP_ERROR_RESOURCE, fmt::format("E6504 VipOpenNic: {}", glex_last_error()));
  }
  const glex_ep_addr_t cm = glex_ep_addr(n->cm);
  std::memcpy(n->address.data(), &cm, sizeof cm);
  *out = n.release();
  return VIP_SUCCESS;
}

extern "C" {

VIP_RETURN VipCloseNic(VIP_NIC_HANDLE nic) {
  if (!nic) return fail(VIP_INVALID_PARAMETER, "E6505 VipCloseNic: NicHandle is NULL");
  stop_notifier(nic);
  {
    std::lock_guard lock(nic->mu);
    // The peers learn the connections end; the descriptors are not touched (the program may
    // have freed them).
    for (auto& vi : nic->vis) {
      end_connection(vi.get(), Kind::kDisconnect);
      free_bounce(vi.get());
      glex_destroy_ep(vi->ep);
    }
    for (auto& [h, r] : nic->regions) {
      glex_deregister_mem(nic->dev, r.own_mh);
      if (r.remote_mh) glex_deregister_mem(nic->dev, *r.remote_mh);
    }
    glex_destroy_ep(nic->cm);
    if (nic->owns_device) glex_close_device(nic->dev);
  }
  delete nic;
  return VIP_SUCCESS;
}

VIP_RETURN VipQueryNic(VIP_NIC_HANDLE nic, VIP_NIC_ATTRIBUTES* a) {
  if (!nic || !a) return fail(VIP_INVALID_PARAMETER, "E6506 VipQueryNic: a handle is NULL");
  std::lock_guard lock(nic->mu);
  *a = {};
  std::snprintf(a->Name, sizeof a->Name, "galaxy nic %u", glex_device_node(nic->dev));
  a->HardwareVersion = 1;
  a->ProviderVersion = 1;
  a->NicAddressLen = VIP_HOST_ADDRESS_LEN;
  a->LocalNicAddress = nic->address.data();
  a->ThreadSafe = VIP_TRUE;
  a->MaxDiscriminatorLen = VIP_MAX_DISCRIMINATOR_LEN;
  a->MaxRegisterBytes = kMaxTransfer;
  a->MaxRegisterRegions = kMaxRegions;
  a->MaxRegisterBlockBytes = kMaxTransfer;
  a->MaxVI = 39;  // the NIC's 40 VPs less the connection manager's
  a->MaxDescriptorsPerQueue = kMaxQueued;
  a->MaxSegmentsPerDesc = kMaxSegments;
  a->MaxCQ = 1024;
  a->MaxCQEntries = kMaxCqEntries;
  a->MaxTransferSize = kMaxTransfer;
  a->NativeMTU = GLEX_MP_PAYLOAD;
  a->MaxPtags = 1024;
  a->ReliabilityLevelSupport =
      VIP_SERVICE_UNRELIABLE | VIP_SERVICE_RELIABLE_DELIVERY | VIP_SERVICE_RELIABLE_RECEPTION;
  a->RDMAReadSupport = a->ReliabilityLevelSupport;
  return VIP_SUCCESS;
}

VIP_RETURN VipCreatePtag(VIP_NIC_HANDLE nic, VIP_PROTECTION_HANDLE* tag) {
  if (!nic || !tag) return fail(VIP_INVALID_PARAMETER, "E6507 VipCreatePtag: a handle is NULL");
  std::lock_guard lock(nic->mu);
  if (nic->ptags.size() >= 1024)
    return fail(VIP_ERROR_RESOURCE, "E6508 VipCreatePtag: 1024 tags exist");
  nic->ptags.push_back(std::make_unique<via_ptag>(via_ptag{nic, random_u32(), 0}));
  *tag = nic->ptags.back().get();
  return VIP_SUCCESS;
}

VIP_RETURN VipDestroyPtag(VIP_NIC_HANDLE nic, VIP_PROTECTION_HANDLE tag) {
  if (!nic) return fail(VIP_INVALID_PARAMETER, "E6509 VipDestroyPtag: NicHandle is NULL");
  std::lock_guard lock(nic->mu);
  for (auto it = nic->ptags.begin(); it != nic->ptags.end(); ++it) {
    if (it->get() != tag) continue;
    if (tag->users)
      return fail(VIP_INVALID_STATE,
                  fmt::format("E6510 VipDestroyPtag: the tag is still held by {} VIs and "
                              "registrations",
                              tag->users));
    nic->ptags.erase(it);
    return VIP_SUCCESS;
  }
  return fail(VIP_INVALID_PTAG, "E6511 VipDestroyPtag: not a tag of this NIC");
}

VIP_RETURN VipRegisterMem(VIP_NIC_HANDLE nic, VIP_PVOID addr, VIP_ULONG len,
                          VIP_MEM_ATTRIBUTES* attrs, VIP_MEM_HANDLE* out) {
  if (!nic || !addr || !attrs || !out)
    return fail(VIP_INVALID_PARAMETER, "E6512 VipRegisterMem: a handle or pointer is NULL");
  std::lock_guard lock(nic->mu);
  if (len == 0 || len > kMaxTransfer)
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6513 VipRegisterMem: Length = {} (1..{})", len, kMaxTransfer));
  via_ptag* tag = attrs->Ptag;
  bool ours = false;
  for (auto& t : nic->ptags) ours = ours || t.get() == tag;
  if (!ours) return fail(VIP_INVALID_PTAG, "E6514 VipRegisterMem: Ptag is not a tag of this NIC");
  if (nic->regions.size() >= kMaxRegions)
    return fail(VIP_ERROR_RESOURCE,
                fmt::format("E6515 VipRegisterMem: {} regions are registered", kMaxRegions));
  Region r;
  r.addr = reinterpret_cast<uintptr_t>(addr);
  r.len = len;
  r.ptag = tag;
  r.write = attrs->EnableRdmaWrite != VIP_FALSE;
  r.read = attrs->EnableRdmaRead != VIP_FALSE;
  if (glex_ret_t g =
          glex_register_mem(nic->dev, addr, len, GLEX_MEM_READ | GLEX_MEM_WRITE, &r.own_mh);
      g != GLEX_SUCCESS)
    return fail(from_glex(g), fmt::format("E6516 VipRegisterMem: {}", glex_last_error()));
  // The handle the user passes to peers: the key of a registration with the rights the user
  // gave, scrambled by the tag's secret. A peer's VI unscrambles it with the secret of its own
  // tag, learnt when it connected: a VI of another tag names a key the NIC refuses.
  VIP_MEM_HANDLE h = 0;
  if (r.write || r.read) {
    glex_mem_handle_t mh = 0;
    const uint32_t access = (r.write ? GLEX_MEM_WRITE : 0) | (r.read ? GLEX_MEM_READ : 0);
    if (glex_ret_t g = glex_register_mem(nic->dev, addr, len, access, &mh); g != GLEX_SUCCESS) {
      glex_deregister_mem(nic->dev, r.own_mh);
      return fail(from_glex(g), fmt::format("E6517 VipRegisterMem: {}", glex_last_error()));
    }
    r.remote_mh = mh;
    h = glex_mem_key(nic->dev, mh) ^ tag->secret;
  }
  while (h == 0 || nic->regions.count(h)) h = random_u32();  // no peer access: any unused name
  ++tag->users;
  nic->regions.emplace(h, r);
  *out = h;
  return VIP_SUCCESS;
}

VIP_RETURN VipDeregisterMem(VIP_NIC_HANDLE nic, VIP_PVOID addr, VIP_MEM_HANDLE h) {
  if (!nic) return fail(VIP_INVALID_PARAMETER, "E6518 VipDeregisterMem: NicHandle is NULL");
  std::lock_guard lock(nic->mu);
  auto it = nic->regions.find(h);
  if (it == nic->regions.end() || it->second.addr != reinterpret_cast<uintptr_t>(addr))
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6519 VipDeregisterMem: MemHandle = {:#x} at {} is not a "
                            "registration of this NIC",
                            h, addr));
  glex_deregister_mem(nic->dev, it->second.own_mh);
  if (it->second.remote_mh) glex_deregister_mem(nic->dev, *it->second.remote_mh);
  --it->second.ptag->users;
  nic->regions.erase(it);
  return VIP_SUCCESS;
}

VIP_RETURN VipQueryMem(VIP_NIC_HANDLE nic, VIP_PVOID addr, VIP_MEM_HANDLE h,
                       VIP_MEM_ATTRIBUTES* attrs) {
  if (!nic || !attrs) return fail(VIP_INVALID_PARAMETER, "E6520 VipQueryMem: a handle is NULL");
  std::lock_guard lock(nic->mu);
  const Region* r = nic->region(h);
  if (!r || r->addr != reinterpret_cast<uintptr_t>(addr))
    return fail(
        VIP_INVALID_PARAMETER,
        fmt::format("E6521 VipQueryMem: MemHandle = {:#x} at {} is not a registration", h, addr));
  *attrs = {r->ptag, r->write ? VIP_TRUE : VIP_FALSE, r->read ? VIP_TRUE : VIP_FALSE};
  return VIP_SUCCESS;
}

VIP_RETURN VipErrorCallback(VIP_NIC_HANDLE nic, VIP_PVOID context, VIP_ERROR_HANDLER handler) {
  if (!nic) return fail(VIP_INVALID_PARAMETER, "E6522 VipErrorCallback: NicHandle is NULL");
  std::lock_guard lock(nic->mu);
  nic->handler = handler;
  nic->handler_context = context;
  return VIP_SUCCESS;
}

VIP_RETURN VipNSInit(VIP_NIC_HANDLE nic, VIP_PVOID info) {
  if (!nic) return fail(VIP_INVALID_PARAMETER, "E6523 VipNSInit: NicHandle is NULL");
  std::lock_guard lock(nic->mu);
  nic->hosts.clear();
  if (!info) return VIP_SUCCESS;
  const char* path = static_cast<const char*>(info);
  std::ifstream in(path);
  if (!in) return fail(VIP_ERROR_NAMESERVICE, fmt::format("E6524 VipNSInit: cannot read {}", path));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const size_t c = line.find('#'); c != std::string::npos) line.resize(c);
    std::istringstream ls(line);
    std::string name, id, extra;
    if (!(ls >> name)) continue;
    char* end = nullptr;
    const long v = (ls >> id) ? std::strtol(id.c_str(), &end, 0) : -1;
    if (id.empty() || *end || v < 0 || v > GLEX_MAX_NODE || (ls >> extra)) {
      nic->hosts.clear();
      return fail(VIP_ERROR_NAMESERVICE,
                  fmt::format("E6525 VipNSInit: {} line {}: \"{}\": want <name> <NIC chip id>",
                              path, n, line));
    }
    nic->hosts[name] = static_cast<uint32_t>(v);
  }
  return VIP_SUCCESS;
}

VIP_RETURN VipNSGetHostByName(VIP_NIC_HANDLE nic, VIP_CHAR* name, VIP_NET_ADDRESS* address,
                              VIP_ULONG index) {
  if (!nic || !name || !address)
    return fail(VIP_INVALID_PARAMETER, "E6526 VipNSGetHostByName: a handle is NULL");
  std::lock_guard lock(nic->mu);
  // The hosts file given to VipNSInit first, then the fabric's own names for its NICs: chip id,
  // nic:<index>, name, NodeDescription or GUID (glex_resolve_nic).
  uint32_t chip = 0;
  if (auto it = nic->hosts.find(name); it != nic->hosts.end()) {
    chip = it->second;
  } else if (glex_resolve_nic(nic->dev, name, &chip) != GLEX_SUCCESS) {
    return fail(
        VIP_ERROR_NAMESERVICE,
        fmt::format("E6527 VipNSGetHostByName: no host named \"{}\": {}", name, glex_last_error()));
  }
  if (index != 0)
    return fail(
        VIP_ERROR_NAMESERVICE,
        fmt::format("E6528 VipNSGetHostByName: NameIndex = {}: a host has one address", index));
  const glex_ep_addr_t a = GLEX_EP_ADDR(chip, kCmVp);
  address->HostAddressLen = VIP_HOST_ADDRESS_LEN;
  address->DiscriminatorLen = 0;
  std::memcpy(address->HostAddress, &a, sizeof a);
  return VIP_SUCCESS;
}

VIP_RETURN VipNSGetHostByAddr(VIP_NIC_HANDLE nic, VIP_NET_ADDRESS* address, VIP_CHAR* name,
                              VIP_ULONG* name_len) {
  if (!nic || !address || !name || !name_len)
    return fail(VIP_INVALID_PARAMETER, "E6536 VipNSGetHostByAddr: a handle is NULL");
  if (!valid_address(address))
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6537 VipNSGetHostByAddr: Address has HostAddressLen {} (want {})",
                            address->HostAddressLen, VIP_HOST_ADDRESS_LEN));
  std::lock_guard lock(nic->mu);
  const uint32_t chip = GLEX_EP_ADDR_NODE(host_of(address));
  std::string found;
  for (const auto& [n, c] : nic->hosts)
    if (c == chip && (found.empty() || n < found)) found = n;
  if (found.empty()) {
    char buf[GLEX_NAME_MAX + 1];
    if (glex_node_name(nic->dev, chip, buf, sizeof buf) != GLEX_SUCCESS)
      return fail(VIP_ERROR_NAMESERVICE,
                  fmt::format("E6538 VipNSGetHostByAddr: NIC {}: {}", chip, glex_last_error()));
    found = buf;
  }
  const VIP_ULONG room = *name_len;
  *name_len = static_cast<VIP_ULONG>(found.size() + 1);
  if (found.size() + 1 > room)
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6539 VipNSGetHostByAddr: NameLen = {}: \"{}\" needs {} bytes", room,
                            found, found.size() + 1));
  std::memcpy(name, found.c_str(), found.size() + 1);
  return VIP_SUCCESS;
}

VIP_RETURN VipNSShutdown(VIP_NIC_HANDLE nic) {
  if (!nic) return fail(VIP_INVALID_PARAMETER, "E6529 VipNSShutdown: NicHandle is NULL");
  std::lock_guard lock(nic->mu);
  nic->hosts.clear();
  return VIP_SUCCESS;
}

}  // extern "C"
