// A FIFO on a std::vector that allocates nothing while empty (std::deque allocates ~600 bytes
// on construction, which matters for 18,304 NICs x 40 VPs x several queues).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace galaxy {

template <class T>
class Fifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  void push_back(T v) { items_.push_back(std::move(v)); }
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  void pop_front() {
    ++head_;
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= 64 && head_ * 2 >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }
  T& operator[](size_t i) { return items_[head_ + i]; }
  const T& operator[](size_t i) const { return items_[head_ + i]; }
  // Removes the i-th item from the front, keeping the order of the others.
  void erase_at(size_t i) {
    if (i == 0) return pop_front();
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(head_ + i));
  }
  void clear() {
    items_.clear();
    head_ = 0;
  }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
};

}  // namespace galaxy
