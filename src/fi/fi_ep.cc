// Endpoints (fi_endpoint(3)): one glex endpoint (one VP) each, bound to an address vector,
// completion queues and counters; the message, tagged and RMA calls over the data path.
#include <cstring>

#include "fi_internal.h"

namespace galaxy::fi {
namespace {

Endpoint* ep_of(fid_ep* f) {
  return reinterpret_cast<EpFid*>(f)->self;
}
Endpoint* ep_of(fid* f) {
  return reinterpret_cast<EpFid*>(f)->self;
}

// One buffer per operation (kMaxIov): the iovec's, or none.
bool one_iov(const iovec* iov, size_t count, void* const* desc, void** buf, size_t* len, void** d) {
  if (count > kMaxIov || (count && !iov)) return false;
  *buf = count ? iov[0].iov_base : nullptr;
  *len = count ? iov[0].iov_len : 0;
  *d = count && desc ? desc[0] : nullptr;
  return true;
}

// ---- fi_ops ------------------------------------------------------------------------------------
int ep_close(fid* f) {
  Endpoint* ep = ep_of(f);
  Domain* d = ep->domain;
  {
    std::lock_guard<std::recursive_mutex> g(d->lock);
    drain_and_release(ep);
    for (Cq* cq : {ep->tx_cq, ep->rx_cq}) {
      if (!cq) continue;
      auto& v = cq->eps;
      for (auto it = v.begin(); it != v.end();) it = *it == ep ? v.erase(it) : it + 1;
    }
    if (ep->tx_cq) --ep->tx_cq->refs;
    if (ep->rx_cq && ep->rx_cq != ep->tx_cq) --ep->rx_cq->refs;
    for (Cntr* c : {ep->send_cntr, ep->recv_cntr, ep->write_cntr, ep->read_cntr}) {
      if (!c) continue;
      auto& v = c->eps;
      for (auto it = v.begin(); it != v.end();) it = *it == ep ? v.erase(it) : it + 1;
    }
    for (Cntr* c : {ep->send_cntr, ep->recv_cntr, ep->write_cntr, ep->read_cntr})
      if (c && c->refs) --c->refs;
    if (ep->av) --ep->av->refs;
    glex_destroy_ep(ep->ep);
    --d->refs;
  }
  delete ep;
  return 0;
}

void watch(std::vector<Endpoint*>& eps, Endpoint* ep) {
  for (Endpoint* e : eps)
    if (e == ep) return;
  eps.push_back(ep);
}

int ep_bind(fid* f, fid* b, uint64_t flags) {
  Endpoint* ep = ep_of(f);
  if (!b) return -FI_EINVAL;
  std::lock_guard<std::recursive_mutex> g(ep->domain->lock);
  if (ep->enabled) return -FI_EOPBADSTATE;
  switch (b->fclass) {
    case FI_CLASS_AV: {
      Av* av = reinterpret_cast<AvFid*>(b)->self;
      if (av->domain != ep->domain) return -FI_EINVAL;
      if (ep->av) return -FI_EALREADY;
      ep->av = av;
      ++av->refs;
      return 0;
    }
    case FI_CLASS_CQ: {
      Cq* cq = reinterpret_cast<CqFid*>(b)->self;
      if (cq->domain != ep->domain) return -FI_EINVAL;
      if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) return -FI_EBADFLAGS;
      if (!(flags & (FI_TRANSMIT | FI_RECV))) return -FI_EBADFLAGS;
      if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq))
        return -FI_EALREADY;
      if (flags & FI_TRANSMIT) {
        ep->tx_cq = cq;
        ep->tx_selective = flags & FI_SELECTIVE_COMPLETION;
      }
      if (flags & FI_RECV) {
        ep->rx_cq = cq;
        ep->rx_selective = flags & FI_SELECTIVE_COMPLETION;
      }
      ++cq->refs;
      watch(cq->eps, ep);
      return 0;
    }
    case FI_CLASS_CNTR: {
      Cntr* c = reinterpret_cast<CntrFid*>(b)->self;
      if (c->domain != ep->domain) return -FI_EINVAL;
      if (flags & ~(FI_SEND | FI_RECV | FI_WRITE | FI_READ)) return -FI_EBADFLAGS;
      if (!flags) return -FI_EBADFLAGS;
      if (flags & FI_SEND) ep->send_cntr = c;
      if (flags & FI_RECV) ep->recv_cntr = c;
      if (flags & FI_WRITE) ep->write_cntr = c;
      if (flags & FI_READ) ep->read_cntr = c;
      ++c->refs;
      watch(c->eps, ep);
      return 0;
    }
    default:
      return -FI_ENOSYS;
  }
}

int ep_control(fid* f, int command, void* arg) {
  Endpoint* ep = ep_of(f);
  std::lock_guard<std::recursive_mutex> g(ep->domain->lock);
  switch (command) {
    case FI_ENABLE:
      if (!ep->av) {
        FI_WARN(provider(), FI_LOG_EP_CTRL, "E6630 fi_enable: no address vector bound\n");
        return -FI_ENOAV;
      }
      if (!ep->tx_cq && !ep->send_cntr && !ep->write_cntr && !ep->read_cntr) return -FI_ENOCQ;
      if (!ep->rx_cq && !ep->recv_cntr) return -FI_ENOCQ;
      ep->enabled = true;
      return 0;
    case FI_GETOPSFLAG: {
      auto* flags = static_cast<uint64_t*>(arg);
      if (!flags) return -FI_EINVAL;
      *flags = (*flags & FI_TRANSMIT) ? ep->tx_op_flags : ep->rx_op_flags;
      return 0;
    }
    case FI_SETOPSFLAG: {
      auto* flags = static_cast<uint64_t*>(arg);
      if (!flags) return -FI_EINVAL;
      if (*flags & FI_TRANSMIT)
        ep->tx_op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
      else
        ep->rx_op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
      return 0;
    }
    default:
      return -FI_ENOSYS;
  }
}

fi_ops ep_fi_ops = {sizeof(fi_ops), ep_close, ep_bind,   ep_control,
                    no_ops_open,    no_tostr, no_ops_set};

// ---- fi_ops_ep ---------------------------------------------------------------------------------
ssize_t ep_cancel(fid_t f, void* context) {
  return cancel_recv(ep_of(f), context);
}
int ep_getopt(fid_t, int level, int optname, void* optval, size_t* optlen) {
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (optname == FI_OPT_MIN_MULTI_RECV) return -FI_ENOPROTOOPT;
  if (optname == FI_OPT_CM_DATA_SIZE) {
    if (!optval || !optlen || *optlen < sizeof(size_t)) return -FI_ETOOSMALL;
    *static_cast<size_t*>(optval) = 0;
    *optlen = sizeof(size_t);
    return 0;
  }
  return -FI_ENOPROTOOPT;
}
int ep_setopt(fid_t, int, int, const void*, size_t) {
  return -FI_ENOPROTOOPT;
}
int no_tx_ctx(fid_ep*, int, fi_tx_attr*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
int no_rx_ctx(fid_ep*, int, fi_rx_attr*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
ssize_t rx_size_left(fid_ep* f) {
  Endpoint* ep = ep_of(f);
  std::lock_guard<std::recursive_mutex> g(ep->domain->lock);
  return static_cast<ssize_t>(kRxSize - ep->posted[0].size());
}
ssize_t tx_size_left(fid_ep* f) {
  Endpoint* ep = ep_of(f);
  std::lock_guard<std::recursive_mutex> g(ep->domain->lock);
  return static_cast<ssize_t>(ep->out.size() < kTxSize ? kTxSize - ep->out.size() : 0);
}
fi_ops_ep ep_ops = {sizeof(fi_ops_ep), ep_cancel, ep_getopt,    ep_setopt,
                    no_tx_ctx,         no_rx_ctx, rx_size_left, tx_size_left};

// ---- fi_ops_cm ---------------------------------------------------------------------------------
int cm_getname(fid_t f, void* addr, size_t* addrlen) {
  Endpoint* ep = ep_of(f);
  if (!addrlen) return -FI_EINVAL;
  const glex_ep_addr_t a = glex_ep_addr(ep->ep);
  const size_t room = *addrlen;
  *addrlen = kAddrLen;
  if (room < kAddrLen || !addr) return -FI_ETOOSMALL;
  std::memcpy(addr, &a, kAddrLen);
  return 0;
}
int no_setname(fid_t, void*, size_t) {
  return -FI_ENOSYS;
}
int no_getpeer(fid_ep*, void*, size_t*) {
  return -FI_ENOSYS;
}
int no_connect(fid_ep*, const void*, const void*, size_t) {
  return -FI_ENOSYS;
}
int no_listen(fid_pep*) {
  return -FI_ENOSYS;
}
int no_accept(fid_ep*, const void*, size_t) {
  return -FI_ENOSYS;
}
int no_reject(fid_pep*, fid_t, const void*, size_t) {
  return -FI_ENOSYS;
}
int no_shutdown(fid_ep*, uint64_t) {
  return -FI_ENOSYS;
}
int no_join(fid_ep*, const void*, uint64_t, fid_mc**, void*) {
  return -FI_ENOSYS;
}
fi_ops_cm cm_ops = {sizeof(fi_ops_cm), no_setname, cm_getname, no_getpeer,  no_connect,
                    no_listen,         no_accept,  no_reject,  no_shutdown, no_join};

// ---- fi_ops_msg --------------------------------------------------------------------------------
ssize_t msg_recv(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, void* context) {
  Endpoint* ep = ep_of(f);
  return post_recv(ep, buf, len, src, 0, 0, false, context, ep->rx_op_flags);
}
ssize_t msg_recvv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t src,
                  void* context) {
  void *buf, *d;
  size_t len;
  if (!one_iov(iov, count, desc, &buf, &len, &d)) return -FI_EINVAL;
  return msg_recv(f, buf, len, d, src, context);
}
ssize_t msg_recvmsg(fid_ep* f, const fi_msg* m, uint64_t flags) {
  void *buf, *d;
  size_t len;
  if (!m || !one_iov(m->msg_iov, m->iov_count, m->desc, &buf, &len, &d)) return -FI_EINVAL;
  return post_recv(ep_of(f), buf, len, m->addr, 0, 0, false, m->context, flags);
}
ssize_t msg_send(fid_ep* f, const void* buf, size_t len, void* desc, fi_addr_t dest,
                 void* context) {
  Endpoint* ep = ep_of(f);
  return post_send(ep, buf, len, desc, dest, 0, false, 0, false, context, ep->tx_op_flags);
}
ssize_t msg_sendv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t dest,
                  void* context) {
  void *buf, *d;
  size_t len;
  if (!one_iov(iov, count, desc, &buf, &len, &d)) return -FI_EINVAL;
  return msg_send(f, buf, len, d, dest, context);
}
ssize_t msg_sendmsg(fid_ep* f, const fi_msg* m, uint64_t flags) {
  void *buf, *d;
  size_t len;
  if (!m || !one_iov(m->msg_iov, m->iov_count, m->desc, &buf, &len, &d)) return -FI_EINVAL;
  if ((flags & FI_INJECT) && len > kEagerMax) return -FI_EMSGSIZE;
  return post_send(ep_of(f), buf, len, d, m->addr, 0, false, m->data, flags & FI_REMOTE_CQ_DATA,
                   m->context, flags);
}
ssize_t msg_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest) {
  if (len > kEagerMax) return -FI_EMSGSIZE;
  return post_send(ep_of(f), buf, len, nullptr, dest, 0, false, 0, false, nullptr, FI_INJECT);
}
ssize_t msg_senddata(fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data,
                     fi_addr_t dest, void* context) {
  Endpoint* ep = ep_of(f);
  return post_send(ep, buf, len, desc, dest, 0, false, data, true, context, ep->tx_op_flags);
}
ssize_t msg_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest) {
  if (len > kEagerMax) return -FI_EMSGSIZE;
  return post_send(ep_of(f), buf, len, nullptr, dest, 0, false, data, true, nullptr, FI_INJECT);
}
fi_ops_msg msg_ops = {sizeof(fi_ops_msg), msg_recv,    msg_recvv,  msg_recvmsg,  msg_send,
                      msg_sendv,          msg_sendmsg, msg_inject, msg_senddata, msg_injectdata};

// ---- fi_ops_tagged -----------------------------------------------------------------------------
ssize_t tag_recv(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag,
                 uint64_t ignore, void* context) {
  Endpoint* ep = ep_of(f);
  return post_recv(ep, buf, len, src, tag, ignore, true, context, ep->rx_op_flags);
}
ssize_t tag_recvv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t src,
                  uint64_t tag, uint64_t ignore, void* context) {
  void *buf, *d;
  size_t len;
  if (!one_iov(iov, count, desc, &buf, &len, &d)) return -FI_EINVAL;
  return tag_recv(f, buf, len, d, src, tag, ignore, context);
}
ssize_t tag_recvmsg(fid_ep* f, const fi_msg_tagged* m, uint64_t flags) {
  void *buf, *d;
  size_t len;
  if (!m || !one_iov(m->msg_iov, m->iov_count, m->desc, &buf, &len, &d)) return -FI_EINVAL;
  return post_recv(ep_of(f), buf, len, m->addr, m->tag, m->ignore, true, m->context, flags);
}
ssize_t tag_send(fid_ep* f, const void* buf, size_t len, void* desc, fi_addr_t dest, uint64_t tag,
                 void* context) {
  Endpoint* ep = ep_of(f);
  return post_send(ep, buf, len, desc, dest, tag, true, 0, false, context, ep->tx_op_flags);
}
ssize_t tag_sendv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t dest,
                  uint64_t tag, void* context) {
  void *buf, *d;
  size_t len;
  if (!one_iov(iov, count, desc, &buf, &len, &d)) return -FI_EINVAL;
  return tag_send(f, buf, len, d, dest, tag, context);
}
ssize_t tag_sendmsg(fid_ep* f, const fi_msg_tagged* m, uint64_t flags) {
  void *buf, *d;
  size_t len;
  if (!m || !one_iov(m->msg_iov, m->iov_count, m->desc, &buf, &len, &d)) return -FI_EINVAL;
  if ((flags & FI_INJECT) && len > kEagerMax) return -FI_EMSGSIZE;
  return post_send(ep_of(f), buf, len, d, m->addr, m->tag, true, m->data, flags & FI_REMOTE_CQ_DATA,
                   m->context, flags);
}
ssize_t tag_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) {
  if (len > kEagerMax) return -FI_EMSGSIZE;
  return post_send(ep_of(f), buf, len, nullptr, dest, tag, true, 0, false, nullptr, FI_INJECT);
}
ssize_t tag_senddata(fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data,
                     fi_addr_t dest, uint64_t tag, void* context) {
  Endpoint* ep = ep_of(f);
  return post_send(ep, buf, len, desc, dest, tag, true, data, true, context, ep->tx_op_flags);
}
ssize_t tag_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                       uint64_t tag) {
  if (len > kEagerMax) return -FI_EMSGSIZE;
  return post_send(ep_of(f), buf, len, nullptr, dest, tag, true, data, true, nullptr, FI_INJECT);
}
fi_ops_tagged tagged_ops = {
    sizeof(fi_ops_tagged), tag_recv,   tag_recvv,    tag_recvmsg,   tag_send, tag_sendv,
    tag_sendmsg,           tag_inject, tag_senddata, tag_injectdata};

// ---- fi_ops_rma --------------------------------------------------------------------------------
ssize_t rma_read(fid_ep* f, void* buf, size_t len, void* desc, fi_addr_t src, uint64_t addr,
                 uint64_t key, void* context) {
  Endpoint* ep = ep_of(f);
  return post_rma(ep, false, buf, len, desc, src, addr, key, 0, false, context, ep->tx_op_flags);
}
ssize_t rma_readv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t src,
                  uint64_t addr, uint64_t key, void* context) {
  void *buf, *d;
  size_t len;
  if (!one_iov(iov, count, desc, &buf, &len, &d)) return -FI_EINVAL;
  return rma_read(f, buf, len, d, src, addr, key, context);
}
ssize_t rma_readmsg(fid_ep* f, const fi_msg_rma* m, uint64_t flags) {
  void *buf, *d;
  size_t len;
  if (!m || !one_iov(m->msg_iov, m->iov_count, m->desc, &buf, &len, &d)) return -FI_EINVAL;
  if (m->rma_iov_count != 1 || !m->rma_iov || m->rma_iov[0].len < len) return -FI_EINVAL;
  return post_rma(ep_of(f), false, buf, len, d, m->addr, m->rma_iov[0].addr, m->rma_iov[0].key, 0,
                  false, m->context, flags);
}
ssize_t rma_write(fid_ep* f, const void* buf, size_t len, void* desc, fi_addr_t dest, uint64_t addr,
                  uint64_t key, void* context) {
  Endpoint* ep = ep_of(f);
  return post_rma(ep, true, const_cast<void*>(buf), len, desc, dest, addr, key, 0, false, context,
                  ep->tx_op_flags);
}
ssize_t rma_writev(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t dest,
                   uint64_t addr, uint64_t key, void* context) {
  void *buf, *d;
  size_t len;
  if (!one_iov(iov, count, desc, &buf, &len, &d)) return -FI_EINVAL;
  return rma_write(f, buf, len, d, dest, addr, key, context);
}
ssize_t rma_writemsg(fid_ep* f, const fi_msg_rma* m, uint64_t flags) {
  void *buf, *d;
  size_t len;
  if (!m || !one_iov(m->msg_iov, m->iov_count, m->desc, &buf, &len, &d)) return -FI_EINVAL;
  if (m->rma_iov_count != 1 || !m->rma_iov || m->rma_iov[0].len < len) return -FI_EINVAL;
  return post_rma(ep_of(f), true, buf, len, d, m->addr, m->rma_iov[0].addr, m->rma_iov[0].key,
                  m->data, flags & FI_REMOTE_CQ_DATA, m->context, flags);
}
// An injected write is the caller's to reuse at once: post_rma writes it from a copy that the
// operation owns until it completes; no completion is reported.
ssize_t rma_inject_common(fid_ep* f, const void* buf, size_t len, uint64_t data, bool has_data,
                          fi_addr_t dest, uint64_t addr, uint64_t key) {
  if (len > kEagerMax) return -FI_EMSGSIZE;
  Endpoint* ep = ep_of(f);
  std::lock_guard<std::recursive_mutex> g(ep->domain->lock);
  const ssize_t r = post_rma(ep, true, const_cast<void*>(buf), len, nullptr, dest, addr, key, data,
                             has_data, nullptr, FI_INJECT);
  if (r == 0) progress(ep);
  return r;
}
ssize_t rma_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t addr,
                   uint64_t key) {
  return rma_inject_common(f, buf, len, 0, false, dest, addr, key);
}
ssize_t rma_writedata(fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data,
                      fi_addr_t dest, uint64_t addr, uint64_t key, void* context) {
  Endpoint* ep = ep_of(f);
  return post_rma(ep, true, const_cast<void*>(buf), len, desc, dest, addr, key, data, true, context,
                  ep->tx_op_flags);
}
ssize_t rma_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                       uint64_t addr, uint64_t key) {
  return rma_inject_common(f, buf, len, data, true, dest, addr, key);
}
fi_ops_rma rma_ops = {sizeof(fi_ops_rma), rma_read,     rma_readv,  rma_readmsg,   rma_write,
                      rma_writev,         rma_writemsg, rma_inject, rma_writedata, rma_injectdata};

}  // namespace

int open_endpoint(fid_domain* domain, fi_info* info, fid_ep** out, void* context) {
  Domain* d = reinterpret_cast<DomainFid*>(domain)->self;
  if (!out) return -FI_EINVAL;
  if (info && info->ep_attr && info->ep_attr->type != FI_EP_RDM &&
      info->ep_attr->type != FI_EP_UNSPEC)
    return -FI_EINVAL;
  std::lock_guard<std::recursive_mutex> g(d->lock);
  glex_ep_attr attr{-1};
  glex_ep_handle_t gep = nullptr;
  if (glex_create_ep(d->dev, &attr, &gep) != GLEX_SUCCESS) {
    FI_WARN(provider(), FI_LOG_EP_CTRL, "E6631 fi_endpoint: no free VP on NIC %u: %s\n",
            glex_device_node(d->dev), glex_last_error());
    return -FI_ENOMEM;
  }
  auto* ep = new Endpoint;
  ep->domain = d;
  ep->ep = gep;
  ep->caps = info ? info->caps : (FI_MSG | FI_TAGGED | FI_RMA | FI_DIRECTED_RECV);
  if (info && info->tx_attr) ep->tx_op_flags = info->tx_attr->op_flags;
  if (info && info->rx_attr) ep->rx_op_flags = info->rx_attr->op_flags;
  ep->fid.self = ep;
  ep->fid.ep.fid.fclass = FI_CLASS_EP;
  ep->fid.ep.fid.context = context;
  ep->fid.ep.fid.ops = &ep_fi_ops;
  ep->fid.ep.ops = &ep_ops;
  ep->fid.ep.cm = &cm_ops;
  ep->fid.ep.msg = &msg_ops;
  ep->fid.ep.rma = &rma_ops;
  ep->fid.ep.tagged = &tagged_ops;
  ++d->refs;
  *out = &ep->fid.ep;
  return 0;
}

}  // namespace galaxy::fi
