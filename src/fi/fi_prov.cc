// The provider itself (fi_provider(7)): what libfabric loads from FI_PROVIDER_PATH
// (libgalaxy-fi.so exports fi_prov_ini and nothing else), what fi_getinfo answers, and the
// fabric object.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fi_internal.h"

namespace galaxy::fi {
namespace {

constexpr uint64_t kPrimaryCaps = FI_MSG | FI_TAGGED | FI_RMA;
constexpr uint64_t kSecondaryCaps = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
                                    FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM |
                                    FI_REMOTE_COMM;
constexpr uint64_t kCaps = kPrimaryCaps | kSecondaryCaps;
// Memory registration: peers name a region by the key the provider chose and by virtual address.
constexpr uint64_t kMrModeRma = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
constexpr uint64_t kMsgOrder =
    FI_ORDER_SAS | FI_ORDER_RAS | FI_ORDER_WAS | FI_ORDER_SAW | FI_ORDER_SAR;

fi_provider g_provider;  // filled in by fi_prov_ini

int no_passive_ep(fid_fabric*, fi_info*, fid_pep**, void*) {
  return -FI_ENOSYS;
}
// An event queue: a reliable-datagram endpoint has no connection events, so it stays empty;
// applications that open one for every endpoint type (fi_pingpong) can open and close it.
struct EqFid {
  fid_eq eq;
};
ssize_t eq_read(fid_eq*, uint32_t*, void*, size_t, uint64_t) {
  return -FI_EAGAIN;
}
ssize_t eq_readerr(fid_eq*, fi_eq_err_entry*, uint64_t) {
  return -FI_EAGAIN;
}
ssize_t eq_write(fid_eq*, uint32_t, const void*, size_t, uint64_t) {
  return -FI_ENOSYS;
}
ssize_t eq_sread(fid_eq*, uint32_t*, void*, size_t, int, uint64_t) {
  return -FI_EAGAIN;
}
const char* eq_strerror(fid_eq*, int prov_errno, const void*, char* buf, size_t len) {
  if (buf && len) std::snprintf(buf, len, "%s", fi_strerror(prov_errno));
  return buf ? buf : fi_strerror(prov_errno);
}
int eq_close(fid* f) {
  delete reinterpret_cast<EqFid*>(f);
  return 0;
}
fi_ops eq_fi_ops = {sizeof(fi_ops), eq_close, no_bind,   no_control,
                    no_ops_open,    no_tostr, no_ops_set};
fi_ops_eq eq_ops = {sizeof(fi_ops_eq), eq_read, eq_readerr, eq_write, eq_sread, eq_strerror};
int eq_open(fid_fabric*, fi_eq_attr* attr, fid_eq** out, void* context) {
  if (!out) return -FI_EINVAL;
  if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) return -FI_ENOSYS;
  auto* eq = new EqFid{};
  eq->eq.fid.fclass = FI_CLASS_EQ;
  eq->eq.fid.context = context;
  eq->eq.fid.ops = &eq_fi_ops;
  eq->eq.ops = &eq_ops;
  *out = &eq->eq;
  return 0;
}
int no_wait_open(fid_fabric*, fi_wait_attr*, fid_wait**) {
  return -FI_ENOSYS;
}
int trywait(fid_fabric*, fid**, int) {
  return 0;
}
int domain2(fid_fabric* f, fi_info* info, fid_domain** d, uint64_t flags, void* context) {
  if (flags) return -FI_EBADFLAGS;
  return open_domain(f, info, d, context);
}

int fabric_close(fid* f) {
  Fabric* fab = reinterpret_cast<FabricFid*>(f)->self;
  if (fab->domains) return -FI_EBUSY;
  delete fab;
  return 0;
}

fi_ops fabric_fi_ops = {sizeof(fi_ops), fabric_close, no_bind,   no_control,
                        no_ops_open,    no_tostr,     no_ops_set};
fi_ops_fabric fabric_ops = {sizeof(fi_ops_fabric), open_domain, no_passive_ep, eq_open,
                            no_wait_open,          trywait,     domain2};

int open_fabric(fi_fabric_attr* attr, fid_fabric** out, void* context) {
  if (!out) return -FI_EINVAL;
  if (attr && attr->name && std::strcmp(attr->name, kProviderName) != 0) return -FI_ENODATA;
  auto* fab = new Fabric;
  fab->name = kProviderName;
  fab->fid.self = fab;
  fab->fid.fabric.fid.fclass = FI_CLASS_FABRIC;
  fab->fid.fabric.fid.context = context;
  fab->fid.fabric.fid.ops = &fabric_fi_ops;
  fab->fid.fabric.ops = &fabric_ops;
  fab->fid.fabric.api_version = attr ? attr->api_version : kApiVersion;
  *out = &fab->fid.fabric;
  return 0;
}

// Why a hint cannot be met, for the log (FI_LOG_LEVEL=info), or nullptr.
const char* refuse(uint32_t version, const fi_info* h) {
  if (!h) return nullptr;
  if (h->caps & ~kCaps) return "capabilities beyond FI_MSG, FI_TAGGED, FI_RMA and their modifiers";
  if (h->ep_attr && h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != FI_EP_RDM)
    return "endpoint type (FI_EP_RDM only)";
  if (h->addr_format != FI_FORMAT_UNSPEC) return "address format (the provider's own only)";
  if (h->fabric_attr && h->fabric_attr->name &&
      std::strcmp(h->fabric_attr->name, kProviderName) != 0)
    return "fabric name";
  if (h->fabric_attr && h->fabric_attr->prov_name) {
    // A layered name ("galaxy;ofi_rxm") names the core provider first.
    const char* n = h->fabric_attr->prov_name;
    const size_t len = std::strcspn(n, ";");
    if (len != std::strlen(kProviderName) || std::strncmp(n, kProviderName, len) != 0)
      return "provider name";
  }
  if (h->domain_attr) {
    const fi_domain_attr& d = *h->domain_attr;
    if (d.control_progress == FI_PROGRESS_AUTO || d.data_progress == FI_PROGRESS_AUTO)
      return "automatic progress (the provider progresses in its calls: FI_PROGRESS_MANUAL)";
    // Before API 1.5 mr_mode was FI_MR_BASIC (1) or FI_MR_SCALABLE (2); BASIC is what is needed.
    const bool old_api = FI_VERSION_LT(version, FI_VERSION(1, 5));
    // FI_MR_UNSPEC (0) leaves the mode to the provider.
    const bool basic = d.mr_mode == FI_MR_BASIC || d.mr_mode == FI_MR_UNSPEC || old_api;
    if ((h->caps & FI_RMA) && !basic && (d.mr_mode & kMrModeRma) != kMrModeRma)
      return "memory registration mode (RMA needs FI_MR_VIRT_ADDR and FI_MR_PROV_KEY)";
    if (d.mr_mode == FI_MR_SCALABLE) return "memory registration mode FI_MR_SCALABLE";
  }
  if (h->tx_attr && h->tx_attr->inject_size > kEagerMax) return "inject size";
  if (h->ep_attr && h->ep_attr->max_msg_size > kMaxMsgSize) return "message size";
  return nullptr;
}

char* dup(const char* s) {
  return strdup(s);
}

int getinfo(uint32_t version, const char*, const char*, uint64_t, const fi_info* hints,
            fi_info** info) {
  if (!info) return -FI_EINVAL;
  *info = nullptr;
  if (const char* why = refuse(version, hints)) {
    FI_INFO(&g_provider, FI_LOG_CORE, "hints not met: %s\n", why);
    return -FI_ENODATA;
  }
  // Only a process that can reach a NIC of a running fabric is offered the provider.
  glex_device_attr attr{nullptr, nullptr, -1};
  glex_device_handle_t dev = nullptr;
  const glex_ret_t r = glex_open_device(&attr, &dev);
  if (r == GLEX_INVALID_PARAM) {
    // A GLEX_* variable the user set is wrong: said once on stderr whatever FI_LOG_LEVEL is
    // (libfabric logs nothing by default, and the user would see only "no provider").
    static std::once_flag said;
    std::call_once(said, [] {
      std::fprintf(stderr, "libgalaxy-fi: E6622 the Galaxy provider is not offered: %s\n",
                   glex_last_error());
    });
    FI_WARN(&g_provider, FI_LOG_CORE, "E6622 %s\n", glex_last_error());
    return -FI_ENODATA;
  }
  if (r != GLEX_SUCCESS) {  // no fabric runs here: the provider is simply not offered
    FI_INFO(&g_provider, FI_LOG_CORE, "no Galaxy NIC reachable: %s\n", glex_last_error());
    return -FI_ENODATA;
  }
  const uint32_t node = glex_device_node(dev);
  glex_close_device(dev);

  fi_info* fi = fi_allocinfo();
  if (!fi) return -FI_ENOMEM;
  // The primary capabilities asked for, or all of them (applications choose their calls by what
  // comes back: fi_pingpong uses the tagged calls when FI_TAGGED is there).
  const uint64_t asked = hints ? hints->caps & kCaps : 0;
  fi->caps = asked & kPrimaryCaps ? asked : asked | kCaps;
  fi->mode = 0;
  fi->addr_format = FI_FORMAT_UNSPEC;
  if (hints && hints->dest_addr && hints->dest_addrlen == kAddrLen) {
    fi->dest_addr = std::malloc(kAddrLen);
    if (fi->dest_addr) {
      std::memcpy(fi->dest_addr, hints->dest_addr, kAddrLen);
      fi->dest_addrlen = kAddrLen;
    }
  }

  fi->tx_attr->caps = fi->caps;
  fi->tx_attr->mode = 0;
  fi->tx_attr->op_flags = hints && hints->tx_attr ? hints->tx_attr->op_flags : 0;
  fi->tx_attr->msg_order = kMsgOrder;
  fi->tx_attr->comp_order = FI_ORDER_NONE;
  fi->tx_attr->inject_size = kEagerMax;
  fi->tx_attr->size = kTxSize;
  fi->tx_attr->iov_limit = kMaxIov;
  fi->tx_attr->rma_iov_limit = 1;

  fi->rx_attr->caps = fi->caps;
  fi->rx_attr->mode = 0;
  fi->rx_attr->op_flags = hints && hints->rx_attr ? hints->rx_attr->op_flags : 0;
  fi->rx_attr->msg_order = kMsgOrder;
  fi->rx_attr->comp_order = FI_ORDER_NONE;
  fi->rx_attr->total_buffered_recv = 0;
  fi->rx_attr->size = kRxSize;
  fi->rx_attr->iov_limit = kMaxIov;

  fi->ep_attr->type = FI_EP_RDM;
  fi->ep_attr->protocol = FI_PROTO_UNSPEC;
  fi->ep_attr->protocol_version = 1;
  fi->ep_attr->max_msg_size = kMaxMsgSize;
  fi->ep_attr->msg_prefix_size = 0;
  fi->ep_attr->max_order_raw_size = 0;
  fi->ep_attr->max_order_war_size = 0;
  fi->ep_attr->max_order_waw_size = 0;
  fi->ep_attr->mem_tag_format = hints && hints->ep_attr && hints->ep_attr->mem_tag_format
                                    ? hints->ep_attr->mem_tag_format
                                    : ~uint64_t{0};
  fi->ep_attr->tx_ctx_cnt = 1;
  fi->ep_attr->rx_ctx_cnt = 1;

  const fi_domain_attr* hd = hints ? hints->domain_attr : nullptr;
  char name[32];
  std::snprintf(name, sizeof name, "nic%u", node);
  fi->domain_attr->name = dup(name);
  fi->domain_attr->threading = hd && hd->threading ? hd->threading : FI_THREAD_SAFE;
  fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
  fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  fi->domain_attr->resource_mgmt = FI_RM_ENABLED;
  fi->domain_attr->av_type = hd && hd->av_type ? hd->av_type : FI_AV_UNSPEC;
  if (hd && (hd->mr_mode == FI_MR_BASIC || hd->mr_mode == FI_MR_UNSPEC) &&
      FI_VERSION_LT(version, FI_VERSION(1, 5)))
    fi->domain_attr->mr_mode = hd->mr_mode == FI_MR_BASIC ? FI_MR_BASIC : FI_MR_UNSPEC;
  else if (hd && hd->mr_mode == FI_MR_BASIC)
    fi->domain_attr->mr_mode = FI_MR_BASIC;
  else if (hd && hd->mr_mode == FI_MR_UNSPEC)
    fi->domain_attr->mr_mode = (fi->caps & FI_RMA) ? static_cast<int>(kMrModeRma) : 0;
  else
    fi->domain_attr->mr_mode =
        static_cast<int>((fi->caps & FI_RMA) ? kMrModeRma : (hd ? hd->mr_mode & kMrModeRma : 0));
  fi->domain_attr->mr_key_size = sizeof(uint64_t);
  fi->domain_attr->cq_data_size = sizeof(uint64_t);
  fi->domain_attr->cq_cnt = 64;
  fi->domain_attr->ep_cnt = 32;
  fi->domain_attr->tx_ctx_cnt = 32;
  fi->domain_attr->rx_ctx_cnt = 32;
  fi->domain_attr->max_ep_tx_ctx = 1;
  fi->domain_attr->max_ep_rx_ctx = 1;
  fi->domain_attr->max_ep_stx_ctx = 0;
  fi->domain_attr->max_ep_srx_ctx = 0;
  fi->domain_attr->cntr_cnt = 64;
  fi->domain_attr->mr_iov_limit = 1;
  fi->domain_attr->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
  fi->domain_attr->mode = 0;
  fi->domain_attr->mr_cnt = 120;

  fi->fabric_attr->name = dup(kProviderName);
  fi->fabric_attr->prov_version = kProviderVersion;
  fi->fabric_attr->api_version = kApiVersion;
  *info = fi;
  return 0;
}

void cleanup() {}

}  // namespace

int no_bind(fid*, fid*, uint64_t) {
  return -FI_ENOSYS;
}
int no_control(fid*, int, void*) {
  return -FI_ENOSYS;
}
int no_ops_open(fid*, const char*, uint64_t, void**, void*) {
  return -FI_ENOSYS;
}
int no_tostr(const fid*, char*, size_t) {
  return -FI_ENOSYS;
}
int no_ops_set(fid*, const char*, uint64_t, void*, void*) {
  return -FI_ENOSYS;
}

const fi_provider* provider() {
  return &g_provider;
}

}  // namespace galaxy::fi

extern "C" __attribute__((visibility("default"))) fi_provider* fi_prov_ini(void) {
  using namespace galaxy::fi;
  g_provider.version = kProviderVersion;
  g_provider.fi_version = kApiVersion;
  g_provider.name = kProviderName;
  g_provider.getinfo = getinfo;
  g_provider.fabric = open_fabric;
  g_provider.cleanup = cleanup;
  return &g_provider;
}
