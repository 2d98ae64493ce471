// A clock slave in C++ on the paper's DistTag_IPC class, the same as the
// Rust `clock-slave` in its handshake variant: asks for the time every
// period on the masters' request tag, corrects its own clock (deliberately
// off by --skew-ms) from the replies, and after --seconds prints one
// `RESULT` line: requests, replies, requests never answered, duplicate
// replies, the longest gap between replies, the largest clock error after
// the first few replies (measurable here: the masters' reference is this
// kernel's clock) and which masters answered.
#include <tagwire.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "clock_sync.hpp"

using namespace clock_sync;
using namespace std::chrono;

namespace {

std::int64_t realtime() {
  return duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
}

[[noreturn]] void usage() {
  std::cerr << "usage: tagwire-clock-slave --id N [--variant handshake] [--period-ms MS] [--heartbeat-ms MS]\n"
               "       [--retry-ms MS] [--skew-ms MS] [--seconds S] [--settle-replies N]\n";
  std::exit(2);
}

[[noreturn]] void die(const char* what, DistTag_IPC& ipc) {
  std::cerr << "clock-slave: " << what << ": " << ipc.Last_Error() << "\n";
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::uint32_t> id;
  long period_ms = 10, retry_ms = 50;
  double skew_ms = 2500.0, secs = 10.0;
  std::uint64_t settle_replies = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (a == "--id") id = static_cast<std::uint32_t>(std::stoul(v));
    else if (a == "--variant") {
      // Exclusive ownership needs subscription options the paper's calls
      // do not have: that variant is the Rust slave's.
      if (v != "handshake") {
        std::cerr << "clock-slave: the C++ slave runs the handshake variant only, not " << v << "\n";
        return 2;
      }
    } else if (a == "--period-ms") period_ms = std::max(1L, std::stol(v));
    else if (a == "--heartbeat-ms") (void)std::stol(v);  // (the ownership variant's deadline)
    else if (a == "--retry-ms") retry_ms = std::max(1L, std::stol(v));
    else if (a == "--skew-ms") skew_ms = std::stod(v);
    else if (a == "--seconds") secs = std::stod(v);
    else if (a == "--settle-replies") settle_replies = std::stoull(v);
    else usage();
  }
  if (!id) usage();
  const auto period = milliseconds(period_ms);
  const auto retry = milliseconds(retry_ms);
  const auto skew = static_cast<std::int64_t>(skew_ms * 1e6);
  // This slave's own clock, off by `skew`.
  auto raw = [&] { return realtime() + skew; };

  DistTag_IPC ipc;  // $TAGWIRE_SOCKET, else the default socket
  const std::string tag = reply_tag(*id);
  if (ipc.Create_Distribution_Tag(REQUEST_TAG, GLOBAL) < 0) die("creating the request tag", ipc);
  if (ipc.Create_Distribution_Tag(tag.c_str(), GLOBAL) < 0) die("creating the reply tag", ipc);
  if (ipc.Subscribe(tag.c_str()) < 0) die("subscribing to the replies", ipc);
  if (ipc.Get_Send_Access(REQUEST_TAG) < 0) die("getting send access to the requests", ipc);
  auto ask = [&](std::uint64_t seq, std::int64_t t1) {
    Bytes b = Request{*id, seq, t1}.encode();
    if (ipc.Send_Message(REQUEST_TAG, b.data(), b.size()) < 0) die("sending a request", ipc);
  };

  Estimator est;
  // Outstanding requests: seq -> (t1, when sent).
  std::map<std::uint64_t, std::pair<std::int64_t, Clock::time_point>> outstanding;
  std::set<std::uint64_t> answered;
  std::uint64_t seq = 0, sent = 0, got = 0, duplicates = 0, resent = 0, overflows = 0;
  Clock::duration max_gap{0};
  std::int64_t max_err = 0;
  std::optional<Clock::time_point> last_reply;
  std::map<std::uint32_t, std::uint64_t> by_master;
  std::vector<std::pair<Clock::time_point, std::uint32_t>> recent;
  const auto start = Clock::now();
  const auto sending_until = start + duration_cast<Clock::duration>(duration<double>(secs));
  const auto end = sending_until + seconds(1);
  auto next_send = start;
  std::uint8_t buf[256];
  for (;;) {
    auto now = Clock::now();
    if (now >= end) break;
    if (now >= next_send && now < sending_until) {
      ++seq;
      std::int64_t t1 = raw();
      ask(seq, t1);
      outstanding[seq] = {t1, now};
      ++sent;
      next_send += period;
      // A request lost on the way is asked again, with a new t1.
      for (auto& [s, o] : outstanding) {
        if (now - o.second >= retry) {
          o = {raw(), now};
          ask(s, o.first);
          ++resent;
        }
      }
    }
    auto wait = now < sending_until ? next_send - now : end - now;
    long wait_ms = std::max<long>(1, static_cast<long>(ceil<milliseconds>(wait).count()));
    std::size_t len = sizeof buf;
    int pid = ipc.Receive_Message(tag.c_str(), buf, &len, wait_ms);
    if (pid == -TW_ERR_TIMEOUT) continue;
    if (pid == -TW_ERR_OVERFLOWED) {
      // Reported (the paper's call says no more than that it happened).
      ++overflows;
      continue;
    }
    if (pid < 0) die("receiving a reply", ipc);
    std::int64_t t4 = raw();
    now = Clock::now();
    auto r = Reply::decode(std::span<const std::uint8_t>(buf, len));
    if (!r || r->slave != *id) continue;
    auto it = outstanding.find(r->seq);
    if (it == outstanding.end()) {
      if (answered.count(r->seq)) ++duplicates;
      continue;
    }
    outstanding.erase(it);
    // (The reply echoes the t1 of the send it answers.)
    est.sample(r->t1, r->t2, r->t3, t4);
    answered.insert(r->seq);
    ++got;
    ++by_master[r->master];
    if (now < sending_until) {
      recent.emplace_back(now, r->master);
      if (last_reply) max_gap = std::max(max_gap, now - *last_reply);
      last_reply = now;
    }
    if (got > settle_replies) {
      if (auto b = est.best(t4)) {
        // Corrected clock minus the reference at one instant: skew + offset.
        max_err = std::max(max_err, std::abs(skew + b->first));
      }
    }
  }
  std::set<std::uint32_t> last_second;
  for (auto [t, m] : recent) {
    if (t + seconds(1) >= sending_until) last_second.insert(m);
  }
  auto join = [](const auto& items, auto fmt) {
    std::ostringstream o;
    bool first = true;
    for (const auto& x : items) {
      if (!first) o << ",";
      first = false;
      fmt(o, x);
    }
    return o.str();
  };
  auto [offset, bound] = est.best(raw()).value_or(std::pair<std::int64_t, std::int64_t>{0, 0});
  std::cout << "RESULT slave=" << *id << " requests=" << sent << " replies=" << got
            << " unanswered=" << outstanding.size() << " duplicates=" << duplicates << " resent=" << resent
            << " lost=" << overflows << " max_gap_us=" << duration_cast<microseconds>(max_gap).count()
            << " max_error_us=" << max_err / 1000 << " offset_ns=" << offset << " bound_ns=" << bound
            << " masters=" << join(by_master, [](auto& o, const auto& kv) { o << kv.first << ":" << kv.second; })
            << " last_second=" << join(last_second, [](auto& o, std::uint32_t m) { o << m; }) << std::endl;
  return 0;
}
