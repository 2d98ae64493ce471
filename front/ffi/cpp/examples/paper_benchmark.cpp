// The paper's benchmark (Figures 4-1 and 4-2) on its DistTag_IPC class:
// the sender sends a message on the data tag and waits for the
// acknowledgement(s) on the ack tag, repeats, and divides the elapsed time
// by the number of round trips; each receiver acknowledges every message.
//
//   tagwire-paper-benchmark receiver [TAGS]
//   tagwire-paper-benchmark sender [TAGS] [ROUNDS] [SIZE] [RECEIVERS]
//
// TAGS is a prefix (default /paper): the tags are TAGS/data and TAGS/ack.
// The socket is $TAGWIRE_SOCKET or the per-user default.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tagwire.hpp"

namespace {

int fail(const DistTag_IPC& ipc, const char* what) {
  std::fprintf(stderr, "%s failed: %s\n", what, ipc.Last_Error());
  return 1;
}

int receiver(const std::string& data, const std::string& ack) {
  DistTag_IPC ipc;
  if (ipc.Create_Distribution_Tag(data.c_str(), GLOBAL) < 0) return fail(ipc, "Create_Distribution_Tag");
  if (ipc.Create_Distribution_Tag(ack.c_str(), GLOBAL) < 0) return fail(ipc, "Create_Distribution_Tag");
  if (ipc.Subscribe(data.c_str()) < 0) return fail(ipc, "Subscribe");
  if (ipc.Get_Send_Access(ack.c_str()) < 0) return fail(ipc, "Get_Send_Access");
  std::vector<char> msg(1 << 20);
  for (;;) {
    std::size_t len = msg.size();
    int pid = ipc.Receive_Message(data.c_str(), msg.data(), &len, 60000);
    if (pid == -TW_ERR_OVERFLOWED) continue;
    if (pid < 0) return fail(ipc, "Receive_Message");
    if (len == 4 && std::memcmp(msg.data(), "quit", 4) == 0) return 0;
    if (ipc.Send_Message(ack.c_str(), "ack", 3) < 0) return fail(ipc, "Send_Message");
  }
}

int sender(const std::string& data, const std::string& ack, long rounds, std::size_t size, long receivers) {
  DistTag_IPC ipc;
  if (ipc.Create_Distribution_Tag(data.c_str(), GLOBAL) < 0) return fail(ipc, "Create_Distribution_Tag");
  if (ipc.Create_Distribution_Tag(ack.c_str(), GLOBAL) < 0) return fail(ipc, "Create_Distribution_Tag");
  if (ipc.Get_Send_Access(data.c_str()) < 0) return fail(ipc, "Get_Send_Access");
  if (ipc.Subscribe(ack.c_str()) < 0) return fail(ipc, "Subscribe");
  // Wait until every receiver is there (the paper starts them by hand).
  std::vector<process_t> who;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ipc.Get_Senders_On_Distribution_Tag(ack.c_str(), who) < receivers) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "receivers did not come up\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<char> msg(size, 'x'), buf(64);
  auto start = std::chrono::steady_clock::now();
  for (long r = 0; r < rounds; ++r) {
    if (ipc.Send_Message(data.c_str(), msg.data(), msg.size()) < 0) return fail(ipc, "Send_Message");
    for (long i = 0; i < receivers; ++i) {
      std::size_t len = buf.size();
      if (ipc.Receive_Message(ack.c_str(), buf.data(), &len, 5000) < 0) return fail(ipc, "Receive_Message");
    }
  }
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
              static_cast<double>(rounds > 0 ? rounds : 1);
  std::printf("rounds=%ld size=%zu receivers=%ld round_trip_us=%.2f\n", rounds, size, receivers, us);
  ipc.Send_Message(data.c_str(), "quit", 4);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string role = argc > 1 ? argv[1] : "";
  std::string tags = argc > 2 ? argv[2] : "/paper";
  std::string data = tags + "/data", ack = tags + "/ack";
  if (role == "receiver") return receiver(data, ack);
  if (role == "sender") {
    long rounds = argc > 3 ? std::atol(argv[3]) : 1000;
    std::size_t size = argc > 4 ? static_cast<std::size_t>(std::atol(argv[4])) : 256;
    long receivers = argc > 5 ? std::atol(argv[5]) : 1;
    return sender(data, ack, rounds, size, receivers);
  }
  std::fprintf(stderr, "usage: %s receiver [TAGS] | sender [TAGS] [ROUNDS] [SIZE] [RECEIVERS]\n", argv[0]);
  return 2;
}
