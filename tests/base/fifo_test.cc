#include "base/fifo.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace galaxy {
namespace {

TEST(FifoTest, FirstInFirstOut) {
  Fifo<int> q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0u);
  q.push_back(1);
  q.push_back(2);
  q.push_back(3);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.front(), 1);
  q.front() = 10;
  EXPECT_EQ(static_cast<const Fifo<int>&>(q).front(), 10);
  q.pop_front();
  EXPECT_EQ(q.front(), 2);
  q.push_back(4);
  std::vector<int> out;
  while (!q.empty()) {
    out.push_back(q.front());
    q.pop_front();
  }
  EXPECT_EQ(out, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(FifoTest, OrderSurvivesCompactionWithMoveOnlyItems) {
  Fifo<std::unique_ptr<int>> q;
  int next_in = 0, next_out = 0;
  // A standing queue that grows and shrinks, so compaction happens at many head positions.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 100 + round; ++i) q.push_back(std::make_unique<int>(next_in++));
    for (int i = 0; i < 90 + 2 * (round % 7); ++i) {
      ASSERT_FALSE(q.empty());
      ASSERT_EQ(*q.front(), next_out++);
      q.pop_front();
    }
    ASSERT_EQ(q.size(), static_cast<size_t>(next_in - next_out));
  }
  while (!q.empty()) {
    ASSERT_EQ(*q.front(), next_out++);
    q.pop_front();
  }
  EXPECT_EQ(next_out, next_in);
}

TEST(FifoTest, PoppedItemsAreReleasedAfterManyPops) {
  // A queue that never drains must still drop what was popped long ago (the vector is compacted).
  Fifo<std::shared_ptr<int>> q;
  std::vector<std::weak_ptr<int>> seen;
  auto push = [&](int i) {
    auto item = std::make_shared<int>(i);
    seen.push_back(item);
    q.push_back(std::move(item));
  };
  for (int i = 0; i < 10; ++i) push(i);
  for (int i = 10; i < 10000; ++i) {
    push(i);
    ASSERT_EQ(*q.front(), i - 10);
    q.pop_front();
  }
  EXPECT_EQ(q.size(), 10u);
  size_t alive = 0;
  for (const auto& w : seen) alive += !w.expired();
  EXPECT_LT(alive, 200u);  // the 10 queued plus at most one uncompacted stretch
  for (size_t i = seen.size() - 10; i < seen.size(); ++i) EXPECT_FALSE(seen[i].expired());
  EXPECT_TRUE(seen[0].expired());
}

TEST(FifoTest, ClearEmptiesAndReleases) {
  Fifo<std::shared_ptr<int>> q;
  auto item = std::make_shared<int>(1);
  std::weak_ptr<int> w = item;
  q.push_back(std::move(item));
  q.push_back(std::make_shared<int>(2));
  q.pop_front();
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(w.expired());
  q.push_back(std::make_shared<int>(3));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(*q.front(), 3);
}

}  // namespace
}  // namespace galaxy
