// The modern C++ API: RAII handles, chrono timeouts, span payloads,
// exceptions per error kind.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <cstring>
#include <thread>

#include <unistd.h>

#include "common.hpp"

using namespace std::chrono_literals;
using tagwire::Client;
using tagwire::SubscribeOptions;

namespace {

std::span<const std::byte> bytes_of(const std::vector<std::uint8_t>& v) {
  return std::as_bytes(std::span(v));
}

TEST(CppApi, messages_arrive_in_order_with_sender_and_timestamp) {
  Client c(test_options());
  auto tag = unique_tag("round");
  c.create_tag(tag);
  auto sub = c.subscribe(tag, SubscribeOptions().depth(128));
  auto pub = c.publisher(tag);
  auto before = tagwire::Clock::now();
  for (std::uint8_t i = 0; i < 100; ++i) {
    std::vector<std::uint8_t> v(i + 1u, i);
    EXPECT_EQ(pub.send(bytes_of(v)), i + 1u);
  }
  for (std::uint8_t i = 0; i < 100; ++i) {
    auto m = sub.receive(1s);
    ASSERT_EQ(m.payload.size(), i + 1u);
    EXPECT_EQ(m.payload.back(), std::byte{i});
    EXPECT_EQ(m.seq, i + 1u);
    EXPECT_EQ(m.sender.pid, static_cast<std::uint32_t>(getpid()));
    EXPECT_GE(m.timestamp + 1s, before);
  }
  EXPECT_EQ(c.me().pid, static_cast<std::uint32_t>(getpid()));
}

TEST(CppApi, errors_are_exceptions_of_their_kind) {
  Client c(test_options());
  EXPECT_THROW(c.publisher("no-slash"), tagwire::InvalidName);
  EXPECT_THROW(c.publisher(unique_tag("missing")), tagwire::UnknownTag);
  try {
    c.subscribe(unique_tag("missing"));
    FAIL() << "subscribing to a missing tag must throw";
  } catch (const tagwire::Error& e) {
    EXPECT_EQ(e.kind(), tagwire::Errc::unknown_tag);
    EXPECT_STREQ(e.kind_name(), "ERR_UNKNOWN_TAG");
    EXPECT_NE(std::string(e.what()).find("create it first"), std::string::npos);
  }
  auto tag = unique_tag("timeout");
  c.create_tag(tag, tagwire::Domain::local);
  auto sub = c.subscribe(tag);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(sub.receive(30ms), tagwire::Timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
  EXPECT_FALSE(sub.try_receive(0ns).has_value());
  tagwire::ClientOptions nowhere;
  nowhere.socket = "/nonexistent/tagwire.sock";
  nowhere.autostart = false;
  EXPECT_THROW(Client{nowhere}, tagwire::DaemonUnreachable);
  auto small = unique_tag("small-ring");
  c.create_tag(small, tagwire::Domain::local, tagwire::TagParams{16, 0, 0, 0});
  EXPECT_THROW(c.subscribe(small, SubscribeOptions().depth(17)), tagwire::DepthTooLarge);
  EXPECT_NO_THROW(c.subscribe(small, SubscribeOptions().depth(16)));
  // Unset (0), the depth fits the ring; 64 asked for is checked like any.
  EXPECT_NO_THROW(c.subscribe(small));
  EXPECT_THROW(c.subscribe(small, SubscribeOptions().depth(64)), tagwire::DepthTooLarge);
}

TEST(CppApi, a_destroyed_tag_wakes_a_blocked_receiver) {
  Client c(test_options());
  auto tag = unique_tag("destroy");
  c.create_tag(tag);
  auto sub = c.subscribe(tag);
  std::thread killer([&] {
    std::this_thread::sleep_for(100ms);
    Client(test_options()).destroy_tag(tag);
  });
  EXPECT_THROW(sub.receive(10s), tagwire::TagDestroyed);
  killer.join();
}

TEST(CppApi, large_messages_take_the_blob_path_and_arrive_whole) {
  Client c(test_options());
  auto tag = unique_tag("large");
  c.create_tag(tag);
  auto sub = c.subscribe(tag);
  auto pub = c.publisher(tag);
  std::vector<std::uint8_t> big(300 * 1024);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 31);
  ASSERT_GT(big.size(), pub.max_fast_message());
  pub.send(bytes_of(big));
  auto m = sub.receive(5s);
  ASSERT_EQ(m.payload.size(), big.size());
  EXPECT_EQ(std::memcmp(m.payload.data(), big.data(), big.size()), 0);

  std::vector<std::byte> small(16);
  pub.send(bytes_of(big));
  EXPECT_THROW(sub.receive_into(small, 5s), tagwire::BufferTooSmall);
  auto again = sub.receive(0ns);
  EXPECT_EQ(again.payload.size(), big.size()) << "the message that did not fit is kept";
  EXPECT_EQ(again.seq, 2u);
  EXPECT_THROW(pub.send(nullptr, 10), tagwire::InvalidArgument);
  // One byte over the 256 MiB limit (never touched: the length is checked first).
  std::size_t over = (std::size_t(256) << 20) + 1;
  std::unique_ptr<std::byte[]> huge(new std::byte[over]);
  EXPECT_THROW(pub.send(huge.get(), over), tagwire::TooLarge);
}

TEST(CppApi, a_lossless_subscriber_misses_nothing_from_a_flat_out_publisher) {
  Client c(test_options());
  auto tag = unique_tag("lossless");
  c.create_tag(tag, tagwire::Domain::global, tagwire::TagParams{64, 0, 0, 0});
  auto sub = c.subscribe(tag, SubscribeOptions().lossless());
  constexpr std::uint64_t N = 20000;
  std::thread writer([&] {
    Client w(test_options());
    auto pub = w.publisher(tag);
    pub.set_send_timeout(10s);
    for (std::uint64_t i = 0; i < N; ++i) pub.send(&i, sizeof i);
  });
  std::array<std::byte, 64> buf{};
  for (std::uint64_t i = 0; i < N; ++i) {
    auto info = sub.receive_into(buf, 10s);
    ASSERT_EQ(info.len, sizeof i);
    std::uint64_t v;
    std::memcpy(&v, buf.data(), sizeof v);
    ASSERT_EQ(v, i);
    ASSERT_EQ(info.seq, i + 1);
  }
  writer.join();
  EXPECT_EQ(sub.lost(), 0u);
}

TEST(CppApi, every_nth_sample_and_best_effort_options_reach_the_library) {
  Client c(test_options());
  auto tag = unique_tag("every");
  c.create_tag(tag);
  auto sub = c.subscribe(tag, SubscribeOptions().every(5).best_effort().depth(256));
  auto pub = c.publisher(tag);
  for (int i = 0; i < 20; ++i) pub.send("x");
  std::vector<std::uint64_t> seqs;
  while (auto m = sub.try_receive(0ns)) seqs.push_back(m->seq);
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{5, 10, 15, 20}));
}

TEST(CppApi, every_packet_class_is_a_subscription_option_and_a_bad_one_an_error) {
  Client c(test_options());
  auto tag = unique_tag("classes");
  c.create_tag(tag);
  std::vector<tagwire::Subscriber> subs;
  for (auto k : {TW_PRIORITY_LOW, TW_PRIORITY_NORMAL, TW_PRIORITY_HIGH, TW_PRIORITY_CRITICAL}) {
    subs.push_back(c.subscribe(tag, SubscribeOptions().priority(k)));
  }
  subs.push_back(c.subscribe(tag, SubscribeOptions().dscp(18)));
  auto pub = c.publisher(tag);
  pub.send("x");
  for (auto& s : subs) EXPECT_EQ(s.receive(5s).seq, 1u);
  EXPECT_THROW(c.subscribe(tag, SubscribeOptions().priority(9)), tagwire::InvalidArgument);
  EXPECT_THROW(c.subscribe(tag, SubscribeOptions().dscp(64)), tagwire::InvalidArgument);
}

TEST(CppApi, a_subscriptions_class_changes_at_run_time) {
  Client c(test_options());
  auto tag = unique_tag("reclass");
  c.create_tag(tag);
  auto sub = c.subscribe(tag, SubscribeOptions());
  EXPECT_EQ(c.set_channel_qos(tag, TW_PRIORITY_CRITICAL), 1u);
  // Asking for the class it has now changes nothing.
  EXPECT_EQ(c.set_channel_qos(tag, TW_PRIORITY_CRITICAL), 0u);
  EXPECT_EQ(c.set_channel_qos(tag, TW_PRIORITY_DSCP | 18, static_cast<std::uint32_t>(getpid())), 1u);
  // No subscription of that process here; no such class.
  EXPECT_THROW(c.set_channel_qos(tag, TW_PRIORITY_HIGH, 1), tagwire::NotSubscribed);
  EXPECT_THROW(c.set_channel_qos(tag, 9), tagwire::InvalidArgument);
  // The thread policy likewise.
  EXPECT_EQ(c.set_channel_sched(tag, TW_SCHED_OTHER | 5), 1u);
  EXPECT_EQ(c.set_channel_sched(tag, TW_SCHED_OTHER | 5), 0u);
  if (geteuid() == 0) {
    EXPECT_EQ(c.set_channel_sched(tag, TW_SCHED_FIFO | 10), 1u);
  } else {
    EXPECT_THROW(c.set_channel_sched(tag, TW_SCHED_FIFO | 10), tagwire::NotPermitted);
  }
  EXPECT_THROW(c.set_channel_sched(tag, TW_SCHED_RR | 0), tagwire::InvalidArgument);
  // Whose, on which node, both at once, or one kept.
  EXPECT_EQ(c.change_channels(tag, "all", TW_PRIORITY_HIGH, TW_SCHED_OTHER | 3), 1u);
  EXPECT_EQ(c.change_channels(tag, "here", TW_PRIORITY_HIGH, TW_SCHED_OTHER | 3), 0u);
  EXPECT_EQ(c.change_channels(tag, std::to_string(getpid()), TW_KEEP, TW_SCHED_OTHER | 4), 1u);
  EXPECT_THROW(c.change_channels(tag, "1@127.0.0.1", TW_PRIORITY_LOW), tagwire::NotSubscribed);
  // A daemon alone reaches no other node; a choice that is none.
  EXPECT_THROW(c.change_channels(tag, "@10.99.0.9", TW_PRIORITY_LOW), tagwire::Error);
  EXPECT_THROW(c.change_channels(tag, "x@node", TW_PRIORITY_LOW), tagwire::InvalidArgument);
  auto pub = c.publisher(tag);
  pub.send("x");
  EXPECT_EQ(sub.receive(5s).seq, 1u);
  // A publisher's own class and policy.
  auto classed = c.publisher(tag, tagwire::PublishOptions().priority(TW_PRIORITY_CRITICAL).sched_other(2));
  classed.send("y");
  EXPECT_EQ(sub.receive(5s).text(), "y");
  EXPECT_THROW(c.publisher(tag, tagwire::PublishOptions().priority(9)), tagwire::InvalidArgument);
  EXPECT_THROW(c.publisher(tag, tagwire::PublishOptions().sched_rr(0)), tagwire::InvalidArgument);
  EXPECT_THROW(c.publisher(tag, tagwire::PublishOptions().pacing_fixed(0)), tagwire::InvalidArgument);
  if (geteuid() == 0) {
    EXPECT_NO_THROW(c.publisher(tag, tagwire::PublishOptions().sched_fifo(10)));
  } else {
    EXPECT_THROW(c.publisher(tag, tagwire::PublishOptions().sched_fifo(10)), tagwire::NotPermitted);
  }
}

TEST(CppApi, a_publisher_asks_a_pacing_and_its_rights_change_at_run_time) {
  Client c(test_options());
  auto tag = unique_tag("paced");
  c.create_tag(tag);
  auto sub = c.subscribe(tag, SubscribeOptions().depth(8));
  auto paced = c.publisher(tag, tagwire::PublishOptions().pacing_fixed(2000000));
  // A change to what the publisher already asked changes nothing: the
  // option reached its right.
  EXPECT_EQ(c.change_pacing(tag, "all", TW_PACING_FIXED, 2000000), 0u);
  EXPECT_EQ(c.change_pacing(tag, "all", TW_PACING_ADAPTIVE), 1u);
  EXPECT_EQ(c.change_pacing(tag, std::to_string(getpid()), TW_PACING_ADAPTIVE), 0u);
  EXPECT_EQ(c.change_pacing(tag, "here", TW_PACING_OFF), 1u);
  EXPECT_THROW(c.change_pacing(tag, "all", TW_PACING_FIXED, 0), tagwire::InvalidArgument);
  EXPECT_THROW(c.change_pacing(tag, "all", 7), tagwire::InvalidArgument);
  // Its class and policy likewise.
  EXPECT_EQ(c.change_publishers(tag, "all", TW_PRIORITY_CRITICAL), 1u);
  EXPECT_EQ(c.change_publishers(tag, "all", TW_PRIORITY_CRITICAL, TW_SCHED_OTHER), 0u);
  EXPECT_EQ(c.change_publishers(tag, "all", TW_KEEP, TW_SCHED_OTHER | 3), 1u);
  EXPECT_THROW(c.change_publishers(tag, "1@127.0.0.1", TW_PRIORITY_LOW), tagwire::NoSendAccess);
  // Another publisher asking adaptive from the start.
  auto adaptive = c.publisher(tag, tagwire::PublishOptions().pacing_adaptive());
  EXPECT_EQ(c.change_pacing(tag, "all", TW_PACING_OFF), 1u);
  paced.send("p");
  adaptive.send("a");
  EXPECT_EQ(sub.receive(5s).text(), "p");
  EXPECT_EQ(sub.receive(5s).text(), "a");
}

TEST(CppApi, a_thread_policy_is_a_subscription_option) {
  Client c(test_options());
  auto tag = unique_tag("sched");
  c.create_tag(tag);
  std::vector<tagwire::Subscriber> subs;
  subs.push_back(c.subscribe(tag, SubscribeOptions().sched_other(5)));
  // Root may ask for a real-time policy; anyone else is told why not.
  if (geteuid() == 0) {
    subs.push_back(c.subscribe(tag, SubscribeOptions().sched_fifo(10)));
    subs.push_back(c.subscribe(tag, SubscribeOptions().sched_rr(10)));
  } else {
    EXPECT_THROW(c.subscribe(tag, SubscribeOptions().sched_fifo(10)), tagwire::NotPermitted);
  }
  auto pub = c.publisher(tag);
  pub.send("x");
  for (auto& s : subs) EXPECT_EQ(s.receive(5s).seq, 1u);
  EXPECT_THROW(c.subscribe(tag, SubscribeOptions().sched_fifo(0)), tagwire::InvalidArgument);
}

TEST(CppApi, history_is_pulled_and_handed_to_a_late_joiner) {
  Client c(test_options());
  auto tag = unique_tag("history");
  c.create_tag(tag, tagwire::Domain::global, tagwire::TagParams{0, 0, 50, 0});
  auto pub = c.publisher(tag);
  for (int i = 1; i <= 10; ++i) pub.send(std::to_string(i));
  auto past = c.pull(tag, tagwire::HistoryQuery::last(3));
  ASSERT_EQ(past.size(), 3u);
  EXPECT_EQ(past[0].text(), "8");
  EXPECT_EQ(past[2].text(), "10");
  EXPECT_EQ(past[2].sender.pid, static_cast<std::uint32_t>(getpid()));
  EXPECT_EQ(c.pull(tag, tagwire::HistoryQuery::since(9)).size(), 2u);

  auto late = c.subscribe_with_history(tag, SubscribeOptions(), tagwire::HistoryQuery::last(2));
  pub.send("11");
  EXPECT_EQ(late.receive(1s).text(), "9");
  EXPECT_EQ(late.receive(1s).text(), "10");
  EXPECT_EQ(late.receive(1s).text(), "11") << "then live, no gap, no duplicate";
}

TEST(CppApi, senders_receivers_tags_and_nodes_are_listed) {
  Client c(test_options());
  auto tag = unique_tag("members");
  c.create_tag(tag);
  EXPECT_TRUE(c.senders(tag).empty());
  auto pub = c.publisher(tag);
  auto s1 = c.subscribe(tag);
  auto s2 = c.subscribe(tag);
  auto senders = c.senders(tag);
  ASSERT_EQ(senders.size(), 1u);
  EXPECT_EQ(senders[0].who.pid, static_cast<std::uint32_t>(getpid()));
  EXPECT_EQ(c.receivers(tag).size(), 2u);
  bool found = false;
  for (const auto& t : c.tags()) {
    if (t.name == tag) {
      found = true;
      EXPECT_EQ(t.senders.size(), 1u);
      EXPECT_EQ(t.receivers.size(), 2u);
    }
  }
  EXPECT_TRUE(found);
  // The library's own table follows, without asking the daemon.
  std::optional<tagwire::TagSummary> mine;
  for (int i = 0; i < 500 && !(mine && mine->receivers.size() == 2); ++i) {
    mine = c.local_view(tag);
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(mine->name, tag);
  EXPECT_EQ(mine->senders.size(), 1u);
  EXPECT_EQ(mine->receivers.size(), 2u);
  EXPECT_FALSE(c.local_view(unique_tag("unknown")).has_value());
  auto nodes = c.nodes();
  ASSERT_FALSE(nodes.empty());
  EXPECT_EQ(nodes[0].state, tagwire::NodeSummary::State::up);
  c.ping();
}

TEST(CppApi, a_client_is_shared_by_threads) {
  Client c(test_options());
  auto tag = unique_tag("threads");
  c.create_tag(tag);
  auto sub = c.subscribe(tag, SubscribeOptions().depth(256));
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&c, tag] {
      auto pub = c.publisher(tag);
      for (int i = 0; i < 25; ++i) pub.send("m");
    });
  }
  for (auto& t : ts) t.join();
  int n = 0;
  while (sub.try_receive(0ns)) ++n;
  EXPECT_EQ(n, 100);
}

// Last: it restarts the daemon the other tests share.
TEST(CppApi, zz_a_daemon_restart_is_survived_by_publishers_and_subscribers) {
  Client c(test_options());
  auto tag = unique_tag("restart");
  c.create_tag(tag);
  auto sub = c.subscribe(tag);
  auto pub = c.publisher(tag);
  pub.send("before");
  EXPECT_EQ(sub.receive(1s).text(), "before");
  daemon_for_tests().restart();
  // The library reconnects and re-registers by itself: the new daemon lists
  // the publisher again, and a subscriber that joins after the restart gets
  // what the old publisher sends (it moved to the new daemon's ring).
  auto deadline = std::chrono::steady_clock::now() + 20s;
  std::size_t senders = 0;
  while (senders == 0 && std::chrono::steady_clock::now() < deadline) {
    try {
      senders = Client(test_options()).senders(tag).size();
    } catch (const tagwire::Error&) {
    }
    if (senders == 0) std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(senders, 1u) << "send access was not re-registered after the restart";
  Client fresh(test_options());
  auto newcomer = fresh.subscribe(tag);
  bool delivered = false;
  while (!delivered && std::chrono::steady_clock::now() < deadline) {
    try {
      pub.send("after");
      auto m = newcomer.try_receive(200ms);
      delivered = m && m->text() == "after" && m->sender.pid == static_cast<std::uint32_t>(getpid());
    } catch (const tagwire::Error&) {
      std::this_thread::sleep_for(50ms);
    }
  }
  EXPECT_TRUE(delivered) << "the old publisher does not reach a new subscriber after the restart";
  auto m = sub.try_receive(2s);
  ASSERT_TRUE(m.has_value()) << "the old subscriber hears nothing after the restart";
  EXPECT_EQ(m->text(), "after");
}

}  // namespace
