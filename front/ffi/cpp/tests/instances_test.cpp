// Keyed messages from C and C++: keys, instance states and strength reach
// the subscriber; exclusive ownership and deadlines per instance.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

#include "common.hpp"

using namespace std::chrono_literals;
using tagwire::Client;
using tagwire::InstanceState;
using tagwire::SubscribeOptions;

namespace {

std::array<std::uint8_t, 16> key16(std::string_view k) {
  std::array<std::uint8_t, 16> a{};
  std::memcpy(a.data(), k.data(), k.size());
  return a;
}

TEST(Instances, keys_states_and_strength_reach_the_subscriber) {
  Client c(test_options());
  auto tag = unique_tag("keyed");
  c.create_tag(tag);
  auto sub = c.subscribe(tag);
  auto pub = c.publisher(tag);
  pub.send("plain");
  pub.send_keyed("robot-7", "pose");
  pub.set_strength(30);
  pub.send_keyed("robot-8", "twist");
  pub.dispose("robot-7");
  pub.unregister("robot-8");

  auto m = sub.receive(1s);
  EXPECT_EQ(m.text(), "plain");
  EXPECT_FALSE(m.instance.key.has_value());
  EXPECT_EQ(m.instance.state, InstanceState::alive);
  EXPECT_FALSE(m.instance.strength.has_value());
  m = sub.receive(1s);
  EXPECT_EQ(m.text(), "pose");
  EXPECT_EQ(m.instance.key, key16("robot-7"));
  EXPECT_FALSE(m.instance.strength.has_value());
  m = sub.receive(1s);
  EXPECT_EQ(m.text(), "twist");
  EXPECT_EQ(m.instance.key, key16("robot-8"));
  EXPECT_EQ(m.instance.strength, 30);
  m = sub.receive(1s);
  EXPECT_TRUE(m.payload.empty());
  EXPECT_EQ(m.instance.key, key16("robot-7"));
  EXPECT_EQ(m.instance.state, InstanceState::disposed);
  std::array<std::byte, 64> buf{};
  auto info = sub.receive_into(buf, 1s);
  EXPECT_EQ(info.len, 0u);
  EXPECT_EQ(info.instance.key, key16("robot-8"));
  EXPECT_EQ(info.instance.state, InstanceState::unregistered);
  EXPECT_EQ(info.instance.strength, 30);
}

TEST(Instances, an_exclusive_subscriber_takes_each_instance_from_its_strongest_publisher) {
  Client c(test_options());
  auto tag = unique_tag("owned");
  c.create_tag(tag);
  auto sub = c.subscribe(tag, SubscribeOptions().exclusive());
  auto weak = c.publisher(tag);
  auto strong = c.publisher(tag);
  weak.set_strength(10);
  strong.set_strength(20);
  weak.send_keyed("a", "weak-1");
  strong.send_keyed("a", "strong-1");
  weak.send_keyed("a", "weak-2");  // not the owner: dropped
  strong.unregister("a");           // the owner gives up
  weak.send_keyed("a", "weak-3");
  EXPECT_EQ(sub.receive(1s).text(), "weak-1");
  EXPECT_EQ(sub.receive(1s).text(), "strong-1");
  EXPECT_EQ(sub.receive(1s).instance.state, InstanceState::unregistered);
  EXPECT_EQ(sub.receive(1s).text(), "weak-3");
  EXPECT_THROW(sub.receive(200ms), tagwire::Timeout);
}

TEST(Instances, a_missed_deadline_is_thrown_and_the_subscription_goes_on) {
  Client c(test_options());
  auto tag = unique_tag("deadline");
  c.create_tag(tag);
  auto sub = c.subscribe(tag, SubscribeOptions().deadline(200ms));
  auto pub = c.publisher(tag);
  pub.send_keyed("quiet", "1");
  EXPECT_EQ(sub.receive(5s).text(), "1");
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(sub.receive(5s), tagwire::DeadlineMissed);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
  pub.send_keyed("quiet", "2");
  EXPECT_EQ(sub.receive(5s).text(), "2");
}

TEST(Instances, a_publisher_is_told_which_instances_it_left_past_its_offered_deadline) {
  Client c(test_options());
  auto tag = unique_tag("offered");
  c.create_tag(tag);
  auto pub = c.publisher(tag);
  EXPECT_TRUE(pub.missed_deadlines().empty());
  pub.offer_deadline(50ms);
  auto t0 = std::chrono::steady_clock::now();
  pub.send_keyed("quiet", "q");
  while (std::chrono::steady_clock::now() - t0 < 180ms) {
    pub.send_keyed("busy", "b");
    std::this_thread::sleep_for(10ms);
  }
  auto missed = pub.missed_deadlines();
  // At most one per whole period gone by (fewer if this thread was held
  // up past a period: the exact count is a Rust unit test's).
  auto periods = (std::chrono::steady_clock::now() - t0) / 50ms;
  EXPECT_GE(missed.size(), 1u);
  EXPECT_LE(missed.size(), static_cast<size_t>(periods));
  for (const auto& k : missed) EXPECT_EQ(k, key16("quiet"));
  pub.offer_deadline(30ms);
  auto t1 = std::chrono::steady_clock::now();
  pub.send("plain");
  std::this_thread::sleep_for(50ms);
  auto plain = pub.missed_deadlines();
  ASSERT_GE(plain.size(), 1u);
  EXPECT_LE(plain.size(), static_cast<size_t>((std::chrono::steady_clock::now() - t1) / 30ms));
  for (const auto& k : plain) EXPECT_FALSE(k.has_value());
}

TEST(Instances, the_c_api_reports_the_key_state_and_strength) {
  Client c(test_options());
  auto tag = unique_tag("ckeyed");
  c.create_tag(tag);
  auto sub = c.subscribe(tag);
  auto pub = c.publisher(tag);
  const std::uint8_t key[] = {1, 2, 3};
  const std::uint8_t data[] = {9};
  ASSERT_EQ(tw_publisher_set_strength(pub.raw(), true, -5), TW_OK);
  std::uint64_t seq = 0;
  ASSERT_EQ(tw_publisher_send_keyed(pub.raw(), key, sizeof key, data, sizeof data, &seq), TW_OK);
  EXPECT_EQ(seq, 1u);
  ASSERT_EQ(tw_publisher_dispose(pub.raw(), key, sizeof key, nullptr), TW_OK);
  EXPECT_EQ(tw_publisher_send_keyed(pub.raw(), nullptr, 4, data, sizeof data, nullptr), TW_ERR_INVALID_ARGUMENT);
  std::uint8_t buf[16];
  tw_message_info info{};
  ASSERT_EQ(tw_subscriber_receive(sub.raw(), buf, sizeof buf, 1'000'000'000, &info), TW_OK);
  EXPECT_TRUE(info.has_key);
  EXPECT_EQ(std::memcmp(info.key, key, sizeof key), 0);
  EXPECT_EQ(info.key[3], 0);
  EXPECT_EQ(info.state, TW_STATE_ALIVE);
  EXPECT_TRUE(info.has_strength);
  EXPECT_EQ(info.strength, -5);
  ASSERT_EQ(tw_subscriber_receive(sub.raw(), buf, sizeof buf, 1'000'000'000, &info), TW_OK);
  EXPECT_EQ(info.state, TW_STATE_DISPOSED);
  EXPECT_EQ(info.len, 0u);
}

}  // namespace

// The offsets the Java binding's layouts use (InstancesTest checks the same
// numbers on its side).
static_assert(sizeof(tw_message_info) == 80);
static_assert(offsetof(tw_message_info, key) == 56);
static_assert(offsetof(tw_message_info, has_key) == 72);
static_assert(offsetof(tw_message_info, state) == 73);
static_assert(offsetof(tw_message_info, has_strength) == 74);
static_assert(offsetof(tw_message_info, strength) == 76);
// The Java binding writes the subscription options at these offsets.
static_assert(offsetof(tw_subscribe_options, priority) == 80);
static_assert(offsetof(tw_subscribe_options, sched) == 84);
static_assert(sizeof(tw_subscribe_options) == 88);
static_assert(offsetof(tw_subscribe_options, exclusive) == 56);
static_assert(offsetof(tw_subscribe_options, deadline_ns) == 64);
static_assert(offsetof(tw_subscribe_options, min_separation_ns) == 72);
