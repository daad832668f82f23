// The VP directory's datagrams (engine/live/directory.h): golden bytes, round trips and every
// refusal with its id.
#include "engine/live/directory.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <vector>

#include "engine/live/link.h"
#include "wire/big_endian.h"
#include "wire/crc16.h"

namespace galaxy::live {
namespace {

std::vector<uint8_t> bytes_of(std::span<const uint8_t> b) {
  return {b.begin(), b.end()};
}

// Rewrites the CRC after a test changed a field, so that the field's own check is what fails.
void fix_crc(std::vector<uint8_t>& b) {
  wire::put_be(b, b.size() - 2, 2, wire::crc16(std::span(b).first(b.size() - 2)));
}

uint16_t error_id(const Status& s) {
  return s.ok() ? 0 : s.error().id;
}

TEST(Directory, QueryHasItsGoldenBytes) {
  const auto b = encode_directory_query({.node = 0x01020304, .vp = 7, .tag = 0x1122334455667788});
  const std::vector<uint8_t> head = {0x47, 0x56, 0x44, 0x31, 1,    1,    7,    0,
                                     0x01, 0x02, 0x03, 0x04, 0x11, 0x22, 0x33, 0x44,
                                     0x55, 0x66, 0x77, 0x88, 0,    0};
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.begin() + 22), head);
  EXPECT_EQ(wire::get_be(b, 22, 2), wire::crc16(std::span(b).first(22)));
  auto q = decode_directory_query(b);
  ASSERT_TRUE(q.ok()) << q.error().to_string();
  EXPECT_EQ(*q, (DirectoryQuery{.node = 0x01020304, .vp = 7, .tag = 0x1122334455667788}));
}

TEST(Directory, AnswerRoundTripsEveryStatus) {
  for (uint8_t s = 0; s < kDirectoryStatusCount; ++s) {
    const DirectoryAnswer a{.node = 40,
                            .vp = 255,
                            .status = static_cast<DirectoryStatus>(s),
                            .tag = ~uint64_t{0},
                            .generation = 0xDEADBEEF,
                            .port = 65535};
    const auto b = encode_directory_answer(a);
    EXPECT_EQ(b[7], s);
    EXPECT_EQ(wire::get_be(b, 24, 2), 65535u);
    auto d = decode_directory_answer(b);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    EXPECT_EQ(*d, a);
    EXPECT_FALSE(directory_status_name(a.status).empty());
  }
}

TEST(Directory, EveryBrokenFieldIsRefusedWithItsId) {
  const auto good = bytes_of(encode_directory_query({.node = 3, .vp = 1, .tag = 9}));
  auto refused = [](std::vector<uint8_t> b, bool crc) {
    if (crc) fix_crc(b);
    return error_id(decode_directory_query(b).status());
  };
  EXPECT_EQ(refused({}, false), 4870);
  EXPECT_EQ(refused(std::vector<uint8_t>(good.begin(), good.end() - 1), false), 4870);
  auto b = good;
  b[1] ^= 0xFF;
  EXPECT_EQ(refused(b, true), 4871);
  b = good;
  b[4] = 2;
  EXPECT_EQ(refused(b, true), 4872);
  b = good;
  b[5] = 2;  // an answer's type in a query's size
  EXPECT_EQ(refused(b, true), 4873);
  b = good;
  b[12] ^= 1;  // the tag changed after the CRC
  EXPECT_EQ(refused(b, false), 4874);
  b = good;
  b[7] = 1;
  EXPECT_EQ(refused(b, true), 4875);
  b = good;
  b[21] = 1;
  EXPECT_EQ(refused(b, true), 4875);

  auto a = bytes_of(encode_directory_answer({.node = 3, .vp = 1}));
  a[7] = kDirectoryStatusCount;
  fix_crc(a);
  EXPECT_EQ(error_id(decode_directory_answer(a).status()), 4876);
  a = bytes_of(encode_directory_answer({.node = 3, .vp = 1}));
  a[29] = 1;
  fix_crc(a);
  EXPECT_EQ(error_id(decode_directory_answer(a).status()), 4875);
  // A query is not an answer, and the other way round.
  EXPECT_EQ(error_id(decode_directory_answer(good).status()), 4870);
  EXPECT_EQ(error_id(decode_directory_query(encode_directory_answer({})).status()), 4870);
}

TEST(Directory, ItsDatagramsAreToldFromLinkFrames) {
  EXPECT_TRUE(is_directory_datagram(encode_directory_query({})));
  EXPECT_TRUE(is_directory_datagram(encode_directory_answer({})));
  LinkFrame f;
  f.type = LinkFrameType::kHandshake;
  f.link_id = 1;
  f.epoch = 1;
  std::vector<uint8_t> frame;
  encode_link_frame(f, &frame);
  EXPECT_FALSE(is_directory_datagram(frame));
  EXPECT_FALSE(is_directory_datagram(std::vector<uint8_t>{0x47, 0x56, 0x44}));
}

TEST(Directory, AnUnansweredQuestionTimesOut) {
  // The discard port, where no daemon answers: a timeout, not a hang.
  auto a = ask_directory(htonl(INADDR_LOOPBACK), 9, 0, 0, 40);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(a.error().id == 4879 || a.error().id == 4880) << a.error().to_string();
}

}  // namespace
}  // namespace galaxy::live
