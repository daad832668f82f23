// The SM's window of SMPs in flight (nm/ib_requester.h) over a scripted transport: it never has
// more outstanding than its window or the transport's own limit, retries what timed out, and
// reports what failed or was refused to the request's owner.
#include "nm/ib_requester.h"

#include <gtest/gtest.h>

#include <deque>
#include <set>

#include "wire/ib_perf.h"

namespace galaxy::nm {
namespace {

// Answers every request in order of arrival; a request whose attribute modifier is in `silent`
// is answered with a timeout (as the kernel hands back an unanswered request), one in `refused`
// with a non-zero MAD status.
class ScriptedPort final : public ib::SmpPort {
 public:
  explicit ScriptedPort(uint32_t limit) : limit_(limit) {}
  const ib::LocalPort& local() const override { return local_; }
  uint32_t max_in_flight() const override { return limit_; }
  Status send(const wire::Smp& smp, uint16_t) override {
    pending_.push_back(smp);
    most_outstanding = std::max<size_t>(most_outstanding, pending_.size());
    sent += 1;
    return {};
  }
  Result<ib::SmpCompletion> receive(int) override {
    if (!gmps_.empty()) {
      wire::Mad req = gmps_.front();
      gmps_.pop_front();
      ib::SmpCompletion c;
      c.tid = static_cast<uint32_t>(req.transaction_id);
      if (wrong_kind) {
        c.smp.method = wire::MadMethod::kGetResp;
        return c;
      }
      wire::PortCounters pc;
      pc.port_select = req.data[wire::kPerfDataAt + 1];
      pc.rcv_errors = pc.port_select;
      req.method = wire::MadMethod::kGetResp;
      req.status = refused.count(pc.port_select) ? 0x0c : 0;
      wire::encode_port_counters(pc, req);
      c.gmp = req;
      return c;
    }
    if (pending_.empty()) return make_error(Code::kTimeout, 1, "nothing in flight");
    wire::Smp req = pending_.front();
    pending_.pop_front();
    ib::SmpCompletion c;
    c.tid = static_cast<uint32_t>(req.transaction_id);
    if (silent.count(req.attribute_modifier)) {
      c.status = make_error(Code::kTimeout, 2, "timed out");
      return c;
    }
    c.smp = req;
    c.smp.method = wire::MadMethod::kGetResp;
    c.smp.status = refused.count(req.attribute_modifier) ? 0x1c : 0;
    return c;
  }

  // General management packets: answered in order with them, the PortCounters of the port asked
  // for (its number as PortRcvErrors), or with an SMP when `wrong_kind`.
  Status send_gmp(const wire::Mad& mad, uint16_t) override {
    gmps_.push_back(mad);
    return {};
  }
  bool wrong_kind = false;

  std::set<uint32_t> silent, refused;
  size_t most_outstanding = 0;
  uint64_t sent = 0;

 private:
  uint32_t limit_;
  ib::LocalPort local_;
  std::deque<wire::Smp> pending_;
  std::deque<wire::Mad> gmps_;
};

wire::Smp request(uint32_t modifier) {
  const uint8_t path[] = {1};
  return *wire::Smp::directed_request(wire::MadMethod::kGet, wire::SmpAttr::kPortInfo, modifier,
                                      path);
}

TEST(IbRequester, NeverMoreInFlightThanTheTransportAllows) {
  for (const auto& [window, limit, expect] :
       {std::tuple{64u, 20u, 20u}, std::tuple{4u, 20u, 4u}, std::tuple{64u, UINT32_MAX, 64u}}) {
    ScriptedPort port(limit);
    IbRequester rq(port, {.window = window});
    EXPECT_EQ(rq.window(), expect);
    unsigned done = 0;
    for (uint32_t i = 0; i < 500; ++i)
      rq.submit(request(i), wire::kPermissiveLid, [&](const Status& s, const wire::Smp&) {
        EXPECT_TRUE(s.ok());
        ++done;
      });
    ASSERT_TRUE(rq.run().ok());
    EXPECT_EQ(done, 500u);
    EXPECT_EQ(port.most_outstanding, expect);
    EXPECT_EQ(rq.stats().answered, 500u);
  }
}

// A fed source is asked only when the window has room and nothing is queued: what it made and
// what has not been answered yet never exceeds the window, and every request it made completes.
TEST(IbRequester, AFedSourceIsDrawnAsTheWindowOpens) {
  ScriptedPort port(UINT32_MAX);
  IbRequester rq(port, {.window = 8});
  uint32_t made = 0, answered = 0, most_ahead = 0;
  rq.feed([&] {
    if (made == 1000) return false;
    // Requests that answers may make (as discovery's do) count too.
    rq.submit(request(made++), wire::kPermissiveLid, [&](const Status& s, const wire::Smp&) {
      EXPECT_TRUE(s.ok());
      ++answered;
    });
    most_ahead = std::max(most_ahead, made - answered);
    return true;
  });
  ASSERT_TRUE(rq.run().ok());
  EXPECT_EQ(made, 1000u);
  EXPECT_EQ(answered, 1000u);
  EXPECT_LE(most_ahead, 9u);  // the window, and the one being made
  EXPECT_EQ(port.most_outstanding, 8u);
  // A source with nothing left ends the run at once.
  rq.feed([] { return false; });
  EXPECT_TRUE(rq.run().ok());
}

// A GMP shares the window with SMPs and completes with its own kind of answer; an answer of the
// other kind, or a non-zero status, is an error to its owner.
TEST(IbRequester, GmpsCompleteWithTheirAnswers) {
  ScriptedPort port(UINT32_MAX);
  port.refused = {3};
  IbRequester rq(port, {.window = 4});
  std::vector<int> got(6, -1);
  std::string refusal;
  for (uint8_t p = 1; p <= 5; ++p)
    rq.submit_gmp(wire::port_counters_get(p), 7, [&, p](const Status& s, const wire::Mad& a) {
      if (!s) {
        refusal = s.error().message;
        return;
      }
      auto c = wire::decode_port_counters(a);
      ASSERT_TRUE(c.ok());
      got[p] = c->rcv_errors;
    });
  ASSERT_TRUE(rq.run().ok());
  EXPECT_EQ(got, (std::vector<int>{-1, 1, 2, -1, 4, 5}));
  EXPECT_NE(refusal.find("status 0x000c"), std::string::npos) << refusal;
  EXPECT_EQ(rq.stats().error_status, 1u);

  port.wrong_kind = true;
  Status kind;
  rq.submit_gmp(wire::port_counters_get(1), 7,
                [&](const Status& s, const wire::Mad&) { kind = s; });
  ASSERT_TRUE(rq.run().ok());
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.error().message.find("an SMP, not a GMP"), std::string::npos);
}

TEST(IbRequester, RetriesTimeoutsThenReportsTheFailureAndTheRefusal) {
  ScriptedPort port(UINT32_MAX);
  port.silent = {7};
  port.refused = {9};
  IbRequester rq(port, {.window = 8, .retries = 2});
  std::vector<Status> outcome(12);
  for (uint32_t i = 0; i < 12; ++i)
    rq.submit(request(i), wire::kPermissiveLid,
              [&outcome, i](const Status& s, const wire::Smp&) { outcome[i] = s; });
  ASSERT_TRUE(rq.run().ok());
  EXPECT_EQ(outcome[7].error().code, Code::kTimeout);
  EXPECT_EQ(outcome[9].error().id, 7100u);  // the SMA's refusal, with its status named
  EXPECT_NE(outcome[9].error().message.find("PortInfo"), std::string::npos);
  for (uint32_t i : {0u, 1u, 8u, 11u}) EXPECT_TRUE(outcome[i].ok()) << i;
  EXPECT_EQ(rq.stats().retries, 2u);  // request 7 sent three times in all
  EXPECT_EQ(rq.stats().failed, 1u);
  EXPECT_EQ(rq.stats().error_status, 1u);
  EXPECT_EQ(port.sent, 14u);
}

}  // namespace
}  // namespace galaxy::nm
