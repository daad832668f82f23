#include "glex/copy_engines.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace galaxy::glex {
namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed + (i >> 9));
  return v;
}

TEST(CopyEngines, EverySizeAndAlignmentCopiesExactly) {
  CopyEngines e;
  for (size_t n : {size_t{1}, size_t{4095}, CopyEngines::kSplitBytes - 1, CopyEngines::kSplitBytes,
                   CopyEngines::kSplitBytes + 7, size_t{3} << 20}) {
    for (size_t off : {0, 1, 63}) {
      auto src = pattern(n + off, static_cast<uint8_t>(n + off));
      std::vector<uint8_t> dst(n + 2 * off + 2, 0xEE);
      e.copy(dst.data() + off + 1, src.data() + off, n);
      ASSERT_EQ(dst[off], 0xEE) << n << " " << off;
      ASSERT_EQ(dst[off + 1 + n], 0xEE) << n << " " << off;
      ASSERT_EQ(std::memcmp(dst.data() + off + 1, src.data() + off, n), 0) << n << " " << off;
    }
  }
}

TEST(CopyEngines, LargeCopiesAreSplitWithTheHelper) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: no helper engine";
  unsetenv("GLEX_COPY_ENGINES");
  CopyEngines e;
  auto src = pattern(4 << 20, 3);
  std::vector<uint8_t> dst(src.size());
  for (int i = 0; i < 200 && e.split_copies() == 0; ++i) e.copy(dst.data(), src.data(), src.size());
  EXPECT_GT(e.split_copies(), 0u) << "the helper never took a half";
  EXPECT_EQ(dst, src);
}

TEST(CopyEngines, OneEngineWhenAskedFor) {
  setenv("GLEX_COPY_ENGINES", "1", 1);
  CopyEngines e;
  unsetenv("GLEX_COPY_ENGINES");
  auto src = pattern(1 << 20, 9);
  std::vector<uint8_t> dst(src.size());
  for (int i = 0; i < 20; ++i) e.copy(dst.data(), src.data(), src.size());
  EXPECT_EQ(e.split_copies(), 0u);
  EXPECT_EQ(dst, src);
}

}  // namespace
}  // namespace galaxy::glex
