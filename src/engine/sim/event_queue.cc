#include "engine/sim/event_queue.h"

#include <algorithm>
#include <new>

namespace galaxy::sim {

namespace {
constexpr size_t kInitialCapacity = 64;
}  // namespace

EventQueue::EventQueue(int initial_slot_bits, int max_rank_bits)
    : slot_bits_(initial_slot_bits), max_rank_bits_(max_rank_bits) {
  assert(initial_slot_bits >= 1 && initial_slot_bits <= 32);
  assert(max_rank_bits >= 1 && max_rank_bits <= 64);
  rebuild(slot_bits_);
  rebuilds_ = 0;
  grow(kInitialCapacity);
}

void EventQueue::reserve(size_t n) {
  if (n > capacity_) grow(n);
  payloads_.reserve(n);
  free_slots_.reserve(n);
}

void EventQueue::clear() {
  size_ = 0;
  free_slots_.clear();
  for (size_t i = payloads_.size(); i-- > 0;) free_slots_.push_back(static_cast<uint32_t>(i));
  next_rank_ = 0;
}

void EventQueue::grow(size_t capacity) {
  // Rounded up to whole lines; the kRoot unused keys in front align the families.
  const size_t keys = (kRoot + capacity + 3) / 4 * 4;
  std::unique_ptr<Key[], AlignedDelete> fresh(
      static_cast<Key*>(::operator new[](keys * sizeof(Key), std::align_val_t{kAlign})));
  if (keys_) std::copy(keys_.get() + kRoot, keys_.get() + kRoot + size_, fresh.get() + kRoot);
  keys_ = std::move(fresh);
  capacity_ = keys - kRoot;
}

// Called when the rank field is exhausted or no payload slot is free.
void EventQueue::make_room() {
  if (free_slots_.empty()) {
    const size_t used = payloads_.size();
    int bits = slot_bits_;
    while (bits < 32 && (uint64_t{1} << bits) <= used) ++bits;
    assert((uint64_t{1} << bits) > used && "EventQueue: more than 2^32 pending events");
    const size_t add = std::max<size_t>(used, kInitialCapacity);
    const size_t target = std::min<uint64_t>(used + add, uint64_t{1} << bits);
    payloads_.resize(target);
    for (size_t i = target; i-- > used;) free_slots_.push_back(static_cast<uint32_t>(i));
    if (bits != slot_bits_) {
      rebuild(bits);
      return;
    }
  }
  if (next_rank_ > rank_limit_) rebuild(slot_bits_);
}

// Renumbers the pending keys 0 ... size-1 in (time, rank) order with a new field split. A sorted
// array is a valid heap, so no sift is needed afterwards.
void EventQueue::rebuild(int slot_bits) {
  Key* h = keys_.get();
  if (size_ > 0) std::sort(h + kRoot, h + kRoot + size_, before);
  const uint64_t old_mask = slot_mask_;
  slot_bits_ = slot_bits;
  slot_mask_ = (uint64_t{1} << slot_bits_) - 1;
  // Leave room for at least as many pushes as there are pending events before the next rebuild.
  int rank_bits = std::min(64 - slot_bits_, max_rank_bits_);
  while (rank_bits < 64 - slot_bits_ && (uint64_t{1} << rank_bits) < 2 * size_ + 2) ++rank_bits;
  rank_limit_ = rank_bits == 64 ? UINT64_MAX : (uint64_t{1} << rank_bits) - 1;
  for (size_t i = 0; i < size_; ++i) {
    Key& k = h[kRoot + i];
    k.code = (uint64_t{i} << slot_bits_) | (k.code & old_mask);
  }
  next_rank_ = size_;
  ++rebuilds_;
}

bool EventQueue::valid() const {
  const Key* h = keys_.get();
  std::vector<bool> live(payloads_.size(), false);
  for (size_t i = kRoot; i < kRoot + size_; ++i) {
    if (i > kRoot && before(h[i], h[i / 4 + 2])) return false;
    const uint32_t slot = slot_of(h[i]);
    if (slot >= payloads_.size() || live[slot]) return false;
    live[slot] = true;
    if ((h[i].code >> slot_bits_) >= next_rank_) return false;
    if (payloads_[slot].seq >= next_seq_) return false;
  }
  return size_ + free_slots_.size() == payloads_.size();
}

}  // namespace galaxy::sim
