// The UDP link layer (docs/system.md 1.3): frame codec, impairment, and two Links over an in-memory
// channel with simulated time.
#include "engine/live/link.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>

#include "base/log.h"
#include "wire/crc16.h"

namespace galaxy::live {
namespace {

constexpr uint32_t kLinkId = 7;

LinkConfig config(uint64_t epoch) {
  LinkConfig c;
  c.link_id = kLinkId;
  c.epoch = epoch;
  c.handshake_interval_ns = 1'000'000;
  return c;
}

ImpairmentConfig impairment(std::string_view spec) {
  auto r = parse_impairment(spec);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : ImpairmentConfig{};
}

// Payload i: its index, then a pattern; sizes vary from 0 to 700 bytes.
void make_payload(uint64_t i, std::vector<uint8_t>* out) {
  size_t size = (i * 7919) % 701;
  out->resize(size);
  for (size_t k = 0; k < size; ++k)
    (*out)[k] = k < 8 ? static_cast<uint8_t>(i >> (8 * k)) : static_cast<uint8_t>(i * 31 + k);
}

// Two Links joined by two one-way channels with a fixed latency; each direction passes the
// sender's datagrams through its Impairment. Time is simulated.
struct Harness {
  std::unique_ptr<Link> a, b;
  Impairment impair_ab, impair_ba;
  struct InFlight {
    uint64_t at;
    std::vector<uint8_t> bytes;
  };
  std::deque<InFlight> ab, ba;
  uint64_t now = 1'000'000'000;
  uint64_t latency = 20'000;
  bool blackhole_ab = false, blackhole_ba = false;
  std::vector<uint8_t> buf;
  std::vector<std::vector<uint8_t>> out;

  Harness(const LinkConfig& ca, const LinkConfig& cb, const ImpairmentConfig& iab = {},
          const ImpairmentConfig& iba = {})
      : a(std::make_unique<Link>(ca)),
        b(std::make_unique<Link>(cb)),
        impair_ab(iab),
        impair_ba(iba) {}

  void drain(Link& from, Impairment& imp, std::deque<InFlight>& q, bool blackhole) {
    while (from.pop_outgoing(&buf)) {
      if (blackhole) continue;
      out.clear();
      imp.apply(std::move(buf), &out);
      buf = {};
      for (auto& d : out) q.push_back({now + latency, std::move(d)});
    }
  }
  void deliver(std::deque<InFlight>& q, Link& to) {
    while (!q.empty() && q.front().at <= now) {
      to.on_datagram(q.front().bytes, now);
      q.pop_front();
    }
  }
  void step(uint64_t dt) {
    now += dt;
    deliver(ab, *b);
    deliver(ba, *a);
    if (a->next_deadline_ns() <= now) a->on_timer(now);
    if (b->next_deadline_ns() <= now) b->on_timer(now);
    drain(*a, impair_ab, ab, blackhole_ab);
    drain(*b, impair_ba, ba, blackhole_ba);
  }
  bool run_until(const std::function<bool()>& done, uint64_t max_ns, uint64_t dt = 5'000) {
    for (uint64_t end = now + max_ns; now < end;) {
      if (done()) return true;
      step(dt);
    }
    return done();
  }
  bool both_up() {
    return run_until([&] { return a->state() == LinkState::kUp && b->state() == LinkState::kUp; },
                     100'000'000);
  }
};

// Sends payloads [*next_send, count) as room allows and checks in-order delivery.
struct Stream {
  uint64_t count;
  uint64_t next_send = 0;
  uint64_t next_expect = 0;
  uint64_t errors = 0;
  std::vector<uint8_t> payload, got, expected;

  explicit Stream(uint64_t n) : count(n) {}
  void send(Link& from, uint64_t now) {
    while (next_send < count && from.can_send()) {
      make_payload(next_send, &payload);
      // Every other payload by its buffer (a daemon's frames), the rest as a copy.
      std::vector<uint8_t> taken = payload;
      Status s = next_send % 2 ? from.send(&taken, now) : from.send(payload, now);
      if (s.ok() && next_send % 2 && !taken.empty()) {
        ADD_FAILURE() << "the link kept " << taken.size() << " bytes in the buffer it gave back";
        ++errors;
      }
      if (!s.ok()) {
        ADD_FAILURE() << s.to_string();
        ++errors;
        return;
      }
      ++next_send;
    }
  }
  void receive(Link& to) {
    while (to.pop_delivered(&got)) {
      make_payload(next_expect, &expected);
      if (got != expected && errors++ < 5)
        ADD_FAILURE() << "payload " << next_expect << " differs: got " << got.size()
                      << " bytes, expected " << expected.size();
      ++next_expect;
    }
  }
  bool done() const { return next_expect == count; }
};

// Runs the stream from a to b until every payload arrived (false after max_ns).
bool run_stream(Harness& h, Stream& s, uint64_t max_ns) {
  return h.run_until(
      [&] {
        s.send(*h.a, h.now);
        s.receive(*h.b);
        return s.done();
      },
      max_ns);
}

// After one outage: both ends trained a second time with the same peers, and the payloads held
// meanwhile all arrive, once and in order.
void expect_resumed_after_one_outage(Harness& h, Stream& s) {
  EXPECT_EQ(h.a->stats().handshakes, 2u);
  EXPECT_EQ(h.b->stats().handshakes, 2u);
  EXPECT_EQ(h.a->stats().peer_restarts, 0u);
  ASSERT_TRUE(run_stream(h, s, 1'000'000'000));
  EXPECT_EQ(s.errors, 0u);
}

// ---------------------------------------------------------------------------------------------
// Codec

LinkFrame sample_frame(const std::vector<uint8_t>& payload) {
  LinkFrame f;
  f.type = LinkFrameType::kData;
  f.link_id = 0x01020304;
  f.seq = 0x0A0B0C0D;
  f.ack = 0x11121314;
  f.credits = 0x100;
  f.sack = 0x8000000000000001ull;
  f.epoch = 0x1122334455667788ull;
  f.peer_epoch = 0x0102030405060708ull;
  f.payload = payload;
  return f;
}

// A daemon's default frame is one IP packet of the path's MTU: 1,480 bytes of datagram over
// Ethernet, less the UDP header and the frame's own 50; never past 32 KiB (a loopback or jumbo
// path) or below the largest item.
TEST(LinkFrame, DefaultFrameSizeFollowsThePathMtu) {
  EXPECT_EQ(frame_bytes_for_mtu(1500), 1480u - 8 - kLinkFrameOverhead);
  EXPECT_EQ(frame_bytes_for_mtu(1500), 1422u);
  EXPECT_EQ(frame_bytes_for_mtu(9000), 8980u - 8 - kLinkFrameOverhead);
  EXPECT_EQ(frame_bytes_for_mtu(65536), kMaxDefaultFrameBytes);
  EXPECT_EQ(frame_bytes_for_mtu(4001), 3981u - 8 - kLinkFrameOverhead);
  EXPECT_EQ(frame_bytes_for_mtu(1280), 1260u - 8 - kLinkFrameOverhead);
  EXPECT_EQ(frame_bytes_for_mtu(1279), kMinFrameBytes + 1);
  EXPECT_EQ(frame_bytes_for_mtu(576), kMinFrameBytes);
  EXPECT_EQ(frame_bytes_for_mtu(0), kMinFrameBytes);
  EXPECT_EQ(frame_bytes_for_mtu(UINT32_MAX), kMaxDefaultFrameBytes);
}

TEST(LinkFrame, GoldenEncoding) {
  std::vector<uint8_t> payload = {0xDE, 0xAD, 0xBE, 0xEF};
  std::vector<uint8_t> bytes;
  encode_link_frame(sample_frame(payload), &bytes);
  const std::vector<uint8_t> golden = {
      0x47, 0x4C, 0x01, 0x01, 0x00, 0x00, 0x00, 0x04,  // magic, version, type, flags, length
      0x01, 0x02, 0x03, 0x04, 0x0A, 0x0B, 0x0C, 0x0D,  // link_id, seq
      0x11, 0x12, 0x13, 0x14, 0x00, 0x00, 0x01, 0x00,  // ack, credits
      0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,  // sack
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // epoch
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // peer_epoch
      0xDE, 0xAD, 0xBE, 0xEF, 0xAC, 0xF9};             // payload, CRC-16/CCITT-FALSE
  EXPECT_EQ(bytes, golden);

  auto f = decode_link_frame(bytes, 0x01020304);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->type, LinkFrameType::kData);
  EXPECT_EQ(f->seq, 0x0A0B0C0Du);
  EXPECT_EQ(f->ack, 0x11121314u);
  EXPECT_EQ(f->credits, 0x100u);
  EXPECT_EQ(f->sack, 0x8000000000000001ull);
  EXPECT_EQ(f->epoch, 0x1122334455667788ull);
  EXPECT_EQ(f->peer_epoch, 0x0102030405060708ull);
  EXPECT_EQ(std::vector<uint8_t>(f->payload.begin(), f->payload.end()), payload);
}

// Rewrites the trailing CRC so that only the mutated field is wrong.
void reseal(std::vector<uint8_t>* bytes) {
  size_t n = bytes->size() - 2;
  uint16_t crc = wire::crc16(std::span<const uint8_t>(bytes->data(), n));
  (*bytes)[n] = static_cast<uint8_t>(crc >> 8);
  (*bytes)[n + 1] = static_cast<uint8_t>(crc);
}

void expect_error(const std::vector<uint8_t>& bytes, Code code, uint16_t id, std::string_view field,
                  uint32_t link_id = 0x01020304) {
  auto r = decode_link_frame(bytes, link_id);
  ASSERT_FALSE(r.ok()) << "decoded although " << field << " is bad";
  EXPECT_EQ(r.error().code, code) << r.error().to_string();
  EXPECT_EQ(r.error().id, id) << r.error().to_string();
  EXPECT_NE(r.error().message.find(field), std::string::npos) << r.error().to_string();
}

TEST(LinkFrame, DecodeRejectsEveryMalformedField) {
  std::vector<uint8_t> payload = {1, 2, 3, 4};
  std::vector<uint8_t> good;
  encode_link_frame(sample_frame(payload), &good);
  ASSERT_TRUE(decode_link_frame(good).ok());

  for (size_t n : {size_t{0}, size_t{1}, size_t{49}}) {
    std::vector<uint8_t> shorter(good.begin(), good.begin() + n);
    expect_error(shorter, Code::kMalformed, 4600, "length");
  }
  auto mutated = [&](size_t offset, uint8_t value) {
    std::vector<uint8_t> b = good;
    b[offset] = value;
    reseal(&b);
    return b;
  };
  expect_error(mutated(0, 0x48), Code::kMalformed, 4601, "magic");
  expect_error(mutated(2, 2), Code::kUnsupported, 4602, "version = 2");
  expect_error(mutated(3, 0), Code::kMalformed, 4603, "type = 0");
  expect_error(mutated(3, 4), Code::kMalformed, 4603, "type = 4");
  expect_error(mutated(5, 1), Code::kMalformed, 4604, "flags");  // reply flag on data
  expect_error(mutated(4, 0x80), Code::kMalformed, 4604, "flags");
  expect_error(mutated(5, 2), Code::kMalformed, 4604, "flags");  // disabled on data
  {
    std::vector<uint8_t> ack = mutated(3, 2);  // an ack frame without payload
    ack.erase(ack.begin() + kLinkHeaderBytes, ack.end() - kLinkCrcBytes);
    ack[7] = 0;
    ack[5] = 2;  // disabled: handshakes only
    reseal(&ack);
    expect_error(ack, Code::kMalformed, 4604, "flags");
    ack[3] = 3;
    ack[5] = 3;  // reply-requested | disabled on a handshake
    reseal(&ack);
    EXPECT_TRUE(decode_link_frame(ack).ok());
  }
  expect_error(mutated(7, 5), Code::kMalformed, 4605, "payload_length = 5");
  expect_error(mutated(7, 3), Code::kMalformed, 4605, "payload_length = 3");
  expect_error(mutated(3, 2), Code::kMalformed, 4606, "payload_length = 4 in a ack");
  expect_error(mutated(21, 0x10), Code::kMalformed, 4611, "credits = 1048832");
  expect_error(mutated(20, 0x01), Code::kMalformed, 4611, "credits = 16777472");

  std::vector<uint8_t> zero_epoch = good;
  for (size_t i = 32; i < 40; ++i) zero_epoch[i] = 0;
  reseal(&zero_epoch);
  expect_error(zero_epoch, Code::kMalformed, 4609, "epoch = 0");
  std::vector<uint8_t> zero_peer = good;
  for (size_t i = 40; i < 48; ++i) zero_peer[i] = 0;
  reseal(&zero_peer);
  expect_error(zero_peer, Code::kMalformed, 4610, "peer_epoch = 0");

  for (size_t bit : {size_t{0}, size_t{100}, good.size() * 8 - 1}) {
    std::vector<uint8_t> b = good;
    b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    expect_error(b, Code::kCrcMismatch, 4607, "crc");
  }
  expect_error(good, Code::kInvalidArgument, 4608, "link_id = 16909060", 99);
}

TEST(LinkFrame, CreditsAtTheLimitAndEmptyHandshakeDecode) {
  LinkFrame f;
  f.type = LinkFrameType::kHandshake;
  f.flags = kLinkFlagReplyRequested;
  f.credits = kMaxLinkWindow;
  f.epoch = 5;
  std::vector<uint8_t> bytes;
  encode_link_frame(f, &bytes);
  EXPECT_EQ(bytes.size(), kLinkFrameOverhead);
  auto d = decode_link_frame(bytes);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->type, LinkFrameType::kHandshake);
  EXPECT_EQ(d->flags, kLinkFlagReplyRequested);
  EXPECT_EQ(d->peer_epoch, 0u);
  EXPECT_TRUE(d->payload.empty());
}

TEST(LinkConfigCheck, NamesTheBadField) {
  EXPECT_TRUE(check_link_config(LinkConfig{}).ok());
  LinkConfig c;
  c.window = 0;
  EXPECT_EQ(check_link_config(c).error().id, 4630);
  c = {};
  c.rx_credits = kMaxLinkWindow + 1;
  EXPECT_EQ(check_link_config(c).error().id, 4631);
  c = {};
  c.max_payload = 70000;
  EXPECT_NE(check_link_config(c).error().message.find("max_payload = 70000"), std::string::npos);
  c = {};
  c.rto_min_ns = c.rto_max_ns + 1;
  EXPECT_EQ(check_link_config(c).error().id, 4633);
}

// ---------------------------------------------------------------------------------------------
// Impairment

TEST(ParseImpairment, AcceptsEveryKey) {
  auto r = parse_impairment("drop=0.05,dup=0.01,reorder=0.02,corrupt=0.01,seed=7");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(r->drop, 0.05);
  EXPECT_DOUBLE_EQ(r->duplicate, 0.01);
  EXPECT_DOUBLE_EQ(r->reorder, 0.02);
  EXPECT_DOUBLE_EQ(r->corrupt, 0.01);
  EXPECT_EQ(r->seed, 7u);
  auto none = parse_impairment("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->drop, 0);
  EXPECT_EQ(none->seed, 1u);
  EXPECT_DOUBLE_EQ(parse_impairment("duplicate=0.5")->duplicate, 0.5);
}

TEST(ParseImpairment, ErrorsNameTheKeyOrValue) {
  struct Case {
    const char* spec;
    uint16_t id;
    const char* mention;
  };
  for (const Case& c :
       {Case{"drop", 4640, "'drop'"}, Case{"drop=0.1,", 4640, "''"},
        Case{"seed=x", 4641, "seed = 'x'"}, Case{"seed=-3", 4641, "'-3'"},
        Case{"loss=0.1", 4642, "'loss'"}, Case{"drop=abc", 4643, "'abc'"},
        Case{"corrupt=", 4643, "corrupt"}, Case{"drop=1", 4644, "drop = 1"},
        Case{"reorder=-0.1", 4644, "reorder = -0.1"}, Case{"dup=nan", 4644, "dup = nan"}}) {
    auto r = parse_impairment(c.spec);
    ASSERT_FALSE(r.ok()) << c.spec;
    EXPECT_EQ(r.error().id, c.id) << c.spec << ": " << r.error().to_string();
    EXPECT_NE(r.error().message.find(c.mention), std::string::npos)
        << c.spec << ": " << r.error().to_string();
  }
}

TEST(Impairment, DeterministicForASeedAndRoughlyAtTheRates) {
  auto run = [](uint64_t seed) {
    Impairment imp(
        impairment(fmt::format("drop=0.1,dup=0.05,reorder=0.05,corrupt=0.05,seed={}", seed)));
    std::vector<std::vector<uint8_t>> sent;
    for (uint32_t i = 0; i < 20000; ++i) imp.apply(std::vector<uint8_t>(8, uint8_t(i)), &sent);
    imp.flush(&sent);
    return std::make_pair(sent, imp.stats());
  };
  auto [s1, st1] = run(3);
  auto [s2, st2] = run(3);
  auto [s3, st3] = run(4);
  EXPECT_EQ(s1, s2);
  EXPECT_NE(s1, s3);
  EXPECT_NEAR(static_cast<double>(st1.dropped), 2000, 300);
  EXPECT_NEAR(static_cast<double>(st1.duplicated), 900, 200);
  EXPECT_NEAR(static_cast<double>(st1.reordered), 900, 200);
  EXPECT_NEAR(static_cast<double>(st1.corrupted), 900, 200);
  EXPECT_EQ(s1.size(), 20000 - st1.dropped + st1.duplicated);
}

TEST(Impairment, ReorderReleasesTheHeldDatagramAfterTheNext) {
  Impairment imp(impairment("reorder=0.999999"));
  std::vector<std::vector<uint8_t>> sent;
  imp.apply({1}, &sent);
  EXPECT_TRUE(sent.empty());
  imp.apply({2}, &sent);  // one held at a time: this one passes and releases the first
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0], std::vector<uint8_t>{2});
  EXPECT_EQ(sent[1], std::vector<uint8_t>{1});
  imp.apply({3}, &sent);
  imp.flush(&sent);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[2], std::vector<uint8_t>{3});
}

TEST(Impairment, CorruptFlipsExactlyOneBit) {
  Impairment imp(impairment("corrupt=0.999999,seed=9"));
  std::vector<std::vector<uint8_t>> sent;
  for (int i = 0; i < 100; ++i) imp.apply(std::vector<uint8_t>(16, 0), &sent);
  ASSERT_EQ(sent.size(), 100u);
  for (const auto& d : sent) {
    int bits = 0;
    for (uint8_t b : d) bits += std::popcount(b);
    EXPECT_EQ(bits, 1);
  }
}

// ---------------------------------------------------------------------------------------------
// Link

TEST(Link, HandshakeBringsBothEndsUp) {
  Harness h(config(100), config(200));
  EXPECT_EQ(h.a->state(), LinkState::kTraining);
  EXPECT_EQ(h.a->next_deadline_ns(), 0u);
  EXPECT_FALSE(h.a->can_send());  // no credits before the handshake
  EXPECT_EQ(h.a->send(std::vector<uint8_t>(4), h.now).error().code, Code::kResourceExhausted);
  std::vector<uint8_t> four(4, 7);
  EXPECT_EQ(h.a->send(&four, h.now).error().code, Code::kResourceExhausted);
  EXPECT_EQ(four, std::vector<uint8_t>(4, 7));
  ASSERT_TRUE(h.both_up());
  EXPECT_EQ(h.a->stats().handshakes, 1u);
  EXPECT_EQ(h.b->stats().handshakes, 1u);
  EXPECT_EQ(h.a->peer_epoch(), 200u);
  EXPECT_EQ(h.b->peer_epoch(), 100u);
  EXPECT_TRUE(h.a->can_send());
  std::vector<uint8_t> too_big(h.a->config().max_payload + 1);
  EXPECT_EQ(h.a->send(too_big, h.now).error().code, Code::kInvalidArgument);
  // A refused buffer stays the caller's, untouched.
  EXPECT_EQ(h.a->send(&too_big, h.now).error().code, Code::kInvalidArgument);
  EXPECT_EQ(too_big.size(), h.a->config().max_payload + 1);
}

TEST(Link, RefusesFramesOfAnotherLinkAndGarbage) {
  Harness h(config(100), config(200));
  ASSERT_TRUE(h.both_up());
  LinkConfig other = config(300);
  other.link_id = kLinkId + 1;
  Link stranger(other);
  stranger.on_timer(h.now);
  std::vector<uint8_t> hs;
  ASSERT_TRUE(stranger.pop_outgoing(&hs));
  h.b->on_datagram(hs, h.now);
  EXPECT_EQ(h.b->stats().foreign_link, 1u);
  EXPECT_EQ(h.b->peer_epoch(), 100u);
  std::vector<uint8_t> junk(60, 0x47);
  h.b->on_datagram(junk, h.now);
  h.b->on_datagram({}, h.now);
  EXPECT_EQ(h.b->stats().crc_errors + h.b->stats().malformed, 2u);
  EXPECT_EQ(h.b->state(), LinkState::kUp);
}

TEST(Link, LossyChannelDeliversEveryPayloadOnceInOrder) {
  LinkConfig ca = config(100), cb = config(200);
  ca.max_payload = cb.max_payload = 1024;
  Harness h(ca, cb, impairment("drop=0.05,dup=0.01,reorder=0.05,corrupt=0.01,seed=7"),
            impairment("drop=0.05,dup=0.01,reorder=0.05,corrupt=0.01,seed=8"));
  ASSERT_TRUE(h.both_up());
  Stream forward(200'000), backward(20'000);
  bool done = h.run_until(
      [&] {
        forward.send(*h.a, h.now);
        backward.send(*h.b, h.now);
        forward.receive(*h.b);
        backward.receive(*h.a);
        return (forward.done() && backward.done()) || forward.errors + backward.errors > 0;
      },
      20'000'000'000);
  ASSERT_TRUE(done) << "forward " << forward.next_expect << " backward " << backward.next_expect
                    << " a " << link_state_name(h.a->state()) << " b "
                    << link_state_name(h.b->state()) << " a.in_flight " << h.a->in_flight()
                    << " a.can_send " << h.a->can_send() << " b.pending "
                    << h.b->delivered_pending() << " a.snd " << h.a->next_send_seq() << " b.rcv "
                    << h.b->next_receive_seq() << " a.rto " << h.a->rto_ns() << " a.timeouts "
                    << h.a->stats().timeouts << " a.hs " << h.a->stats().handshakes << " b.hs "
                    << h.b->stats().handshakes << " a.restarts " << h.a->stats().peer_restarts
                    << " a.bad_acks " << h.a->stats().bad_acks << " b.overruns "
                    << h.b->stats().credit_overruns << " a.stale " << h.a->stats().stale_frames
                    << " b.stale " << h.b->stats().stale_frames << " a.next "
                    << h.a->next_deadline_ns() - h.now;
  EXPECT_EQ(forward.errors + backward.errors, 0u);
  EXPECT_EQ(forward.next_expect, forward.count);
  EXPECT_EQ(backward.next_expect, backward.count);
  // Everything acknowledged in the end, nothing more arrives.
  ASSERT_TRUE(
      h.run_until([&] { return h.a->in_flight() == 0 && h.b->in_flight() == 0; }, 1'000'000'000));
  h.run_until([] { return false; }, 10'000'000);
  EXPECT_FALSE(h.b->has_delivered());
  EXPECT_FALSE(h.a->has_delivered());

  const LinkStats& sa = h.a->stats();
  const LinkStats& sb = h.b->stats();
  EXPECT_GT(sa.retransmissions, 0u);
  EXPECT_GT(sa.fast_retransmits, 0u);
  EXPECT_GT(sb.crc_errors, 0u);
  EXPECT_GT(sb.duplicates, 0u);
  EXPECT_GT(sb.out_of_order, 0u);
  EXPECT_GT(sa.crc_errors, 0u);  // on acks
  EXPECT_EQ(sb.payloads_delivered, 200'000u);
  EXPECT_EQ(sb.payload_bytes_delivered, sa.payload_bytes_sent);
  EXPECT_EQ(sa.payload_bytes_delivered, sb.payload_bytes_sent);
  EXPECT_EQ(sa.handshakes, 1u);
  EXPECT_EQ(sb.handshakes, 1u);
  EXPECT_GT(sa.retrans_rate_ppm(), 30'000u);   // at least the 5 % drop rate...
  EXPECT_LT(sa.retrans_rate_ppm(), 300'000u);  // ...and no retransmission storm
  std::printf(
      "lossy link: %lu frames sent, %lu retransmitted (%lu ppm; %lu fast, %lu timeouts), "
      "acks %lu, crc errors %lu, duplicates %lu, srtt %lu ns\n",
      (unsigned long)sa.frames_sent, (unsigned long)sa.retransmissions,
      (unsigned long)sa.retrans_rate_ppm(), (unsigned long)sa.fast_retransmits,
      (unsigned long)sa.timeouts, (unsigned long)sb.acks_sent, (unsigned long)sb.crc_errors,
      (unsigned long)sb.duplicates, (unsigned long)h.a->srtt_ns());
}

TEST(Link, CreditsStopTheSenderUntilTheReceiverPops) {
  LinkConfig cb = config(200);
  cb.rx_credits = 16;
  Harness h(config(100), cb);
  ASSERT_TRUE(h.both_up());
  Stream s(1000);
  s.send(*h.a, h.now);
  EXPECT_EQ(s.next_send, 16u);
  EXPECT_EQ(h.a->send(std::vector<uint8_t>(3), h.now).error().code, Code::kResourceExhausted);
  h.run_until([] { return false; }, 20'000'000);
  EXPECT_FALSE(h.a->can_send());
  EXPECT_EQ(h.b->delivered_pending(), 16u);
  EXPECT_EQ(h.a->in_flight(), 0u);  // all acknowledged, just no room
  EXPECT_EQ(h.b->stats().credit_overruns, 0u);

  s.receive(*h.b);  // room again: a window update reaches the sender
  EXPECT_EQ(s.next_expect, 16u);
  ASSERT_TRUE(h.run_until([&] { return h.a->can_send(); }, 1'000'000));
  s.send(*h.a, h.now);
  EXPECT_EQ(s.next_send, 32u);

  // The window update is lost: the starved sender's probe recovers.
  h.run_until([] { return false; }, 1'000'000);
  h.blackhole_ba = true;
  s.receive(*h.b);
  h.run_until([] { return false; }, 1'000'000);
  EXPECT_FALSE(h.a->can_send());
  h.blackhole_ba = false;
  ASSERT_TRUE(h.run_until([&] { return h.a->can_send(); }, 200'000'000));

  ASSERT_TRUE(run_stream(h, s, 1'000'000'000));
  EXPECT_EQ(s.errors, 0u);
  EXPECT_EQ(h.b->stats().credit_overruns, 0u);
}

TEST(Link, SequenceNumbersWrapAround) {
  LinkConfig ca = config(100), cb = config(200);
  ca.initial_seq = cb.initial_seq = 0xFFFFFF00u;
  Harness h(ca, cb, impairment("drop=0.05,reorder=0.05,seed=3"), impairment("drop=0.05,seed=4"));
  ASSERT_TRUE(h.both_up());
  EXPECT_EQ(h.a->next_send_seq(), 0xFFFFFF00u);
  Stream s(3000);
  ASSERT_TRUE(run_stream(h, s, 5'000'000'000));
  EXPECT_EQ(s.errors, 0u);
  EXPECT_EQ(h.b->next_receive_seq(), 0xFFFFFF00u + 3000u);
  EXPECT_EQ(h.a->next_send_seq(), 3000u - 256u);
  EXPECT_GT(h.a->stats().retransmissions, 0u);
}

TEST(Link, ImmediateSackAndFastRetransmit) {
  Harness h(config(100), config(200));
  ASSERT_TRUE(h.both_up());
  std::vector<uint8_t> p(10, 1);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(h.a->send(p, h.now).ok());
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint8_t> d;
  while (h.a->pop_outgoing(&d)) frames.push_back(d);
  ASSERT_EQ(frames.size(), 5u);
  uint32_t first = decode_link_frame(frames[0])->seq;

  h.now += 10'000;
  h.b->on_datagram(frames[1], h.now);  // frames[0] lost
  ASSERT_TRUE(h.b->pop_outgoing(&d));  // out of order: acked at once, no ack delay
  auto ack = decode_link_frame(d);
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->type, LinkFrameType::kAck);
  EXPECT_EQ(ack->ack, first);
  EXPECT_EQ(ack->sack, 1u);
  EXPECT_EQ(h.b->stats().out_of_order, 1u);

  h.now += 10'000;
  std::vector<std::vector<uint8_t>> acks;
  for (int i = 2; i < 5; ++i) {
    h.b->on_datagram(frames[i], h.now);
    ASSERT_TRUE(h.b->pop_outgoing(&d));
    acks.push_back(d);
  }
  EXPECT_EQ(decode_link_frame(acks[2])->sack, 0b1111u);
  h.a->on_datagram(acks[0], h.now);  // two frames sent later received: maybe reordering
  EXPECT_FALSE(h.a->pop_outgoing(&d));
  h.a->on_datagram(acks[1], h.now);  // three: frames[0] is lost
  ASSERT_TRUE(h.a->pop_outgoing(&d));
  EXPECT_EQ(decode_link_frame(d)->seq, first);
  h.a->on_datagram(acks[2], h.now);  // not again: nothing sent after the retransmission
  EXPECT_FALSE(h.a->pop_outgoing(&d));
  EXPECT_EQ(h.a->stats().fast_retransmits, 1u);
  EXPECT_EQ(h.a->stats().retransmissions, 1u);

  h.b->on_datagram(d, h.now);
  std::vector<uint8_t> got;
  int delivered = 0;
  while (h.b->pop_delivered(&got)) ++delivered;
  EXPECT_EQ(delivered, 5);
  h.b->on_datagram(frames[3], h.now);  // a late copy: a duplicate, acked at once
  EXPECT_EQ(h.b->stats().duplicates, 1u);
  ASSERT_TRUE(h.b->pop_outgoing(&d));
  h.a->on_datagram(d, h.now);
  EXPECT_EQ(h.a->in_flight(), 0u);
}

TEST(Link, InOrderFramesAreAckedAfterTheAckDelayOrEveryAckEvery) {
  Harness h(config(100), config(200));
  ASSERT_TRUE(h.both_up());
  std::vector<uint8_t> p(10, 1), d;
  ASSERT_TRUE(h.a->send(p, h.now).ok());
  ASSERT_TRUE(h.a->pop_outgoing(&d));
  h.b->on_datagram(d, h.now);
  EXPECT_FALSE(h.b->pop_outgoing(&d));  // delayed
  EXPECT_EQ(h.b->next_deadline_ns(), h.now + h.b->config().ack_delay_ns);
  h.b->on_timer(h.now + h.b->config().ack_delay_ns);
  ASSERT_TRUE(h.b->pop_outgoing(&d));
  EXPECT_EQ(decode_link_frame(d)->type, LinkFrameType::kAck);
  h.a->on_datagram(d, h.now + 60'000);
  EXPECT_EQ(h.a->in_flight(), 0u);
  EXPECT_GT(h.a->srtt_ns(), 0u);

  std::vector<std::vector<uint8_t>> frames;
  for (uint32_t i = 0; i < h.b->config().ack_every; ++i) {
    ASSERT_TRUE(h.a->send(p, h.now).ok());
    ASSERT_TRUE(h.a->pop_outgoing(&d));
    frames.push_back(d);
  }
  for (size_t i = 0; i + 1 < frames.size(); ++i) {
    h.b->on_datagram(frames[i], h.now);
    EXPECT_FALSE(h.b->pop_outgoing(&d)) << i;
  }
  h.b->on_datagram(frames.back(), h.now);
  ASSERT_TRUE(h.b->pop_outgoing(&d));  // the ack_every-th frame is acked at once
  EXPECT_EQ(decode_link_frame(d)->ack, h.b->next_receive_seq());
}

TEST(Link, RetransmitsOnTimeoutWhenTheChannelHeals) {
  Harness h(config(100), config(200));
  ASSERT_TRUE(h.both_up());
  h.blackhole_ab = true;
  Stream s(50);
  s.send(*h.a, h.now);
  ASSERT_EQ(s.next_send, 50u);
  h.run_until([] { return false; }, 40'000'000);
  EXPECT_EQ(h.b->stats().frames_received, 0u);
  EXPECT_EQ(h.a->in_flight(), 50u);
  EXPECT_EQ(h.a->state(), LinkState::kUp);
  // Initial RTO 5 ms doubling once per round: 5, 10, 20 ms -> 3 rounds of 50 in 40 ms.
  EXPECT_GE(h.a->stats().timeouts, 100u);
  EXPECT_LE(h.a->stats().timeouts, 150u);
  EXPECT_GT(h.a->rto_ns(), h.a->config().rto_min_ns * 10);
  h.blackhole_ab = false;
  ASSERT_TRUE(h.run_until(
      [&] {
        s.receive(*h.b);
        return s.done() && h.a->in_flight() == 0;
      },
      100'000'000));
  EXPECT_EQ(s.errors, 0u);
  EXPECT_EQ(h.b->stats().duplicates, 0u);
}

TEST(Link, KeepalivesHoldAnIdleLinkUp) {
  LinkConfig ca = config(100), cb = config(200);
  ca.dead_after_ns = cb.dead_after_ns = 10'000'000;
  Harness h(ca, cb);
  ASSERT_TRUE(h.both_up());
  h.run_until([] { return false; }, 100'000'000, 100'000);
  EXPECT_EQ(h.a->state(), LinkState::kUp);
  EXPECT_EQ(h.b->state(), LinkState::kUp);
  EXPECT_EQ(h.a->stats().link_downs, 0u);
  EXPECT_GT(h.a->stats().acks_sent, 10u);
}

TEST(Link, GoesDownAfterSilenceAndUpAgainWithoutLosingFrames) {
  LinkConfig ca = config(100), cb = config(200);
  ca.dead_after_ns = cb.dead_after_ns = 10'000'000;
  Harness h(ca, cb);
  ASSERT_TRUE(h.both_up());
  h.blackhole_ab = h.blackhole_ba = true;
  Stream s(300);
  s.send(*h.a, h.now);
  EXPECT_EQ(s.next_send, 256u);
  h.run_until([] { return false; }, 9'000'000);
  EXPECT_EQ(h.a->state(), LinkState::kUp);
  ASSERT_TRUE(h.run_until([&] { return h.a->state() == LinkState::kDown; }, 2'000'000));
  ASSERT_TRUE(h.run_until([&] { return h.b->state() == LinkState::kDown; }, 2'000'000));
  EXPECT_EQ(h.a->stats().link_downs, 1u);
  uint64_t sent_while_down = h.a->stats().frames_sent;
  h.run_until([] { return false; }, 20'000'000);
  EXPECT_EQ(h.a->stats().frames_sent, sent_while_down);  // only handshakes while Down
  EXPECT_GT(h.a->stats().handshake_frames_sent, 10u);

  h.blackhole_ab = h.blackhole_ba = false;
  ASSERT_TRUE(h.both_up());
  expect_resumed_after_one_outage(h, s);
}

TEST(Link, DisabledEndHoldsBothEndsDownUntilEnabledAndLosesNoFrame) {
  Harness h(config(100), config(200));
  ASSERT_TRUE(h.both_up());
  h.b->set_disabled(true, h.now);
  EXPECT_EQ(h.b->state(), LinkState::kDown);
  EXPECT_TRUE(h.b->disabled());
  // One handshake carries the news: the peer is Down within a latency, not a dead interval.
  ASSERT_TRUE(h.run_until([&] { return h.a->state() == LinkState::kDown; }, 100'000));
  EXPECT_TRUE(h.a->peer_disabled());
  Stream s(300);
  s.send(*h.a, h.now);
  EXPECT_EQ(s.next_send, 256u);  // accepted, held while Down
  uint64_t sent = h.a->stats().frames_sent;
  // Both ends keep handshaking, neither trains, no data moves.
  h.run_until([] { return false; }, 50'000'000);
  EXPECT_EQ(h.a->state(), LinkState::kDown);
  EXPECT_EQ(h.b->state(), LinkState::kDown);
  EXPECT_EQ(h.a->stats().frames_sent, sent);
  EXPECT_EQ(h.b->stats().payloads_delivered, 0u);
  EXPECT_GT(h.a->stats().handshake_frames_sent, 5u);
  EXPECT_EQ(h.a->stats().handshakes, 1u);

  h.b->set_disabled(false, h.now);
  ASSERT_TRUE(
      h.run_until([&] { return h.a->state() == LinkState::kUp && h.b->state() == LinkState::kUp; },
                  1'000'000));  // at once, not after a handshake interval
  EXPECT_FALSE(h.a->peer_disabled());
  expect_resumed_after_one_outage(h, s);
}

// The log says why a link went down, at the level the reason deserves.
TEST(Link, GoingDownLogsWhyAtItsLevel) {
  std::vector<std::string> lines;
  log::Options o;
  o.level = log::Level::kDebug;
  ASSERT_TRUE(log::configure(o).ok());
  log::set_sink([&](std::string_view l) { lines.emplace_back(l); });
  auto has = [&](const char* level, const char* why) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(fmt::format(" {} E4833 ", level)) != std::string::npos &&
             l.find(why) != std::string::npos;
    });
  };
  {
    Harness h(config(100), config(200));
    ASSERT_TRUE(h.both_up());
    h.b->set_disabled(true, h.now);
    ASSERT_TRUE(h.run_until([&] { return h.a->state() == LinkState::kDown; }, 100'000));
    EXPECT_TRUE(has("INFO", "down (taken down at this end)"));
    EXPECT_TRUE(has("INFO", "down (the peer took it down)"));
    EXPECT_FALSE(has("WARN", "")) << lines.front();
  }
  lines.clear();
  {
    LinkConfig ca = config(100), cb = config(200);
    ca.closing_is_routine = cb.closing_is_routine = true;
    ca.dead_after_ns = cb.dead_after_ns = 20'000'000;
    Harness h(ca, cb);
    ASSERT_TRUE(h.both_up());
    h.a->set_disabled(true, h.now);
    ASSERT_TRUE(h.run_until([&] { return h.b->state() == LinkState::kDown; }, 100'000));
    EXPECT_TRUE(has("DEBUG", "down (taken down at this end)"));
    EXPECT_TRUE(has("DEBUG", "down (the peer took it down)"));
    EXPECT_FALSE(has("INFO", ""));
    // A peer that stops answering is a warning whatever the link.
    h.a->set_disabled(false, h.now);
    ASSERT_TRUE(h.both_up());
    h.blackhole_ab = h.blackhole_ba = true;
    ASSERT_TRUE(h.run_until([&] { return h.a->state() == LinkState::kDown; }, 100'000'000));
    EXPECT_TRUE(has("WARN", "down (no answer from the peer)"));
  }
  log::set_sink({});
  ASSERT_TRUE(log::configure(log::Options{}).ok());
}

TEST(Link, DisabledBeforeTheFirstHandshakeNeverTrains) {
  Harness h(config(100), config(200));
  h.a->set_disabled(true, h.now);
  h.run_until([] { return false; }, 30'000'000);
  EXPECT_EQ(h.a->state(), LinkState::kDown);
  EXPECT_EQ(h.b->state(), LinkState::kDown);
  EXPECT_EQ(h.b->stats().handshakes, 0u);
  h.a->set_disabled(false, h.now);
  ASSERT_TRUE(h.both_up());
}

TEST(Link, PeerRestartResetsSequenceStateAndResendsUnacknowledgedFrames) {
  Harness h(config(100), config(200));
  ASSERT_TRUE(h.both_up());
  Stream s(100);
  ASSERT_TRUE(h.run_until(
      [&] {
        s.send(*h.a, h.now);
        s.receive(*h.b);
        return s.done() && h.a->in_flight() == 0;
      },
      100'000'000));
  // 20 more payloads that the old B never receives.
  h.blackhole_ab = true;
  std::vector<uint8_t> p;
  for (uint64_t i = 0; i < 20; ++i) {
    make_payload(1000 + i, &p);
    ASSERT_TRUE(h.a->send(p, h.now).ok());
  }
  h.step(5'000);
  h.ab.clear();
  h.ba.clear();
  h.b = std::make_unique<Link>(config(201));  // B restarts
  h.blackhole_ab = false;
  ASSERT_TRUE(h.both_up());
  EXPECT_EQ(h.a->stats().peer_restarts, 1u);
  EXPECT_EQ(h.a->stats().handshakes, 2u);
  EXPECT_EQ(h.a->peer_epoch(), 201u);
  std::vector<uint8_t> got, expected;
  uint64_t n = 0;
  ASSERT_TRUE(h.run_until(
      [&] {
        while (h.b->pop_delivered(&got)) {
          make_payload(1000 + n, &expected);
          EXPECT_EQ(got, expected) << n;
          ++n;
        }
        return n >= 20 && h.a->in_flight() == 0;
      },
      200'000'000));
  EXPECT_EQ(n, 20u);
  // The new B sends too; A's receive numbering simply continues.
  Stream back(50);
  ASSERT_TRUE(h.run_until(
      [&] {
        back.send(*h.b, h.now);
        back.receive(*h.a);
        return back.done();
      },
      100'000'000));
  EXPECT_EQ(back.errors, 0u);

  // A late handshake of the dead incarnation changes nothing.
  LinkFrame old;
  old.type = LinkFrameType::kHandshake;
  old.link_id = kLinkId;
  old.epoch = 200;
  old.peer_epoch = 100;
  std::vector<uint8_t> bytes;
  encode_link_frame(old, &bytes);
  h.a->on_datagram(bytes, h.now);
  EXPECT_EQ(h.a->peer_epoch(), 201u);
  EXPECT_EQ(h.a->state(), LinkState::kUp);
  EXPECT_GE(h.a->stats().stale_frames, 1u);
}

// Loopback without latency or loss: the cost of the link layer itself on one core.
TEST(Link, ThroughputInMemory) {
  LinkConfig ca = config(100), cb = config(200);
  Link a(ca), b(cb);
  std::vector<uint8_t> d, got;
  uint64_t now = 1'000'000'000;
  auto pump = [&] {
    while (a.pop_outgoing(&d)) b.on_datagram(d, now);
    while (b.pop_outgoing(&d)) a.on_datagram(d, now);
  };
  a.on_timer(now);
  b.on_timer(now);
  for (int i = 0; i < 4; ++i) pump();
  ASSERT_EQ(a.state(), LinkState::kUp);
  constexpr uint64_t kFrames = 300'000;
  std::vector<uint8_t> payload(256, 0x5A);
  uint64_t sent = 0, received = 0;
  auto start = std::chrono::steady_clock::now();
  while (received < kFrames) {
    now += 1'000;
    while (sent < kFrames && a.can_send()) {
      payload[0] = static_cast<uint8_t>(sent);
      if (!a.send(payload, now).ok()) break;
      ++sent;
    }
    while (a.pop_outgoing(&d)) b.on_datagram(d, now);
    while (b.pop_delivered(&got)) {
      if (got.size() != 256 || got[0] != static_cast<uint8_t>(received)) break;
      ++received;
    }
    if (b.next_deadline_ns() <= now) b.on_timer(now);
    if (a.next_deadline_ns() <= now) a.on_timer(now);
    while (b.pop_outgoing(&d)) a.on_datagram(d, now);
    if (now > 1'000'000'000 + 10'000'000'000ull) break;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(received, kFrames);
  double rate = static_cast<double>(kFrames) / seconds;
  std::printf("link throughput in memory: %.0f frames/s of 256 bytes (%.0f MB/s), %lu acks\n", rate,
              rate * 256 / 1e6, (unsigned long)b.stats().acks_sent);
  EXPECT_GT(rate, 20'000.0);
  EXPECT_EQ(a.stats().retransmissions, 0u);
}

}  // namespace
}  // namespace galaxy::live
