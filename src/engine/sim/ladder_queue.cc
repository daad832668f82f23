#include "engine/sim/ladder_queue.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace galaxy::sim {

namespace {

constexpr uint32_t kInitialChunks = 64;
constexpr size_t kInitialFront = 64;
// Free slots left on each side of the front when it is refilled or recentred, so that inserts at
// either end rarely move it.
constexpr size_t kFrontSlack = 8;

bool before(const Event& x, const Event& y) {
  return x.time < y.time;
}

// Stable by time. Buckets sorted here hold at most Tuning::small events, where this beats
// std::stable_sort (which allocates).
void insertion_sort(Event* first, Event* last) {
  for (Event* i = first + 1; i < last; ++i) {
    const Event e = *i;
    Event* j = i;
    while (j > first && before(e, *(j - 1))) {
      *j = *(j - 1);
      --j;
    }
    *j = e;
  }
}

}  // namespace

LadderQueue::LadderQueue(const Tuning& tuning) : tuning_(tuning) {
  assert(tuning.per_bucket >= 1 && tuning.small >= 1 && tuning.spill_moves >= 1);
  assert(tuning.max_buckets >= 8 && std::has_single_bit(tuning.max_buckets));
  assert(tuning.top_buckets >= 8 && std::has_single_bit(tuning.top_buckets));
  front_.resize(kInitialFront);
  grow_pool(kInitialChunks);
  reset();
}

void LadderQueue::reserve(size_t n) {
  const uint64_t chunks = n / kChunk + kInitialChunks;
  if (chunks > chunks_) grow_pool(chunks);
}

void LadderQueue::clear() {
  size_ = 0;
  top_ = Bucket{};
  never_ = Bucket{};
  free_chunks_.clear();
  for (uint32_t c = chunks_; c-- > 0;) free_chunks_.push_back(c);
  reset();
}

// An empty queue starts over with every level empty, so that the next pushes gather in the top
// and the first top() sizes rung 0 to them.
void LadderQueue::reset() const {
  depth_ = 0;
  bounds_[0] = 0;
  front_head_ = front_tail_ = 0;
}

void LadderQueue::grow_pool(uint64_t chunks) const {
  chunks = std::max<uint64_t>(chunks, kInitialChunks);
  assert(chunks <= UINT32_MAX && "LadderQueue: too many pending events");
  const size_t events = chunks * kChunk;
  std::unique_ptr<Event[], AlignedDelete> fresh(
      static_cast<Event*>(::operator new[](events * sizeof(Event), std::align_val_t{kAlign})));
  if (pool_) std::memcpy(fresh.get(), pool_.get(), size_t{chunks_} * kChunk * sizeof(Event));
  pool_ = std::move(fresh);
  chunk_next_.resize(chunks);
  for (uint64_t c = chunks; c-- > chunks_;) free_chunks_.push_back(static_cast<uint32_t>(c));
  chunks_ = static_cast<uint32_t>(chunks);
}

// Reading a chain must not move the pool under it: rungs are filled while their source is read.
void LadderQueue::ensure_free_chunks(uint64_t n) const {
  if (free_chunks_.size() < n) grow_pool(std::max<uint64_t>(uint64_t{chunks_} * 2, chunks_ + n));
}

// Calls f on every event of b in push order, then empties b. A chunk goes back to the free list
// once read, so f may append it to another chain right away (while it is still cached).
template <class F>
void LadderQueue::drain(Bucket& b, F&& f) const {
  uint64_t left = b.count;
  uint32_t c = b.head;
  const Event* const pool = pool_.get();
  auto prefetch = [pool](uint32_t chunk) {
    const char* p = reinterpret_cast<const char*>(pool + size_t{chunk} * kChunk);
    for (size_t off = 0; off < kChunk * sizeof(Event); off += 64) __builtin_prefetch(p + off);
  };
  // Chains written long ago are in DRAM; the next chunk's address is known a chunk ahead.
  if (left > kChunk) prefetch(chunk_next_[c]);
  while (left > 0) {
    const uint32_t n = left < kChunk ? static_cast<uint32_t>(left) : kChunk;
    const uint32_t next = chunk_next_[c];
    if (left > 2 * kChunk) prefetch(chunk_next_[next]);
    const Event* p = pool + size_t{c} * kChunk;
    for (uint32_t i = 0; i < n; ++i) f(p[i]);
    free_chunks_.push_back(c);
    left -= n;
    c = next;
  }
  b = Bucket{};
}

uint32_t LadderQueue::next_nonempty(const Rung& r) const {
  if (r.cur >= r.nbuckets) return r.nbuckets;
  size_t w = r.cur >> 6;
  uint64_t bits = r.nonempty[w] & (~uint64_t{0} << (r.cur & 63));
  const size_t words = (size_t{r.nbuckets} + 63) >> 6;
  while (bits == 0) {
    if (++w == words) return r.nbuckets;
    bits = r.nonempty[w];
  }
  return static_cast<uint32_t>(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
}

// Opens rung depth_ over [lo, hi) with about count / per_bucket buckets (a power of two between 8
// and max_buckets) of power-of-two width, all empty.
void LadderQueue::start_rung(Time lo, Time hi, uint64_t count, uint32_t max_buckets) const {
  assert(depth_ < kMaxRungs && lo < hi);
  const int level = depth_;
  Rung& r = rungs_[level];
  const uint64_t want = std::clamp<uint64_t>(count / tuning_.per_bucket, 8, max_buckets);
  const int lg = std::bit_width(want - 1);  // log2 of want rounded up to a power of two
  const Time span = hi - 1 - lo;
  const int width_bits = std::bit_width(span);
  r.start = lo;
  r.shift = width_bits > lg ? width_bits - lg : 0;
  r.nbuckets = static_cast<uint32_t>(span >> r.shift) + 1;
  r.cur = 0;
  if (r.buckets.size() < r.nbuckets) r.buckets.resize(r.nbuckets);
  std::fill_n(r.buckets.begin(), r.nbuckets, Bucket{});
  r.first.assign(r.nbuckets + 1, 0);
  const size_t words = (size_t{r.nbuckets} + 63) >> 6;
  if (r.nonempty.size() < words) r.nonempty.resize(words);
  std::fill_n(r.nonempty.begin(), words, uint64_t{0});
  bounds_[level] = hi;
  bounds_[level + 1] = lo;
  depth_ = level + 1;
  ++stats_.rungs_made;
  stats_.max_depth = std::max(stats_.max_depth, depth_);
}

// Opens a rung over [lo, hi) and moves into it seg[0, n) then the chain, in that order (push order
// for equal times), by counting sort into the rung's array.
void LadderQueue::split(const Event* seg, size_t n, Bucket* chain, Time lo, Time hi) const {
  if (chain != nullptr && chain->count > 0) {
    // One contiguous source: the chain is read from memory once, the passes below hit cache.
    const size_t total = n + chain->count;
    if (gather_.size() < total) gather_.resize(total + total / 2);
    std::copy(seg, seg + n, gather_.begin());
    Event* out = gather_.data() + n;
    drain(*chain, [&out](const Event& e) { *out++ = e; });
    seg = gather_.data();
    n = total;
  }
  assert(n < UINT32_MAX);
  start_rung(lo, hi, n, tuning_.max_buckets);
  Rung& r = rungs_[depth_ - 1];
  const Time start = r.start;
  const int shift = r.shift;
  uint32_t* const first = r.first.data();
  for (size_t k = 0; k < n; ++k) ++first[((seg[k].time - start) >> shift) + 1];
  fill_.resize(r.nbuckets);
  for (uint32_t i = 0; i < r.nbuckets; ++i) {
    fill_[i] = first[i];
    first[i + 1] += first[i];
    if (first[i + 1] != first[i]) r.nonempty[i >> 6] |= uint64_t{1} << (i & 63);
  }
  if (r.dense.size() < n) r.dense.resize(n + n / 2);
  Event* const dense = r.dense.data();
  uint32_t* const fill = fill_.data();
  for (size_t k = 0; k < n; ++k) dense[fill[(seg[k].time - start) >> shift]++] = seg[k];
}

// Moves seg[0, n) then the chain into the (empty) front, sorting by time unless they are known to
// hold one time.
void LadderQueue::to_front(const Event* seg, size_t n, Bucket& chain, bool sort) const {
  assert(front_head_ == front_tail_);
  const size_t total = n + chain.count;
  if (front_.size() < total + 2 * kFrontSlack) front_.resize(2 * total + 2 * kFrontSlack);
  Event* const f = front_.data() + kFrontSlack;
  std::copy(seg, seg + n, f);
  Event* out = f + n;
  if (chain.count > 0) drain(chain, [&out](const Event& e) { *out++ = e; });
  front_head_ = kFrontSlack;
  front_tail_ = kFrontSlack + total;
  if (!sort) return;
  if (total <= tuning_.small) {
    insertion_sort(f, f + total);
  } else {
    std::stable_sort(f, f + total, before);
  }
}

void LadderQueue::transfer_top() const {
  assert(depth_ == 0 && front_head_ == front_tail_ && top_.count > 0);
  ++stats_.top_transfers;
  const Time end = top_.max + 1;  // top times are below kNever
  if (top_.count <= tuning_.small || top_.min == top_.max) {
    to_front(nullptr, 0, top_, top_.min != top_.max);
    bounds_[0] = end;
    return;
  }
  // Rung 0 is appended to by most pushes until it is exhausted, so its buckets are chains from the
  // start. The top's chunks are freed as they are read, so filling the rung needs at most one
  // fresh chunk per bucket, and the pool does not move under the read.
  start_rung(top_.min, end, top_.count, tuning_.top_buckets);
  Rung& r = rungs_[0];
  ensure_free_chunks(r.nbuckets + 1);
  drain(top_, [this, &r](const Event& e) { append_rung(r, e); });
}

void LadderQueue::refill() const {
  assert(size_ > 0 && front_head_ == front_tail_);
  for (;;) {
    if (depth_ == 0) {
      if (top_.count > 0) {
        transfer_top();
        if (front_head_ != front_tail_) return;
        continue;
      }
      // Only kNever events are left: the front takes them in push order, and the front now
      // covers every earlier time.
      assert(never_.count > 0);
      to_front(nullptr, 0, never_, false);
      bounds_[0] = kNever;
      return;
    }
    const int level = depth_ - 1;
    Rung& r = rungs_[level];
    const uint32_t i = next_nonempty(r);
    if (i == r.nbuckets) {
      --depth_;  // the front now reaches the end of this rung: bounds_[depth_] is its end
      continue;
    }
    r.cur = i;
    r.nonempty[i >> 6] &= ~(uint64_t{1} << (i & 63));
    Bucket& b = r.buckets[i];
    // Taken now; r.dense is not rewritten until the next rung at this level.
    const Event* const seg = r.dense.data() + r.first[i];
    const size_t n = r.first[i + 1] - r.first[i];
    r.first[i] = r.first[i + 1];
    const size_t total = n + b.count;
    const Time end = i + 1 == r.nbuckets ? bounds_[level] : r.start + (Time{i + 1} << r.shift);
    bool one_time = false;  // then already in push order
    if (total > tuning_.small) {
      Time lo = b.min, hi = b.max;
      for (size_t k = 0; k < n; ++k) {
        lo = std::min(lo, seg[k].time);
        hi = std::max(hi, seg[k].time);
      }
      one_time = lo == hi;
      if (!one_time && depth_ < kMaxRungs) {
        // The rung covers the bucket's content; later pushes above it land in this bucket again,
        // which is revisited when the new rung is exhausted (r.cur stays at i).
        split(seg, n, &b, lo, hi + 1);
        continue;
      }
    }
    to_front(seg, n, b, !one_time);
    bounds_[depth_] = end;
    r.cur = i + 1;
    // A chain was written long ago: start fetching the next bucket's while the front is consumed.
    const uint32_t next = next_nonempty(r);
    if (next < r.nbuckets && r.buckets[next].count > 0) {
      const Bucket& nb = r.buckets[next];
      const char* p = reinterpret_cast<const char*>(pool_.get() + size_t{nb.head} * kChunk);
      const uint64_t m = std::min<uint64_t>(nb.count, kChunk);
      for (size_t off = 0; off < m * sizeof(Event); off += 64) __builtin_prefetch(p + off);
    }
    return;
  }
}

void LadderQueue::spill_front() const {
  ++stats_.front_spills;
  const size_t n = front_tail_ - front_head_;
  // The front is moved into the rung's array before anything else touches it.
  split(front_.data() + front_head_, n, nullptr, front_[front_head_].time, bounds_[depth_]);
  front_head_ = front_tail_ = 0;
}

// Leaves at least `room` free slots on each side of the front's events.
void LadderQueue::recentre_front(size_t room) const {
  const size_t n = front_tail_ - front_head_;
  const size_t need = n + 2 * std::max(room, n / 2 + kFrontSlack);
  if (front_.size() < need) {
    std::vector<Event> fresh(need);
    std::copy(front_.begin() + static_cast<ptrdiff_t>(front_head_),
              front_.begin() + static_cast<ptrdiff_t>(front_tail_),
              fresh.begin() + static_cast<ptrdiff_t>((need - n) / 2));
    front_.swap(fresh);
  } else {
    const size_t at = (front_.size() - n) / 2;
    std::memmove(static_cast<void*>(front_.data() + at), front_.data() + front_head_,
                 n * sizeof(Event));
  }
  front_head_ = (front_.size() - n) / 2;
  front_tail_ = front_head_ + n;
}

void LadderQueue::insert_front(const Event& e) const {
  if (front_head_ == 0 || front_tail_ == front_.size()) recentre_front(1);
  Event* const f = front_.data();
  // After every event at the same time: e was pushed last.
  Event* const at = std::upper_bound(f + front_head_, f + front_tail_, e,
                                     [](const Event& x, const Event& y) { return before(x, y); });
  const size_t p = static_cast<size_t>(at - f);
  const size_t left = p - front_head_;
  const size_t right = front_tail_ - p;
  if (left > tuning_.spill_moves && right > tuning_.spill_moves && depth_ < kMaxRungs &&
      f[front_tail_ - 1].time != kNever) {
    // Times spread over the middle of a large front: hand it back to a rung, where each event
    // costs O(1), rather than moving half the front per insert.
    spill_front();
    route(e);
    return;
  }
  if (left < right) {
    std::memmove(static_cast<void*>(f + front_head_ - 1), f + front_head_, left * sizeof(Event));
    f[p - 1] = e;
    --front_head_;
  } else {
    std::memmove(static_cast<void*>(f + p + 1), f + p, right * sizeof(Event));
    f[p] = e;
    ++front_tail_;
  }
}

bool LadderQueue::valid() const {
  std::vector<bool> chunk_used(chunks_, false);
  uint64_t total = 0;
  std::unordered_map<Time, uint64_t> last_seq;  // per chain: equal times must be in push order
  // Walks a chain: chunks unshared, times in [lo, hi) (or == kNever when never).
  auto check_chain = [&](const Bucket& b, Time lo, Time hi, bool never, bool fresh_chain = true) {
    uint64_t left = b.count;
    uint32_t c = b.head;
    if (fresh_chain) last_seq.clear();
    while (left > 0) {
      if (c >= chunks_ || chunk_used[c]) return false;
      chunk_used[c] = true;
      const uint32_t n = left < kChunk ? static_cast<uint32_t>(left) : kChunk;
      for (uint32_t k = 0; k < n; ++k) {
        const Event& e = pool_[size_t{c} * kChunk + k];
        if (never ? e.time != kNever : (e.time < lo || e.time >= hi)) return false;
        if (e.time < b.min || e.time > b.max) return false;
        if (e.seq >= next_seq_) return false;
        const auto [it, fresh] = last_seq.try_emplace(e.time, e.seq);
        if (!fresh && it->second >= e.seq) return false;
        it->second = e.seq;
      }
      if (left <= kChunk && c != b.tail) return false;
      left -= n;
      c = chunk_next_[c];
    }
    total += b.count;
    return true;
  };

  if (depth_ < 0 || depth_ > kMaxRungs) return false;
  for (int r = 0; r < depth_; ++r) {
    if (bounds_[r + 1] > bounds_[r]) return false;
  }
  if (!check_chain(top_, bounds_[0], kNever, false)) return false;
  if (!check_chain(never_, 0, 0, true)) return false;
  for (int level = 0; level < depth_; ++level) {
    const Rung& r = rungs_[level];
    const Time lo = bounds_[level + 1];
    const Time hi = bounds_[level];
    if (r.start > lo || r.nbuckets == 0) return false;
    if (lo < hi && ((hi - 1 - r.start) >> r.shift) + 1 != r.nbuckets) return false;
    for (uint32_t i = 0; i < r.nbuckets; ++i) {
      const Bucket& b = r.buckets[i];
      const bool bit = (r.nonempty[i >> 6] >> (i & 63)) & 1;
      if (i < r.cur) {
        // Exhausted; its array part is not looked at again (taking bucket i + 1 moved its start).
        if (bit || b.count > 0) return false;
        continue;
      }
      if (bit != (b.count > 0 || r.first[i] != r.first[i + 1])) return false;
      const Time b_lo = std::max(lo, r.start + (Time{i} << r.shift));
      const Time b_hi = i + 1 == r.nbuckets ? hi : std::min(hi, r.start + (Time{i + 1} << r.shift));
      if (r.first[i] > r.first[i + 1] || r.first[i + 1] > r.dense.size()) return false;
      last_seq.clear();
      for (uint32_t k = r.first[i]; k < r.first[i + 1]; ++k) {
        const Event& e = r.dense[k];
        if (e.time < b_lo || e.time >= b_hi || e.seq >= next_seq_) return false;
        const auto [it, fresh] = last_seq.try_emplace(e.time, e.seq);
        if (!fresh && it->second >= e.seq) return false;
        it->second = e.seq;
      }
      total += r.first[i + 1] - r.first[i];
      // The chain follows the array in push order: last_seq carries over.
      if (!check_chain(b, b_lo, b_hi, false, false)) return false;
    }
  }
  // The front: sorted by (time, seq), below its bound except kNever events taken from never_.
  const Time front_end = bounds_[depth_];
  for (size_t i = front_head_; i < front_tail_; ++i) {
    const Event& e = front_[i];
    if (e.time >= front_end && !(e.time == kNever && front_end == kNever && depth_ == 0)) {
      return false;
    }
    if (e.seq >= next_seq_) return false;
    if (i > front_head_) {
      const Event& p = front_[i - 1];
      if (p.time > e.time || (p.time == e.time && p.seq >= e.seq)) return false;
    }
  }
  if (front_tail_ < front_head_ || front_tail_ > front_.size()) return false;
  total += front_tail_ - front_head_;
  if (total != size_) return false;
  // Every chunk is in exactly one chain or on the free list.
  uint64_t used = 0;
  for (bool u : chunk_used) used += u ? 1 : 0;
  if (used + free_chunks_.size() != chunks_) return false;
  std::unordered_set<uint32_t> free(free_chunks_.begin(), free_chunks_.end());
  if (free.size() != free_chunks_.size()) return false;
  for (uint32_t c : free_chunks_) {
    if (c >= chunks_ || chunk_used[c]) return false;
  }
  return true;
}

}  // namespace galaxy::sim
