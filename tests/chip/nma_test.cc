#include "chip/nma.h"

#include <gtest/gtest.h>

#include "base/time_units.h"
#include "chip/nrc.h"
#include "chip_test_util.h"

namespace galaxy::chip {
namespace {

using testing::request;
using testing::serve;
using wire::NmpError;
using wire::NmpType;

class NmaTest : public ::testing::Test {
 protected:
  NmaTest() { nrc.set_chip_id(7); }
  Nrc nrc;
};

TEST_F(NmaTest, ReadsOneAndTwoRegisters) {
  nrc.write_register(reg::kScratch, 0x1234);
  NmaWork work;
  auto r = serve(nrc, request(NmpType::kRegReadRequest, {reg::kScratch, reg::kChipId}), &work);
  EXPECT_EQ(r.nmp_type, NmpType::kRegReadResponse);
  EXPECT_EQ(r.data.count, 2);
  EXPECT_EQ(r.data.value[0], 0x1234u);
  EXPECT_EQ(r.data.value[1], 7u | (1u << 16));
  EXPECT_EQ(work.kind, NmaWork::Kind::kRegRead);
  EXPECT_EQ(work.count, 2);
  // The response goes back to the requester, on the backward route, hop 0 already taken.
  EXPECT_EQ(r.dest_id, 100);
  EXPECT_EQ(r.src_id, 7);
  EXPECT_EQ(r.transaction_id, 0xBEEF);
  EXPECT_EQ(r.hop_count, 1);
}

TEST_F(NmaTest, WriteIsAcknowledgedAndApplied) {
  NmaWork work;
  auto r = serve(nrc, request(NmpType::kRegWriteRequest, {reg::kScratch}, {99}), &work);
  EXPECT_EQ(r.nmp_type, NmpType::kRegWriteResponse);
  EXPECT_EQ(work.kind, NmaWork::Kind::kRegWrite);
  EXPECT_EQ(nrc.read_register(reg::kScratch).value, 99u);
}

TEST_F(NmaTest, ErrorResponsesSayWhyAndChangeNothing) {
  nrc.write_register(reg::kScratch, 5);
  struct Case {
    wire::MgmtPacket req;
    NmpError want;
  } cases[] = {
      {request(NmpType::kRegReadRequest, {0x7FFF}), NmpError::kAddressOutOfRange},
      {request(NmpType::kRegReadRequest, {0x0FF0}), NmpError::kAddressOutOfRange},
      {request(NmpType::kRegWriteRequest, {reg::kTemperature}, {1}), NmpError::kReadOnly},
      {request(NmpType::kRegWriteRequest, {reg::kChipCtrl}, {9}), NmpError::kBadValue},
      // The second register is bad: the first must not be written either.
      {request(NmpType::kRegWriteRequest, {reg::kScratch, reg::kNmaErrors}, {6, 1}),
       NmpError::kReadOnly},
      {request(NmpType::kRegReadResponse, {reg::kScratch}), NmpError::kUnknownType},
  };
  for (const auto& c : cases) {
    auto r = serve(nrc, c.req);
    EXPECT_EQ(r.nmp_type, NmpType::kRegError) << wire::nmp_error_name(c.want);
    EXPECT_EQ(r.data.error, c.want);
  }
  EXPECT_EQ(nrc.read_register(reg::kScratch).value, 5u);
  EXPECT_EQ(nrc.read_register(reg::kNmaErrors).value, std::size(cases));
}

TEST_F(NmaTest, EepromReadAndWriteUpToSixBytes) {
  auto w = serve(
      nrc, request(NmpType::kEepromWriteRequest, {10, 11, 12, 13, 14, 15}, {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(w.nmp_type, NmpType::kEepromWriteResponse);
  NmaWork work;
  auto r = serve(nrc, request(NmpType::kEepromReadRequest, {15, 10, 0xFFFF}), &work);
  EXPECT_EQ(r.nmp_type, NmpType::kEepromReadResponse);
  EXPECT_EQ(r.data.bytes[0], 6);
  EXPECT_EQ(r.data.bytes[1], 1);
  EXPECT_EQ(r.data.bytes[2], 0xFF);  // blank
  EXPECT_EQ(work.kind, NmaWork::Kind::kEepromRead);
  EXPECT_EQ(work.count, 3);
}

TEST_F(NmaTest, WrongKeyIsRefusedAndCounted) {
  nrc.write_register(reg::kMKey, 0xABCDEF);
  nrc.write_register(reg::kChipCtrl, 1);  // writes need the key
  auto bad = request(NmpType::kRegWriteRequest, {reg::kScratch}, {42});
  bad.m_key = 1;
  auto r = serve(nrc, bad);
  EXPECT_EQ(r.nmp_type, NmpType::kRegError);
  EXPECT_EQ(r.data.error, NmpError::kWrongKey);
  EXPECT_EQ(nrc.read_register(reg::kScratch).value, 0u);
  EXPECT_EQ(nrc.read_register(reg::kMKeyViolations).value, 1u);
  // Reads are still open at level 1; the right key writes.
  EXPECT_EQ(serve(nrc, request(NmpType::kRegReadRequest, {reg::kScratch})).nmp_type,
            NmpType::kRegReadResponse);
  bad.m_key = 0xABCDEF;
  EXPECT_EQ(serve(nrc, bad).nmp_type, NmpType::kRegWriteResponse);
  EXPECT_EQ(nrc.read_register(reg::kScratch).value, 42u);
}

// IBA 14.2.4's lease: the first refused request starts it, a request with the key stops it,
// and a lease that runs out drops protection to level 0 so a successor can take the chip over.
TEST_F(NmaTest, LeaseLetsASuccessorInOnlyWhenTheKeyHolderIsSilent) {
  constexpr uint64_t kS = units::kSecond;
  nrc.write_register(reg::kMKey, 0xABCDEF);
  nrc.write_register(reg::kMKeyLease, 2);
  nrc.write_register(reg::kChipCtrl, 2);  // reads and writes need the key
  auto stranger = request(NmpType::kRegReadRequest, {reg::kScratch});
  stranger.m_key = 7;
  auto owner = stranger;
  owner.m_key = 0xABCDEF;
  EXPECT_EQ(serve(nrc, stranger, nullptr, 10 * kS).data.error, NmpError::kWrongKey);  // starts
  EXPECT_EQ(serve(nrc, stranger, nullptr, 11 * kS).data.error, NmpError::kWrongKey);
  // The owner speaks: the lease stops, and starts again at the next refusal.
  EXPECT_EQ(serve(nrc, owner, nullptr, 11 * kS).nmp_type, NmpType::kRegReadResponse);
  EXPECT_EQ(serve(nrc, stranger, nullptr, 12 * kS).data.error, NmpError::kWrongKey);
  EXPECT_EQ(serve(nrc, stranger, nullptr, 13 * kS).data.error, NmpError::kWrongKey);
  EXPECT_EQ(nrc.read_register(reg::kMKeyViolations).value, 4u);
  // Two seconds after that refusal with no word from the owner: protection is off.
  EXPECT_EQ(serve(nrc, stranger, nullptr, 14 * kS).nmp_type, NmpType::kRegReadResponse);
  EXPECT_EQ(nrc.read_register(reg::kChipCtrl).value & 3, 0u);
  EXPECT_EQ(nrc.read_register(reg::kMKeyViolations).value, 4u);
  // The successor places its own key.
  auto place = request(NmpType::kRegWriteRequest, {reg::kMKey, reg::kChipCtrl}, {0x5555, 2});
  EXPECT_EQ(serve(nrc, place, nullptr, 14 * kS).nmp_type, NmpType::kRegWriteResponse);
  EXPECT_EQ(serve(nrc, owner, nullptr, 15 * kS).data.error, NmpError::kWrongKey);
}

TEST_F(NmaTest, NoLeaseMeansProtectionNeverEnds) {
  nrc.write_register(reg::kMKey, 0xABCDEF);
  nrc.write_register(reg::kChipCtrl, 2);
  auto stranger = request(NmpType::kRegReadRequest, {reg::kScratch});
  for (uint64_t s = 0; s < 5; ++s)
    EXPECT_EQ(serve(nrc, stranger, nullptr, s * 1000 * units::kSecond).data.error,
              NmpError::kWrongKey);
  EXPECT_EQ(nrc.read_register(reg::kChipCtrl).value & 3, 2u);
  // A lease wider than its 16 bits is refused.
  EXPECT_EQ(nrc.check_write(reg::kMKeyLease, 0x10000), NmpError::kBadValue);
}

TEST_F(NmaTest, UnconfiguredChipAnswersOnlyAllOnes) {
  Nrc fresh;
  auto req = request(NmpType::kRegReadRequest, {reg::kChipIdent}, {}, 7);
  auto b = testing::bytes_of(req);
  auto out = fresh.nma().process(b, 0);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->dropped);
  EXPECT_EQ(fresh.read_register(reg::kNmaDropped).value, 1u);
  req.dest_id = wire::kUnconfiguredId;
  auto r = serve(fresh, req);
  EXPECT_EQ(r.nmp_type, NmpType::kRegReadResponse);
  EXPECT_EQ(r.src_id, wire::kUnconfiguredId);
  // A configured chip drops a packet for another id.
  req.dest_id = 8;
  b = testing::bytes_of(req);
  EXPECT_TRUE(nrc.nma().process(b, 0)->dropped);
}

TEST_F(NmaTest, MalformedBytesAreAnError) {
  auto b = testing::bytes_of(request(NmpType::kRegReadRequest, {reg::kScratch}));
  b[60] ^= 0x10;  // breaks the CRC
  EXPECT_FALSE(nrc.nma().process(b, 0).ok());
  EXPECT_FALSE(nrc.nma().process(std::span<const uint8_t>(b).first(50), 0).ok());
}

TEST_F(NmaTest, FaultReportsFollowResponsesAndRespectMask) {
  // No route configured: reporting enabled but nowhere to send.
  nrc.write_register(reg::kFaultEnable, 1);
  nrc.link_up(2, {true, wire::ChipType::kNrc, 9, 4});
  nrc.link_down(2);
  EXPECT_EQ(nrc.nma().pending_outputs(), 0u);
  EXPECT_EQ(nrc.read_register(reg::kFaultStatus).value & 1, 1u);  // latched anyway

  wire::SourceRoute back;
  ASSERT_TRUE(back.push(5).ok());
  ASSERT_TRUE(back.push(1).ok());
  std::array<uint8_t, 14> bits{};
  ASSERT_TRUE(wire::encode_source_route(back, bits, 0).ok());
  uint64_t lo = 0, hi = 0;
  for (int i = 0; i < 8; ++i) lo |= uint64_t{bits[i]} << (8 * i);
  for (int i = 8; i < 14; ++i) hi |= uint64_t{bits[i]} << (8 * (i - 8));
  nrc.write_register(reg::kFaultRouteLo, lo);
  nrc.write_register(reg::kFaultRouteHi, hi & ((uint64_t{1} << 41) - 1));
  nrc.write_register(reg::kFaultDest, 100 | (8u << 16));
  nrc.write_register(reg::kFaultMask, 1u << static_cast<int>(FaultCode::kLinkUp));

  nrc.link_up(2, {true, wire::ChipType::kNrc, 9, 4});  // masked: no report
  EXPECT_EQ(nrc.nma().pending_outputs(), 0u);
  nrc.link_down(2);
  // A response produced after the fault still leaves first.
  auto out =
      nrc.nma().process(testing::bytes_of(request(NmpType::kRegReadRequest, {reg::kScratch})), 0);
  ASSERT_TRUE(out.ok());
  nrc.nma().push_response(out->response);
  auto first = nrc.nma().pop_output();
  auto second = nrc.nma().pop_output();
  ASSERT_TRUE(first && second);
  EXPECT_FALSE(first->is_report);
  EXPECT_TRUE(second->is_report);
  EXPECT_EQ(second->port, 5);
  auto report = wire::decode_mgmt_packet(second->bytes).value();
  EXPECT_EQ(report.nmp_type, NmpType::kFaultReport);
  EXPECT_EQ(report.dest_id, 100);
  EXPECT_EQ(report.dest_vp, 8);
  EXPECT_EQ(report.data.fault_code, static_cast<uint8_t>(FaultCode::kLinkDown));
  EXPECT_EQ(report.data.fault_port, 2);
  EXPECT_EQ(report.data.fault_severity, static_cast<uint8_t>(Severity::kCritical));
  EXPECT_EQ(nrc.read_register(reg::kFaultsReported).value, 1u);
}

}  // namespace
}  // namespace galaxy::chip
