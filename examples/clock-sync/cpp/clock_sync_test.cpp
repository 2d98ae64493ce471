// The C++ clock-synchronisation protocol: the same bytes as the Rust crate
// (pinned by the same hex in both languages' tests) and the same handshake
// (the Rust unit tests' cases).
#include <gtest/gtest.h>

#include <algorithm>

#include "clock_sync.hpp"

using namespace clock_sync;
using namespace std::chrono;

namespace {

const Clock::duration H = milliseconds(100);

std::string hex(const Bytes& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (auto x : b) {
    s += d[x >> 4];
    s += d[x & 15];
  }
  return s;
}

Request req(std::uint32_t slave, std::uint64_t seq) { return Request{slave, seq, static_cast<std::int64_t>(seq) * 1000}; }

MasterMsg heartbeat(std::uint32_t master, std::uint32_t rank, bool active,
                    std::vector<std::pair<std::uint32_t, std::uint64_t>> answered = {}) {
  return Heartbeat{master, rank, active, std::move(answered)};
}

std::vector<std::pair<std::uint32_t, std::uint64_t>> replies(const std::vector<Action>& a) {
  std::vector<std::pair<std::uint32_t, std::uint64_t>> out;
  for (const auto& x : a) {
    if (auto* r = std::get_if<Answer>(&x)) out.emplace_back(r->reply.slave, r->reply.seq);
  }
  return out;
}

bool took_over(const std::vector<Action>& a) {
  return std::any_of(a.begin(), a.end(), [](const Action& x) {
    auto* r = std::get_if<Role>(&x);
    return r && r->active;
  });
}

}  // namespace

TEST(ClockSyncWire, TheBytesAreTheRustCratesOnes) {
  // The same hex is in the Rust crate's `the_wire_bytes_are_pinned` test.
  EXPECT_EQ(hex(Request{3, 7, -5}.encode()), "01030000000700000000000000fbffffffffffffff");
  EXPECT_EQ(hex(Reply{3, 7, 1, 2, 3, 9}.encode()),
            "0203000000070000000000000001000000000000000200000000000000030000000000000009000000");
  EXPECT_EQ(hex(encode(heartbeat(1, 0, true, {{2, 9}}))), "0301000000000000000101000000020000000900000000000000");
  EXPECT_EQ(hex(encode(SyncRequest{4, 77})), "04040000004d00000000000000");
  EXPECT_EQ(hex(encode(SyncReply{4, 77, 80, 81})), "05040000004d0000000000000050000000000000005100000000000000");
}

TEST(ClockSyncWire, EveryMessageDecodesToItselfAndGarbageToNothing) {
  Request r = req(3, 7);
  EXPECT_EQ(Request::decode(r.encode()), r);
  Reply rep{3, 7, -5, 6, 9, 2};
  EXPECT_EQ(Reply::decode(rep.encode()), rep);
  for (const MasterMsg& m : {heartbeat(1, 0, true, {{1, 5}, {2, 9}}), MasterMsg(SyncRequest{4, 77}),
                             MasterMsg(SyncReply{4, 77, 80, 81})}) {
    Bytes b = encode(m);
    EXPECT_EQ(decode_master_msg(b), m);
    // Every truncation and one byte too many are refused.
    for (std::size_t n = 0; n < b.size(); ++n) {
      EXPECT_FALSE(decode_master_msg(std::span<const std::uint8_t>(b.data(), n))) << n;
    }
    Bytes longer = b;
    longer.push_back(0);
    EXPECT_FALSE(decode_master_msg(longer));
  }
  EXPECT_FALSE(Request::decode(rep.encode()));
  EXPECT_FALSE(Reply::decode(r.encode()));
  // A heartbeat claiming more slaves than it may list.
  Bytes b = encode(heartbeat(1, 0, true));
  std::fill(b.end() - 4, b.end(), 0xff);
  EXPECT_FALSE(decode_master_msg(b));
}

TEST(ClockSyncEstimator, TheEstimateIsTheExchangeOfLeastBound) {
  Estimator e;
  EXPECT_FALSE(e.best(0));
  EXPECT_EQ(e.sample(0, 1050, 1050, 100), (std::pair<std::int64_t, std::int64_t>{1000, 100}));
  EXPECT_EQ(e.sample(200, 1500, 1500, 600).second, 400);
  EXPECT_EQ(e.sample(700, 1720, 1720, 740), (std::pair<std::int64_t, std::int64_t>{1000, 40}));
  EXPECT_EQ(e.best(740), (std::pair<std::int64_t, std::int64_t>{1000, 20}));
}

TEST(ClockSyncMasterClock, TrustedAsTheReferenceOrWithinItsBoundOfIt) {
  // The Rust test's cases (a_master_clock_is_trusted_as_the_reference_...).
  using P = std::pair<std::int64_t, std::int64_t>;
  const std::int64_t ms = 1000000;
  MasterClock c;
  EXPECT_FALSE(c.trusted(0));
  EXPECT_EQ(c.read(5), 5);
  c.follow(1);
  c.on_sync_reply(0, 7 * ms, 7 * ms, 5 * ms);
  EXPECT_EQ(c.read(10 * ms), 14500000);
  EXPECT_FALSE(c.trusted(5 * ms));
  c.on_sync_reply(100 * ms, 103 * ms + 100000, 103 * ms + 100000, 100 * ms + 200000);
  EXPECT_EQ(c.estimate(100 * ms + 200000), (P{3 * ms, 100000}));
  EXPECT_TRUE(c.trusted(2100 * ms));
  EXPECT_FALSE(c.trusted(8200 * ms));
  c.follow(1);
  EXPECT_TRUE(c.trusted(200 * ms));
  c.follow(2);
  EXPECT_EQ(c.read(0), 3 * ms);
  EXPECT_FALSE(c.estimate(200 * ms));
  c.on_sync_reply(300 * ms, 303 * ms + 600000, 303 * ms + 600000, 300 * ms + 800000);
  EXPECT_EQ(c.read(0), 3 * ms);
  EXPECT_EQ(c.estimate(301 * ms), (P{3 * ms, 600000}));
  EXPECT_FALSE(c.trusted(301 * ms));
  c.on_sync_reply(400 * ms, 403 * ms + 150000, 403 * ms + 150000, 400 * ms + 100000);
  EXPECT_EQ(c.estimate(401 * ms), (P{3100000, 50000}));
  EXPECT_TRUE(c.trusted(401 * ms));
  c.become_reference();
  EXPECT_EQ(c.read(7), 7);
  EXPECT_EQ(c.estimate(0), (P{0, 0}));
  c.follow(2);
  EXPECT_FALSE(c.estimate(0));
}

TEST(ClockSyncMaster, ALoneMasterAnswersAfterSettlingAndNotBefore) {
  auto t0 = Clock::now();
  Master m(1, 0, Config::with_heartbeat(H), t0);
  EXPECT_FALSE(m.on_request(req(9, 1), 10));
  EXPECT_FALSE(took_over(m.tick(t0 + H, 0)));
  auto a = m.tick(t0 + 2 * H, 20);
  EXPECT_TRUE(took_over(a));
  // The request heard while settling is answered at the take-over.
  EXPECT_EQ(replies(a), (std::vector<std::pair<std::uint32_t, std::uint64_t>>{{9, 1}}));
  EXPECT_TRUE(m.on_request(req(9, 3), 30));
  // Asked again (lost on the way): answered, an older one too.
  EXPECT_TRUE(m.on_request(req(9, 3), 31));
  EXPECT_TRUE(m.on_request(req(9, 2), 32));
}

TEST(ClockSyncMaster, ABackupTakesOverWhenHeartbeatsStopAndAnswersWhatIsOutstanding) {
  auto t0 = Clock::now();
  auto cfg = Config::with_heartbeat(H);
  Master b(2, 1, cfg, t0);
  auto t = t0;
  for (std::uint64_t seq = 1; seq <= 3; ++seq) b.on_request(req(5, seq), 0);
  b.on_heartbeat(heartbeat(1, 0, true, {{5, 2}}), t);
  EXPECT_EQ(b.pending(), 1u);
  for (int i = 0; i < 10; ++i) {
    t += H;
    b.on_heartbeat(heartbeat(1, 0, true, {{5, 2}}), t);
    EXPECT_FALSE(took_over(b.tick(t, 0)));
  }
  EXPECT_EQ(b.active_master(t), 1u);
  // Silence: no take-over within 1.5 heartbeats, one after.
  EXPECT_FALSE(took_over(b.tick(t + H, 0)));
  auto wake = b.poll_timeout(t + H);
  EXPECT_EQ(wake, t + cfg.fail_after);
  auto a = b.tick(wake, 0);
  EXPECT_TRUE(took_over(a));
  EXPECT_EQ(replies(a), (std::vector<std::pair<std::uint32_t, std::uint64_t>>{{5, 3}}));
  EXPECT_EQ(b.active_master(wake), 2u);
}

TEST(ClockSyncMaster, OfTwoBackupsOnlyTheBetterRankedTakesOver) {
  auto t0 = Clock::now();
  auto cfg = Config::with_heartbeat(H);
  Master b1(2, 1, cfg, t0), b2(3, 2, cfg, t0);
  auto t = t0;
  for (int i = 0; i < 5; ++i) {
    t += H;
    b1.on_heartbeat(heartbeat(1, 0, true), t);
    b2.on_heartbeat(heartbeat(1, 0, true), t);
    b1.on_heartbeat(heartbeat(3, 2, false), t);
    b2.on_heartbeat(heartbeat(2, 1, false), t);
  }
  auto end = t + 3 * H;
  bool took1 = false, took2 = false;
  int step = 0;
  while (t < end) {
    t += H / 10;
    took1 |= took_over(b1.tick(t, 0));
    took2 |= took_over(b2.tick(t, 0));
    if (++step % 10 == 0) {
      b1.on_heartbeat(heartbeat(3, 2, false), t);
      b2.on_heartbeat(heartbeat(2, 1, b1.is_active()), t);
    }
  }
  EXPECT_TRUE(took1);
  EXPECT_FALSE(took2);
}

TEST(ClockSyncMaster, AReturningMasterStaysBackupAndTwoAnsweringMastersBecomeOne) {
  auto t0 = Clock::now();
  auto cfg = Config::with_heartbeat(H);
  Master back(1, 0, cfg, t0);
  auto t = t0;
  for (int i = 0; i < 10; ++i) {
    t += H / 2;
    back.on_heartbeat(heartbeat(2, 1, true), t);
    EXPECT_FALSE(took_over(back.tick(t, 0))) << i;
  }
  EXPECT_EQ(back.active_master(t), 2u);
  Master worse(2, 1, cfg, t0);
  EXPECT_TRUE(took_over(worse.tick(t0 + 3 * H, 0)));
  auto a = worse.on_heartbeat(heartbeat(1, 0, true), t0 + 3 * H);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_FALSE(std::get<Role>(a[0]).active);
  Master better(1, 0, cfg, t0);
  EXPECT_TRUE(took_over(better.tick(t0 + 3 * H, 0)));
  EXPECT_TRUE(better.on_heartbeat(heartbeat(2, 1, true), t0 + 3 * H).empty());
  EXPECT_TRUE(better.is_active());
}

TEST(ClockSyncMaster, OutstandingRequestsAreBounded) {
  auto t0 = Clock::now();
  auto cfg = Config::with_heartbeat(H);
  cfg.max_pending = 4;
  Master m(1, 0, cfg, t0);
  for (std::uint64_t seq = 1; seq <= 10; ++seq) m.on_request(req(1, seq), 0);
  EXPECT_EQ(m.pending(), 4u);
  EXPECT_EQ(m.dropped(), 6u);
  auto a = m.tick(t0 + cfg.settle, 0);
  EXPECT_EQ(replies(a), (std::vector<std::pair<std::uint32_t, std::uint64_t>>{{1, 7}, {1, 8}, {1, 9}, {1, 10}}));
}
