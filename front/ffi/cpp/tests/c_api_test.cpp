// The C ABI itself: handles, statuses, messages, the caller's buffers.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"

namespace {

tw_client* connect_c() {
  tw_client_options o = tw_client_options_default();
  o.socket = daemon_for_tests().socket().c_str();
  o.autostart = false;
  tw_client* c = nullptr;
  EXPECT_EQ(tw_client_connect_with(&o, &c), TW_OK) << tw_last_error();
  return c;
}

TEST(CApi, a_message_goes_round_with_the_senders_pid_and_node) {
  tw_client* c = connect_c();
  std::string tag = unique_tag("c-round");
  bool created = false;
  ASSERT_EQ(tw_create_tag(c, tag.c_str(), TW_DOMAIN_GLOBAL, &created), TW_OK) << tw_last_error();
  EXPECT_TRUE(created);
  ASSERT_EQ(tw_create_tag(c, tag.c_str(), TW_DOMAIN_GLOBAL, &created), TW_OK);
  EXPECT_FALSE(created) << "creating an existing tag is fine, and says so";

  tw_subscriber* s = nullptr;
  ASSERT_EQ(tw_subscribe(c, tag.c_str(), nullptr, &s), TW_OK) << tw_last_error();
  tw_publisher* p = nullptr;
  ASSERT_EQ(tw_publisher_new(c, tag.c_str(), &p), TW_OK) << tw_last_error();

  const char text[] = "hello from C";
  uint64_t seq = 0;
  ASSERT_EQ(tw_publisher_send(p, reinterpret_cast<const uint8_t*>(text), sizeof text, &seq), TW_OK);
  EXPECT_EQ(seq, 1u);
  EXPECT_EQ(tw_publisher_last_seq(p), 1u);

  char buf[64] = {};
  tw_message_info info{};
  ASSERT_EQ(tw_subscriber_receive(s, reinterpret_cast<uint8_t*>(buf), sizeof buf, 1000000000, &info), TW_OK)
      << tw_last_error();
  EXPECT_EQ(info.len, sizeof text);
  EXPECT_STREQ(buf, text);
  EXPECT_EQ(info.seq, 1u);
  EXPECT_EQ(info.sender.pid, static_cast<uint32_t>(getpid()));
  tw_sender me{};
  ASSERT_EQ(tw_client_me(c, &me), TW_OK);
  EXPECT_EQ(std::memcmp(&me.node, &info.sender.node, sizeof me.node), 0);
  EXPECT_GT(info.timestamp_ns, 1'600'000'000'000'000'000ull);
  EXPECT_EQ(tw_subscriber_received(s), 1u);

  tw_publisher_free(p);
  tw_subscriber_free(s);
  tw_client_free(c);
}

TEST(CApi, a_buffer_too_small_reports_the_size_and_keeps_the_message) {
  tw_client* c = connect_c();
  std::string tag = unique_tag("c-small");
  ASSERT_EQ(tw_create_tag(c, tag.c_str(), TW_DOMAIN_LOCAL, nullptr), TW_OK);
  tw_subscriber* s = nullptr;
  ASSERT_EQ(tw_subscribe(c, tag.c_str(), nullptr, &s), TW_OK);
  tw_publisher* p = nullptr;
  ASSERT_EQ(tw_publisher_new(c, tag.c_str(), &p), TW_OK);
  std::vector<uint8_t> big(1000, 7);
  ASSERT_EQ(tw_publisher_send(p, big.data(), big.size(), nullptr), TW_OK);
  ASSERT_EQ(tw_publisher_send(p, big.data(), 3, nullptr), TW_OK);

  uint8_t small[10];
  tw_message_info info{};
  EXPECT_EQ(tw_subscriber_receive(s, small, sizeof small, 1000000000, &info), TW_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(info.len, 1000u);
  EXPECT_NE(std::string(tw_last_error()).find("1000"), std::string::npos) << tw_last_error();
  EXPECT_TRUE(tw_subscriber_available(s));
  std::vector<uint8_t> out(1000);
  ASSERT_EQ(tw_subscriber_receive(s, out.data(), out.size(), 0, &info), TW_OK) << tw_last_error();
  EXPECT_EQ(info.seq, 1u);
  EXPECT_EQ(out, big);
  EXPECT_STREQ(tw_last_error(), "") << "a call that succeeds clears the message";
  ASSERT_EQ(tw_subscriber_receive(s, out.data(), out.size(), 0, &info), TW_OK);
  EXPECT_EQ(info.seq, 2u);
  EXPECT_EQ(info.len, 3u);
  tw_publisher_free(p);
  tw_subscriber_free(s);
  tw_client_free(c);
}

TEST(CApi, bad_arguments_are_errors_not_crashes) {
  tw_client* c = connect_c();
  tw_subscriber* s = nullptr;
  EXPECT_EQ(tw_subscribe(nullptr, "/x", nullptr, &s), TW_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("client is NULL"), std::string::npos) << tw_last_error();
  EXPECT_EQ(tw_subscribe(c, nullptr, nullptr, &s), TW_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tw_subscribe(c, "/x", nullptr, nullptr), TW_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tw_create_tag(c, "/x", 7, nullptr), TW_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("domain 7"), std::string::npos) << tw_last_error();
  const char bad_utf8[] = {'/', 'x', char(0xff), 0};
  EXPECT_EQ(tw_create_tag(c, bad_utf8, TW_DOMAIN_GLOBAL, nullptr), TW_ERR_INVALID_ARGUMENT);
  tw_subscribe_options o = tw_subscribe_options_default();
  o.carrier = 99;
  EXPECT_EQ(tw_subscribe(c, "/x", &o, &s), TW_ERR_INVALID_ARGUMENT);
  o = tw_subscribe_options_default();
  o.proxy = 42;
  EXPECT_EQ(tw_subscribe(c, "/x", &o, &s), TW_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tw_subscribe_options_default().priority, TW_PRIORITY_NORMAL);
  o = tw_subscribe_options_default();
  o.priority = 4;
  EXPECT_EQ(tw_subscribe(c, "/x", &o, &s), TW_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("priority 4"), std::string::npos) << tw_last_error();
  o.priority = TW_PRIORITY_DSCP | 64;
  EXPECT_EQ(tw_subscribe(c, "/x", &o, &s), TW_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tw_subscribe_options_default().sched, TW_SCHED_OTHER);
  for (uint32_t bad : {TW_SCHED_FIFO | 0u, TW_SCHED_RR | 100u, TW_SCHED_OTHER | 20u, 0x300u | 1u, 0x10000u}) {
    o = tw_subscribe_options_default();
    o.sched = bad;
    EXPECT_EQ(tw_subscribe(c, "/x", &o, &s), TW_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(tw_last_error()).find("sched"), std::string::npos) << tw_last_error();
  }
  EXPECT_EQ(tw_set_channel_qos(c, "/x", 0, 4, nullptr), TW_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("priority 4"), std::string::npos) << tw_last_error();
  EXPECT_EQ(tw_set_channel_qos(nullptr, "/x", 0, TW_PRIORITY_HIGH, nullptr), TW_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tw_change_channels(c, "/x", "5@", TW_PRIORITY_HIGH, TW_KEEP, nullptr), TW_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("subscribers"), std::string::npos) << tw_last_error();
  EXPECT_EQ(tw_change_channels(c, "/x", nullptr, 4, TW_KEEP, nullptr), TW_ERR_INVALID_ARGUMENT);
  tw_publish_options po = tw_publish_options_default();
  EXPECT_EQ(po.priority, TW_PRIORITY_NORMAL);
  EXPECT_EQ(po.sched, TW_SCHED_OTHER);
  po.priority = 4;
  tw_publisher* p = nullptr;
  EXPECT_EQ(tw_publisher_new_with(c, "/x", &po, &p), TW_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tw_last_error()).find("priority 4"), std::string::npos) << tw_last_error();
  po = tw_publish_options_default();
  po.sched = TW_SCHED_FIFO | 0u;
  EXPECT_EQ(tw_publisher_new_with(c, "/x", &po, &p), TW_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  tw_history_query q{99, 0, 0};
  tw_message_list* l = nullptr;
  EXPECT_EQ(tw_pull(c, "/x", &q, &l), TW_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tw_publisher_send(nullptr, nullptr, 0, nullptr), TW_ERR_INVALID_ARGUMENT);
  tw_message_info info{};
  EXPECT_EQ(tw_subscriber_receive(nullptr, nullptr, 0, 0, &info), TW_ERR_INVALID_ARGUMENT);
  // Frees and getters accept NULL.
  tw_client_free(nullptr);
  tw_publisher_free(nullptr);
  tw_subscriber_free(nullptr);
  tw_tag_list_free(nullptr);
  EXPECT_EQ(tw_subscriber_lost(nullptr), 0u);
  EXPECT_EQ(tw_tag_list_len(nullptr), 0u);
  tw_client_free(c);
}

TEST(CApi, each_error_kind_has_its_status_and_a_message_saying_what_to_do) {
  tw_client* c = connect_c();
  tw_publisher* p = nullptr;
  EXPECT_EQ(tw_publisher_new(c, "no-slash", &p), TW_ERR_INVALID_NAME);
  EXPECT_EQ(tw_publisher_new(c, unique_tag("never-made").c_str(), &p), TW_ERR_UNKNOWN_TAG);
  EXPECT_NE(std::string(tw_last_error()).find("create it first"), std::string::npos) << tw_last_error();
  EXPECT_STREQ(tw_status_name(TW_ERR_UNKNOWN_TAG), "ERR_UNKNOWN_TAG");
  EXPECT_STREQ(tw_status_name(TW_OK), "OK");

  std::string tag = unique_tag("c-timeout");
  ASSERT_EQ(tw_create_tag(c, tag.c_str(), TW_DOMAIN_LOCAL, nullptr), TW_OK);
  tw_subscriber* s = nullptr;
  ASSERT_EQ(tw_subscribe(c, tag.c_str(), nullptr, &s), TW_OK);
  uint8_t b[8];
  tw_message_info info{};
  EXPECT_EQ(tw_subscriber_receive(s, b, sizeof b, 0, &info), TW_ERR_TIMEOUT);
  EXPECT_EQ(tw_subscriber_receive(s, b, sizeof b, 20'000'000, &info), TW_ERR_TIMEOUT);

  tw_client_options o = tw_client_options_default();
  o.socket = "/nonexistent/tagwire.sock";
  o.autostart = false;
  tw_client* none = nullptr;
  EXPECT_EQ(tw_client_connect_with(&o, &none), TW_ERR_DAEMON_UNREACHABLE);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(tw_last_error()).find("tagwire daemon"), std::string::npos) << tw_last_error();
  tw_subscriber_free(s);
  tw_client_free(c);
}

TEST(CApi, an_overflow_is_reported_with_the_count_lost) {
  tw_client* c = connect_c();
  std::string tag = unique_tag("c-overflow");
  ASSERT_EQ(tw_create_tag(c, tag.c_str(), TW_DOMAIN_LOCAL, nullptr), TW_OK);
  tw_subscribe_options o = tw_subscribe_options_default();
  o.depth = 4;
  tw_subscriber* s = nullptr;
  ASSERT_EQ(tw_subscribe(c, tag.c_str(), &o, &s), TW_OK) << tw_last_error();
  tw_publisher* p = nullptr;
  ASSERT_EQ(tw_publisher_new(c, tag.c_str(), &p), TW_OK);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(tw_publisher_send(p, reinterpret_cast<const uint8_t*>("x"), 1, nullptr), TW_OK);
  uint8_t b[8];
  tw_message_info info{};
  uint64_t lost = 0, got = 0;
  for (;;) {
    tw_status st = tw_subscriber_receive(s, b, sizeof b, 0, &info);
    if (st == TW_ERR_OVERFLOWED) {
      lost += info.lost;
      EXPECT_GT(info.lost, 0u);
    } else if (st == TW_OK) {
      ++got;
    } else {
      EXPECT_EQ(st, TW_ERR_TIMEOUT) << tw_last_error();
      break;
    }
  }
  EXPECT_EQ(lost + got, 20u) << "every message is received or counted as lost";
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(tw_subscriber_lost(s), lost);
  tw_publisher_free(p);
  tw_subscriber_free(s);
  tw_client_free(c);
}

TEST(CApi, node_addresses_print_and_parse) {
  tw_node_addr a{};
  ASSERT_EQ(tw_node_addr_parse("10.0.0.7", &a), TW_OK);
  char buf[64];
  EXPECT_EQ(tw_node_addr_format(&a, buf, sizeof buf), 8u);
  EXPECT_STREQ(buf, "10.0.0.7");
  char tiny[4];
  EXPECT_EQ(tw_node_addr_format(&a, tiny, sizeof tiny), 8u) << "the whole length, so truncation shows";
  EXPECT_STREQ(tiny, "10.");
  ASSERT_EQ(tw_node_addr_parse("fe80::1", &a), TW_OK);
  tw_node_addr_format(&a, buf, sizeof buf);
  EXPECT_STREQ(buf, "fe80::1");
  EXPECT_EQ(tw_node_addr_parse("not an address", &a), TW_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(tw_version(), "");
}

}  // namespace
