// The paper's DistTag_IPC class: its calls and their meanings.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>

#include "common.hpp"

namespace {

TEST(DistTagIpc, the_papers_calls_send_and_receive_with_the_senders_pid_and_node) {
  DistTag_IPC ipc(daemon_for_tests().socket().c_str());
  std::string tag = unique_tag("paper");
  ASSERT_EQ(ipc.Create_Distribution_Tag(tag.c_str(), GLOBAL), 0) << ipc.Last_Error();
  ASSERT_EQ(ipc.Subscribe(tag.c_str()), 0) << ipc.Last_Error();
  EXPECT_EQ(ipc.Send_Message(tag.c_str(), "x", 1), -TW_ERR_NO_SEND_ACCESS) << "sending needs send access";
  ASSERT_EQ(ipc.Get_Send_Access(tag.c_str()), 0) << ipc.Last_Error();
  EXPECT_EQ(ipc.Message_Available(tag.c_str()), 0);
  const char text[] = "status report";
  ASSERT_EQ(ipc.Send_Message(tag.c_str(), text, sizeof text), 0) << ipc.Last_Error();
  EXPECT_EQ(ipc.Message_Available(tag.c_str()), 1);

  char buf[64];
  std::size_t len = sizeof buf;
  node_addr_t from{};
  int pid = ipc.Receive_Message(tag.c_str(), buf, &len, 1000, &from);
  EXPECT_EQ(pid, getpid()) << ipc.Last_Error();
  EXPECT_EQ(len, sizeof text);
  EXPECT_STREQ(buf, text);
  char addr[64];
  tw_node_addr_format(&from, addr, sizeof addr);
  EXPECT_STREQ(addr, "127.0.0.1") << "a daemon without a network stamps the loopback node";

  len = sizeof buf;
  EXPECT_EQ(ipc.Receive_Message(tag.c_str(), buf, &len, 0), -TW_ERR_TIMEOUT);
  EXPECT_EQ(ipc.Receive_Message(tag.c_str(), buf, &len, 20), -TW_ERR_TIMEOUT);

  std::vector<process_t> who;
  EXPECT_EQ(ipc.Get_Senders_On_Distribution_Tag(tag.c_str(), who), 1);
  ASSERT_EQ(who.size(), 1u);
  EXPECT_EQ(who[0].pid, static_cast<std::uint32_t>(getpid()));
  EXPECT_EQ(ipc.Get_Receiver_On_Distribution_Tag(tag.c_str(), who), 1);

  for (int i = 0; i < 5; ++i) ipc.Send_Message(tag.c_str(), "y", 1);
  EXPECT_EQ(ipc.Purge_Messages(tag.c_str()), 5);
  EXPECT_EQ(ipc.Message_Available(tag.c_str()), 0);

  EXPECT_EQ(ipc.Release_Send_Access(tag.c_str()), 0);
  EXPECT_EQ(ipc.Get_Senders_On_Distribution_Tag(tag.c_str(), who), 0) << "the right was given back";
  EXPECT_EQ(ipc.Release_Send_Access(tag.c_str()), -TW_ERR_NO_SEND_ACCESS);
  EXPECT_EQ(ipc.Unsubscribe(tag.c_str()), 0);
  EXPECT_EQ(ipc.Get_Receiver_On_Distribution_Tag(tag.c_str(), who), 0);
  EXPECT_EQ(ipc.Receive_Message(tag.c_str(), buf, &len, 0), -TW_ERR_NOT_SUBSCRIBED);
  EXPECT_EQ(ipc.Destroy_Distribution_Tag(tag.c_str()), 0);
  EXPECT_EQ(ipc.Subscribe(tag.c_str()), -TW_ERR_UNKNOWN_TAG);
  EXPECT_NE(std::string(ipc.Last_Error()).find("unknown tag"), std::string::npos) << ipc.Last_Error();
}

TEST(DistTagIpc, a_message_larger_than_the_buffer_reports_its_length) {
  DistTag_IPC ipc(daemon_for_tests().socket().c_str());
  std::string tag = unique_tag("paper-len");
  ASSERT_EQ(ipc.Create_Distribution_Tag(tag.c_str(), LOCAL), 0);
  ASSERT_EQ(ipc.Subscribe(tag.c_str()), 0);
  ASSERT_EQ(ipc.Get_Send_Access(tag.c_str()), 0);
  std::vector<char> big(500, 'b');
  ASSERT_EQ(ipc.Send_Message(tag.c_str(), big.data(), big.size()), 0);
  char small[10];
  std::size_t len = sizeof small;
  EXPECT_EQ(ipc.Receive_Message(tag.c_str(), small, &len, 1000), -TW_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, 500u);
  std::vector<char> out(len);
  EXPECT_EQ(ipc.Receive_Message(tag.c_str(), out.data(), &len, 0), getpid());
  EXPECT_EQ(out, big);
}

TEST(DistTagIpc, without_a_daemon_every_call_says_so) {
  DistTag_IPC ipc("/nonexistent/tagwire.sock");
  EXPECT_EQ(ipc.Create_Distribution_Tag("/t", GLOBAL), -TW_ERR_DAEMON_UNREACHABLE);
  EXPECT_NE(std::string(ipc.Last_Error()).find("tagwire daemon"), std::string::npos) << ipc.Last_Error();
}

// The paper's benchmark program (Figures 4-1 and 4-2) runs: a receiver and
// a sender process, over this test's daemon.
TEST(DistTagIpc, the_paper_benchmark_example_runs_between_two_processes) {
  std::string sock = daemon_for_tests().socket();
  std::string tags = unique_tag("bench");
  std::string recv = std::string("TAGWIRE_SOCKET='") + sock + "' " TAGWIRE_PAPER_BENCHMARK " receiver '" + tags + "' &";
  ASSERT_EQ(system(recv.c_str()), 0);
  std::string send = std::string("TAGWIRE_SOCKET='") + sock + "' " TAGWIRE_PAPER_BENCHMARK " sender '" + tags + "' 200 256 1";
  FILE* out = popen(send.c_str(), "r");
  ASSERT_NE(out, nullptr);
  char line[256] = {};
  std::string all;
  while (fgets(line, sizeof line, out)) all += line;
  EXPECT_EQ(pclose(out), 0) << all;
  EXPECT_NE(all.find("rounds=200 size=256 receivers=1 round_trip_us="), std::string::npos) << all;
}

}  // namespace
