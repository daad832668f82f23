// Domains, memory regions and address vectors (fi_domain(3), fi_mr(3), fi_av(3)). A domain is
// one NIC of the fabric (a glex device); a memory region one registration, whose handle is the
// key a peer names (FI_MR_PROV_KEY) with virtual addresses (FI_MR_VIRT_ADDR).
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "fi_internal.h"

namespace galaxy::fi {
namespace {

int domain_close(fid* f) {
  Domain* d = reinterpret_cast<DomainFid*>(f)->self;
  if (d->refs) return -FI_EBUSY;
  glex_close_device(d->dev);
  --d->fabric->domains;
  delete d;
  return 0;
}

int no_scalable_ep(fid_domain*, fi_info*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
int no_poll_open(fid_domain*, fi_poll_attr*, fid_poll**) {
  return -FI_ENOSYS;
}
int no_stx_ctx(fid_domain*, fi_tx_attr*, fid_stx**, void*) {
  return -FI_ENOSYS;
}
int no_srx_ctx(fid_domain*, fi_rx_attr*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
int no_query_atomic(fid_domain*, fi_datatype, fi_op, fi_atomic_attr*, uint64_t) {
  return -FI_ENOSYS;
}
int no_query_collective(fid_domain*, fi_collective_op, fi_collective_attr*, uint64_t) {
  return -FI_ENOSYS;
}
int endpoint2(fid_domain* d, fi_info* info, fid_ep** ep, uint64_t flags, void* context) {
  if (flags) return -FI_EBADFLAGS;
  return open_endpoint(d, info, ep, context);
}

fi_ops domain_fi_ops = {sizeof(fi_ops), domain_close, no_bind,   no_control,
                        no_ops_open,    no_tostr,     no_ops_set};
fi_ops_domain domain_ops = {
    sizeof(fi_ops_domain), open_av,    open_cq,    open_endpoint,   no_scalable_ep,      open_cntr,
    no_poll_open,          no_stx_ctx, no_srx_ctx, no_query_atomic, no_query_collective, endpoint2};

// ---- Memory regions ----------------------------------------------------------------------------
int mr_close(fid* f) {
  Mr* mr = reinterpret_cast<MrFid*>(f)->self;
  {
    std::lock_guard<std::recursive_mutex> g(mr->domain->lock);
    glex_deregister_mem(mr->domain->dev, mr->mh);
    --mr->domain->refs;
  }
  delete mr;
  return 0;
}
fi_ops mr_fi_ops = {sizeof(fi_ops), mr_close, no_bind,   no_control,
                    no_ops_open,    no_tostr, no_ops_set};

int mr_regv(fid* f, const iovec* iov, size_t count, uint64_t access, uint64_t offset,
            uint64_t requested_key, uint64_t flags, fid_mr** mr, void* context) {
  if (count != 1 || !iov) return -FI_EINVAL;
  return register_mr(f, iov->iov_base, iov->iov_len, access, offset, requested_key, flags, mr,
                     context);
}
int mr_regattr(fid* f, const fi_mr_attr* attr, uint64_t flags, fid_mr** mr) {
  if (!attr) return -FI_EINVAL;
  return mr_regv(f, attr->mr_iov, attr->iov_count, attr->access, attr->offset, attr->requested_key,
                 flags, mr, attr->context);
}
fi_ops_mr mr_ops = {sizeof(fi_ops_mr), register_mr, mr_regv, mr_regattr};

// ---- Address vectors ---------------------------------------------------------------------------
Av* av_of(fid_av* f) {
  return reinterpret_cast<AvFid*>(f)->self;
}

int av_insert(fid_av* f, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags,
              void*) {
  Av* av = av_of(f);
  if (flags) return -FI_EBADFLAGS;
  if (count && !addr) return -FI_EINVAL;
  std::lock_guard<std::recursive_mutex> g(av->domain->lock);
  for (size_t i = 0; i < count; ++i) {
    glex_ep_addr_t a;
    std::memcpy(&a, static_cast<const char*>(addr) + i * kAddrLen, kAddrLen);
    fi_addr_t out = a;
    if (av->type == FI_AV_TABLE) {
      out = av->table.size();
      av->table.push_back(a);
    }
    av->index.emplace(a, out);
    if (fi_addr) fi_addr[i] = out;
  }
  return static_cast<int>(count);
}

int av_insertsvc(fid_av*, const char*, const char*, fi_addr_t*, uint64_t, void*) {
  return -FI_ENOSYS;
}
int av_insertsym(fid_av*, const char*, size_t, const char*, size_t, fi_addr_t*, uint64_t, void*) {
  return -FI_ENOSYS;
}

int av_remove(fid_av* f, fi_addr_t* fi_addr, size_t count, uint64_t) {
  Av* av = av_of(f);
  std::lock_guard<std::recursive_mutex> g(av->domain->lock);
  for (size_t i = 0; i < count; ++i) {
    const glex_ep_addr_t a = av->lookup(fi_addr[i]);
    if (a == Av::kNoAddr) return -FI_EINVAL;
    auto it = av->index.find(a);
    if (it != av->index.end() && it->second == fi_addr[i]) av->index.erase(it);
    if (av->type == FI_AV_TABLE) av->table[fi_addr[i]] = Av::kNoAddr;
  }
  return 0;
}

int av_lookup(fid_av* f, fi_addr_t fi_addr, void* addr, size_t* addrlen) {
  Av* av = av_of(f);
  if (!addrlen) return -FI_EINVAL;
  std::lock_guard<std::recursive_mutex> g(av->domain->lock);
  const glex_ep_addr_t a = av->lookup(fi_addr);
  if (a == Av::kNoAddr) return -FI_EINVAL;
  if (addr) std::memcpy(addr, &a, *addrlen < kAddrLen ? *addrlen : kAddrLen);
  *addrlen = kAddrLen;
  return 0;
}

const char* av_straddr(fid_av*, const void* addr, char* buf, size_t* len) {
  glex_ep_addr_t a;
  std::memcpy(&a, addr, kAddrLen);
  char text[64];
  const int n = std::snprintf(text, sizeof text, "galaxy://nic%" PRIu32 "/vp%" PRIu32,
                              GLEX_EP_ADDR_NODE(a), GLEX_EP_ADDR_VP(a));
  if (buf && len && *len) {
    std::snprintf(buf, *len, "%s", text);
  }
  if (len) *len = static_cast<size_t>(n) + 1;
  return buf;
}

int no_av_set(fid_av*, fi_av_set_attr*, fid_av_set**, void*) {
  return -FI_ENOSYS;
}

fi_ops av_fi_ops = {
    sizeof(fi_ops), close_unbound<AvFid>, no_bind, no_control, no_ops_open, no_tostr, no_ops_set};
fi_ops_av av_ops = {sizeof(fi_ops_av), av_insert, av_insertsvc, av_insertsym,
                    av_remove,         av_lookup, av_straddr,   no_av_set};

}  // namespace

glex_ep_addr_t Av::lookup(fi_addr_t a) const {
  if (a == FI_ADDR_NOTAVAIL || a == FI_ADDR_UNSPEC) return kNoAddr;
  if (type == FI_AV_TABLE) return a < table.size() ? table[a] : kNoAddr;
  return index.count(a) ? a : kNoAddr;
}

fi_addr_t Av::reverse(glex_ep_addr_t a) const {
  auto it = index.find(a);
  return it == index.end() ? FI_ADDR_NOTAVAIL : it->second;
}

int open_domain(fid_fabric* fabric, fi_info* info, fid_domain** out, void* context) {
  Fabric* fab = reinterpret_cast<FabricFid*>(fabric)->self;
  if (!out) return -FI_EINVAL;
  glex_device_attr attr{nullptr, nullptr, -1};
  glex_device_handle_t dev = nullptr;
  if (glex_open_device(&attr, &dev) != GLEX_SUCCESS) {
    FI_WARN(provider(), FI_LOG_DOMAIN, "E6620 fi_domain: no NIC of fabric %s: %s\n",
            fab->name.c_str(), glex_last_error());
    return -FI_ENODEV;
  }
  auto* d = new Domain;
  d->fabric = fab;
  d->dev = dev;
  d->mr_mode = info && info->domain_attr ? static_cast<uint64_t>(info->domain_attr->mr_mode) : 0;
  d->fid.self = d;
  d->fid.domain.fid.fclass = FI_CLASS_DOMAIN;
  d->fid.domain.fid.context = context;
  d->fid.domain.fid.ops = &domain_fi_ops;
  d->fid.domain.ops = &domain_ops;
  d->fid.domain.mr = &mr_ops;
  ++fab->domains;
  *out = &d->fid.domain;
  return 0;
}

int register_mr(fid* f, const void* buf, size_t len, uint64_t access, uint64_t offset,
                uint64_t requested_key, uint64_t flags, fid_mr** out, void* context) {
  Domain* d = reinterpret_cast<DomainFid*>(f)->self;
  (void)requested_key;  // FI_MR_PROV_KEY: the provider chooses the key
  if (f->fclass != FI_CLASS_DOMAIN || !out) return -FI_EINVAL;
  if (flags) return -FI_EBADFLAGS;
  (void)offset;  // FI_MR_VIRT_ADDR: peers name virtual addresses, not offsets
  if (len && !buf) return -FI_EINVAL;
  uint32_t rights = 0;
  if (access & FI_REMOTE_READ) rights |= GLEX_MEM_READ;
  if (access & FI_REMOTE_WRITE) rights |= GLEX_MEM_WRITE;
  if (!rights) rights = GLEX_MEM_READ | GLEX_MEM_WRITE;  // local use: the NIC reads and writes it
  std::lock_guard<std::recursive_mutex> g(d->lock);
  glex_mem_handle_t mh;
  // A zero-length region is legal in libfabric; the NIC registers at least a byte.
  static char empty;
  const glex_ret_t r =
      glex_register_mem(d->dev, len ? const_cast<void*>(buf) : &empty, len ? len : 1, rights, &mh);
  if (r != GLEX_SUCCESS) {
    FI_WARN(provider(), FI_LOG_MR, "E6621 fi_mr_reg of %zu bytes at %p: %s\n", len, buf,
            glex_last_error());
    return r == GLEX_NO_RESOURCE ? -FI_ENOMEM : -fi_error_of(r);
  }
  auto* mr = new Mr;
  mr->domain = d;
  mr->mh = mh;
  mr->base = static_cast<const char*>(buf);
  mr->len = len;
  mr->fid.self = mr;
  mr->fid.mr.fid.fclass = FI_CLASS_MR;
  mr->fid.mr.fid.context = context;
  mr->fid.mr.fid.ops = &mr_fi_ops;
  mr->fid.mr.mem_desc = mr;
  mr->fid.mr.key = mh;
  ++d->refs;
  *out = &mr->fid.mr;
  return 0;
}

int open_av(fid_domain* domain, fi_av_attr* attr, fid_av** out, void* context) {
  Domain* d = reinterpret_cast<DomainFid*>(domain)->self;
  if (!out || !attr) return -FI_EINVAL;
  if (attr->flags & (FI_EVENT | FI_READ | FI_SYMMETRIC)) return -FI_ENOSYS;
  if (attr->rx_ctx_bits) return -FI_ENOSYS;
  if (attr->name) return -FI_ENOSYS;  // no shared address vectors
  auto* av = new Av;
  av->domain = d;
  av->type = attr->type == FI_AV_MAP ? FI_AV_MAP : FI_AV_TABLE;
  if (attr->type == FI_AV_UNSPEC) attr->type = av->type;
  av->table.reserve(attr->count);
  av->fid.self = av;
  av->fid.av.fid.fclass = FI_CLASS_AV;
  av->fid.av.fid.context = context;
  av->fid.av.fid.ops = &av_fi_ops;
  av->fid.av.ops = &av_ops;
  std::lock_guard<std::recursive_mutex> g(d->lock);
  ++d->refs;
  *out = &av->fid.av;
  return 0;
}

}  // namespace galaxy::fi
