// Completion queues and counters (fi_cq(3), fi_cntr(3)). Reading either drives the progress of
// the endpoints bound to it; the blocking calls poll for a while and then yield.
#include <sched.h>

#include <chrono>
#include <cstring>

#include "fi_internal.h"

namespace galaxy::fi {
namespace {

using Clock = std::chrono::steady_clock;

size_t entry_size(fi_cq_format f) {
  switch (f) {
    case FI_CQ_FORMAT_CONTEXT:
      return sizeof(fi_cq_entry);
    case FI_CQ_FORMAT_MSG:
      return sizeof(fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA:
      return sizeof(fi_cq_data_entry);
    case FI_CQ_FORMAT_TAGGED:
      return sizeof(fi_cq_tagged_entry);
    default:
      return 0;
  }
}

Cq* cq_of(fid_cq* f) {
  return reinterpret_cast<CqFid*>(f)->self;
}
Cntr* cntr_of(fid_cntr* f) {
  return reinterpret_cast<CntrFid*>(f)->self;
}

ssize_t cq_readfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src) {
  Cq* cq = cq_of(f);
  std::lock_guard<std::recursive_mutex> g(cq->domain->lock);
  for (Endpoint* ep : cq->eps) progress(ep);
  if (!cq->errors.empty()) return -FI_EAVAIL;
  if (cq->done.empty()) return -FI_EAGAIN;
  if (count && !buf) return -FI_EINVAL;
  const size_t size = entry_size(cq->format);
  size_t n = 0;
  for (; n < count && !cq->done.empty(); ++n) {
    const Completion& c = cq->done.front();
    std::memcpy(static_cast<char*>(buf) + n * size, &c.e, size);
    if (src) src[n] = c.src;
    cq->done.pop_front();
  }
  return static_cast<ssize_t>(n);
}

ssize_t cq_read(fid_cq* f, void* buf, size_t count) {
  return cq_readfrom(f, buf, count, nullptr);
}

ssize_t cq_readerr(fid_cq* f, fi_cq_err_entry* buf, uint64_t) {
  Cq* cq = cq_of(f);
  std::lock_guard<std::recursive_mutex> g(cq->domain->lock);
  if (cq->errors.empty()) return -FI_EAGAIN;
  if (!buf) return -FI_EINVAL;
  const fi_cq_err_entry& e = cq->errors.front();
  // err_data and err_data_size belong to the caller (a buffer it may offer); none is used.
  buf->op_context = e.op_context;
  buf->flags = e.flags;
  buf->len = e.len;
  buf->buf = e.buf;
  buf->data = e.data;
  buf->tag = e.tag;
  buf->olen = e.olen;
  buf->err = e.err;
  buf->prov_errno = e.prov_errno;
  buf->err_data_size = 0;
  cq->errors.pop_front();
  return 1;
}

// Polls for 100 us, then yields the core between polls, until `ready` or the timeout (ms; < 0
// waits forever).
template <typename Ready>
bool wait_until(int timeout_ms, Ready ready) {
  const auto start = Clock::now();
  for (uint64_t i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63) == 0) {
      const auto waited = Clock::now() - start;
      if (timeout_ms >= 0 && waited >= std::chrono::milliseconds(timeout_ms)) return false;
      if (waited > std::chrono::microseconds(100)) sched_yield();
    }
  }
}

ssize_t cq_sreadfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src, const void*, int timeout) {
  ssize_t r = -FI_EAGAIN;
  if (!wait_until(timeout, [&] {
        r = cq_readfrom(f, buf, count, src);
        return r != -FI_EAGAIN;
      }))
    return -FI_EAGAIN;
  return r;
}

ssize_t cq_sread(fid_cq* f, void* buf, size_t count, const void* cond, int timeout) {
  return cq_sreadfrom(f, buf, count, nullptr, cond, timeout);
}

int cq_signal(fid_cq*) {
  return 0;
}

const char* cq_strerror(fid_cq*, int prov_errno, const void*, char* buf, size_t len) {
  const char* s = fi_strerror(prov_errno);
  if (buf && len) {
    std::strncpy(buf, s, len - 1);
    buf[len - 1] = 0;
    return buf;
  }
  return s;
}

fi_ops cq_fi_ops = {
    sizeof(fi_ops), close_unbound<CqFid>, no_bind, no_control, no_ops_open, no_tostr, no_ops_set};
fi_ops_cq cq_ops = {sizeof(fi_ops_cq), cq_read,      cq_readfrom, cq_readerr,
                    cq_sread,          cq_sreadfrom, cq_signal,   cq_strerror};

uint64_t cntr_read(fid_cntr* f) {
  Cntr* c = cntr_of(f);
  std::lock_guard<std::recursive_mutex> g(c->domain->lock);
  for (Endpoint* ep : c->eps) progress(ep);
  return c->value;
}

uint64_t cntr_readerr(fid_cntr* f) {
  Cntr* c = cntr_of(f);
  std::lock_guard<std::recursive_mutex> g(c->domain->lock);
  for (Endpoint* ep : c->eps) progress(ep);
  return c->errors;
}

// fi_cntr_add, fi_cntr_set, fi_cntr_adderr, fi_cntr_seterr: one field, added to or set.
template <uint64_t Cntr::*Field, bool Add>
int cntr_update(fid_cntr* f, uint64_t v) {
  Cntr* c = cntr_of(f);
  std::lock_guard<std::recursive_mutex> g(c->domain->lock);
  c->*Field = Add ? c->*Field + v : v;
  return 0;
}

int cntr_wait(fid_cntr* f, uint64_t threshold, int timeout) {
  const uint64_t errors = cntr_readerr(f);
  int r = -FI_ETIMEDOUT;
  wait_until(timeout, [&] {
    if (cntr_read(f) >= threshold) return r = 0, true;
    if (cntr_readerr(f) != errors) return r = -FI_EAVAIL, true;
    return false;
  });
  return r;
}

fi_ops cntr_fi_ops = {
    sizeof(fi_ops), close_unbound<CntrFid>, no_bind, no_control, no_ops_open, no_tostr, no_ops_set};
fi_ops_cntr cntr_ops = {sizeof(fi_ops_cntr),
                        cntr_read,
                        cntr_readerr,
                        cntr_update<&Cntr::value, true>,
                        cntr_update<&Cntr::value, false>,
                        cntr_wait,
                        cntr_update<&Cntr::errors, true>,
                        cntr_update<&Cntr::errors, false>};

}  // namespace

int open_cq(fid_domain* domain, fi_cq_attr* attr, fid_cq** out, void* context) {
  Domain* d = reinterpret_cast<DomainFid*>(domain)->self;
  if (!out) return -FI_EINVAL;
  fi_cq_format format = attr ? attr->format : FI_CQ_FORMAT_UNSPEC;
  if (format == FI_CQ_FORMAT_UNSPEC) format = FI_CQ_FORMAT_CONTEXT;
  if (entry_size(format) == 0) {
    FI_WARN(provider(), FI_LOG_CQ, "E6610 fi_cq_open: format %d is not supported\n",
            static_cast<int>(format));
    return -FI_ENOSYS;
  }
  if (attr && (attr->wait_obj == FI_WAIT_FD || attr->wait_obj == FI_WAIT_SET ||
               attr->wait_obj == FI_WAIT_MUTEX_COND || attr->wait_obj == FI_WAIT_POLLFD)) {
    FI_WARN(provider(), FI_LOG_CQ,
            "E6611 fi_cq_open: wait object %d is not supported (FI_WAIT_NONE, FI_WAIT_UNSPEC "
            "and FI_WAIT_YIELD are)\n",
            static_cast<int>(attr->wait_obj));
    return -FI_ENOSYS;
  }
  auto* cq = new Cq;
  cq->domain = d;
  cq->format = format;
  cq->fid.self = cq;
  cq->fid.cq.fid.fclass = FI_CLASS_CQ;
  cq->fid.cq.fid.context = context;
  cq->fid.cq.fid.ops = &cq_fi_ops;
  cq->fid.cq.ops = &cq_ops;
  std::lock_guard<std::recursive_mutex> g(d->lock);
  ++d->refs;
  *out = &cq->fid.cq;
  return 0;
}

int open_cntr(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** out, void* context) {
  Domain* d = reinterpret_cast<DomainFid*>(domain)->self;
  if (!out) return -FI_EINVAL;
  if (attr && attr->events != FI_CNTR_EVENTS_COMP) return -FI_ENOSYS;
  if (attr && (attr->wait_obj == FI_WAIT_FD || attr->wait_obj == FI_WAIT_SET ||
               attr->wait_obj == FI_WAIT_MUTEX_COND || attr->wait_obj == FI_WAIT_POLLFD))
    return -FI_ENOSYS;
  auto* c = new Cntr;
  c->domain = d;
  c->fid.self = c;
  c->fid.cntr.fid.fclass = FI_CLASS_CNTR;
  c->fid.cntr.fid.context = context;
  c->fid.cntr.fid.ops = &cntr_fi_ops;
  c->fid.cntr.ops = &cntr_ops;
  std::lock_guard<std::recursive_mutex> g(d->lock);
  ++d->refs;
  *out = &c->fid.cntr;
  return 0;
}

}  // namespace galaxy::fi
