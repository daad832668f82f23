#include "chip/rdma_rules.h"

#include <fmt/format.h>

#include <vector>

#include "chip/nic.h"

namespace galaxy::chip {

using wire::Completion;
using wire::RdmaOp;

Status check_rdma_start(const wire::RdmaDescriptor& d, const AttTable& local,
                        const AttTable::PieceFn* local_pieces) {
  if (d.cp_count != 0)
    return make_error(Code::kUnsupported, 2055,
                      fmt::format("RDMA descriptor: cp_count = {}: a CP-triggered descriptor "
                                  "waits in a NIC's queue for its CPs, and this path has none",
                                  d.cp_count));
  if (d.remote_vp >= kNumVps)
    return make_error(Code::kOutOfRange, 2056,
                      fmt::format("RDMA descriptor: remote_vp = {} exceeds the {} virtual ports",
                                  d.remote_vp, kNumVps));
  if (d.op == RdmaOp::kRead &&
      (d.completion == Completion::kTrailingMp || d.completion == Completion::kTrailingImmediate))
    return make_error(Code::kInvalidArgument, 2057,
                      "RDMA descriptor: a get completes at the target by an event only, not by a "
                      "trailing MP or immediate");
  if (d.op == RdmaOp::kImmediate) return {};
  if (local_pieces)
    return local.translate_pieces(d.local_key, d.local_address, d.length, kAccessNone,
                                  *local_pieces);
  return local.check(d.local_key, d.local_address, d.length, kAccessNone);
}

Status check_rdma_target(const AttTable& target, RdmaOp op, uint32_t key, uint64_t address,
                         uint64_t length, const RdmaNotify* get_event,
                         const AttTable::PieceFn* pieces) {
  const uint32_t access = op == RdmaOp::kRead ? kAccessRead : kAccessWrite;
  GALAXY_TRY(pieces ? target.translate_pieces(key, address, length, access, *pieces)
                    : target.check(key, address, length, access));
  if (op != RdmaOp::kRead) return {};
  if (get_event) return target.check(get_event->key, get_event->address, kEventBytes, kAccessWrite);
  return {};
}

namespace {

struct Piece {
  uint64_t phys;
  uint64_t offset;
  uint64_t bytes;
};

// The pieces of one side: a few held in place (an engine whose memory is one range gives one),
// more on the heap (a region of scattered pages gives one per page).
class Pieces {
 public:
  void push_back(const Piece& p) {
    if (n_ < kInPlace)
      in_place_[n_] = p;
    else
      more_.push_back(p);
    ++n_;
  }
  size_t size() const { return n_; }
  void clear() {
    more_.clear();
    n_ = 0;
  }
  const Piece& operator[](size_t i) const {
    return i < kInPlace ? in_place_[i] : more_[i - kInPlace];
  }

 private:
  static constexpr size_t kInPlace = 4;
  std::array<Piece, kInPlace> in_place_;
  std::vector<Piece> more_;
  size_t n_ = 0;
};

}  // namespace

uint16_t direct_rdma(const wire::RdmaDescriptor& d, const AttTable& initiator,
                     const AttTable& target, DirectMemory& memory) {
  auto fail = [](const Status& st) { return st.ok() ? uint16_t{0} : st.error().id; };
  Pieces mine, theirs, at;
  auto into = [](Pieces* out) {
    return [out](uint64_t phys, uint64_t off, uint64_t n) -> Status {
      out->push_back({phys, off, n});
      return {};
    };
  };
  auto to_mine_fn = into(&mine), to_theirs_fn = into(&theirs), to_at_fn = into(&at);
  const AttTable::PieceFn to_mine = to_mine_fn, to_theirs = to_theirs_fn, to_at = to_at_fn;
  if (uint16_t e = fail(check_rdma_start(d, initiator, &to_mine))) return e;
  if (d.completion == Completion::kTrailingMp)
    return make_error(Code::kUnsupported, 2059,
                      "RDMA descriptor: a trailing MP needs the target NIC's MPQ; a direct "
                      "transfer has none")
        .id;
  const bool get = d.op == RdmaOp::kRead;
  const RdmaNotify event{d.notify_key, d.notify_address};
  if (uint16_t e = fail(check_rdma_target(
          target, d.op, d.remote_key, d.remote_address, d.length,
          get && d.completion == Completion::kEvent ? &event : nullptr, &to_theirs)))
    return e;
  if (d.op == RdmaOp::kImmediate) {
    for (size_t i = 0; i < theirs.size(); ++i) {
      const Piece& p = theirs[i];
      if (uint16_t e = fail(memory.write_target(
              p.phys, std::span<const uint8_t>(d.immediate_data).subspan(p.offset, p.bytes))))
        return e;
    }
  } else {
    // Both sides' pieces, walked together: each copy lies within one piece of each.
    size_t i = 0, j = 0;
    uint64_t done = 0;
    while (done < d.length && i < mine.size() && j < theirs.size()) {
      const Piece& a = mine[i];
      const Piece& b = theirs[j];
      const uint64_t n = std::min(a.offset + a.bytes, b.offset + b.bytes) - done;
      const uint64_t pa = a.phys + (done - a.offset);
      const uint64_t pb = b.phys + (done - b.offset);
      Status st = get ? memory.copy(false, pa, pb, n) : memory.copy(true, pb, pa, n);
      if (uint16_t e = fail(st)) return e;
      done += n;
      if (done == a.offset + a.bytes) ++i;
      if (done == b.offset + b.bytes) ++j;
    }
  }
  // Every data byte is visible before the notice and the completion.
  if (uint16_t e = fail(memory.flush())) return e;
  auto write_word = [&](uint32_t key, uint64_t address, std::span<const uint8_t> bytes) {
    at.clear();
    Status st = target.translate_pieces(key, address, bytes.size(), kAccessWrite, to_at);
    for (size_t i = 0; i < at.size() && st.ok(); ++i)
      st = memory.write_target(at[i].phys, bytes.subspan(at[i].offset, at[i].bytes));
    if (st.ok()) st = memory.flush();
    return fail(st);
  };
  switch (d.completion) {
    case Completion::kEvent:
      return write_event_checked(target, d.notify_key, d.notify_address, d.notify_data, write_word);
    case Completion::kTrailingImmediate:  // write_word's translation is the ATT's check
      return write_word(d.notify_key, d.notify_address, d.notify_data);
    case Completion::kTrailingMp:
    case Completion::kNone:
      break;
  }
  return 0;
}

}  // namespace galaxy::chip
