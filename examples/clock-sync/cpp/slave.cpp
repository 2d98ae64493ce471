// A clock slave in C++, the same as the Rust `clock-slave`: asks for the
// time every period on the masters' request tag, corrects its own clock
// (deliberately off by --skew-ms) from the replies, and after --seconds
// prints one `RESULT` line: requests, replies, requests never answered,
// duplicate replies, the longest gap between replies, the largest clock
// error after the first few replies (measurable here: the masters'
// reference is this kernel's clock) and which masters answered.
//
// The handshake variant runs on the paper's DistTag_IPC class; the
// ownership variant needs an exclusive subscription with a deadline, which
// the paper's calls do not have, and runs on the C++ API.
#include <tagwire.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
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
  std::cerr << "usage: tagwire-clock-slave --id N [--variant handshake|ownership] [--period-ms MS] [--heartbeat-ms MS]\n"
               "       [--retry-ms MS] [--skew-ms MS] [--seconds S] [--settled-us US]\n";
  std::exit(2);
}

[[noreturn]] void die(const std::string& what) {
  std::cerr << "clock-slave: " << what << "\n";
  std::exit(1);
}

/// What a slave needs of tagwire: to ask, and to take the next reply.
class Link {
 public:
  virtual ~Link() = default;
  virtual void ask(const Bytes& request) = 0;
  /// A reply's length in `buf`, or nullopt when none came within `wait_ms`
  /// (or the subscription reported a loss, counted in `overflows`).
  virtual std::optional<std::size_t> next(std::uint8_t* buf, std::size_t cap, long wait_ms) = 0;
  std::uint64_t overflows = 0;
};

/// The handshake variant: the paper's calls.
class PaperLink : public Link {
 public:
  explicit PaperLink(const std::string& tag) : tag_(tag) {
    if (ipc_.Create_Distribution_Tag(REQUEST_TAG, GLOBAL) < 0) fail("creating the request tag");
    if (ipc_.Create_Distribution_Tag(tag_.c_str(), GLOBAL) < 0) fail("creating the reply tag");
    if (ipc_.Subscribe(tag_.c_str()) < 0) fail("subscribing to the replies");
    if (ipc_.Get_Send_Access(REQUEST_TAG) < 0) fail("getting send access to the requests");
  }
  void ask(const Bytes& b) override {
    if (ipc_.Send_Message(REQUEST_TAG, b.data(), b.size()) < 0) fail("sending a request");
  }
  std::optional<std::size_t> next(std::uint8_t* buf, std::size_t cap, long wait_ms) override {
    std::size_t len = cap;
    int pid = ipc_.Receive_Message(tag_.c_str(), buf, &len, wait_ms);
    if (pid == -TW_ERR_TIMEOUT) return std::nullopt;
    if (pid == -TW_ERR_OVERFLOWED) {
      // Reported (the paper's call says no more than that it happened).
      ++overflows;
      return std::nullopt;
    }
    if (pid < 0) fail("receiving a reply");
    return len;
  }

 private:
  [[noreturn]] void fail(const char* what) { die(std::string(what) + ": " + ipc_.Last_Error()); }
  DistTag_IPC ipc_;  // $TAGWIRE_SOCKET, else the default socket
  std::string tag_;
};

/// The ownership variant: only the strongest live master's replies
/// (exclusive ownership), failing over when it misses a heartbeat.
class OwnershipLink : public Link {
 public:
  OwnershipLink(const std::string& tag, milliseconds heartbeat)
      : tw_(make(tag)), sub_(tw_.subscribe(tag, tagwire::SubscribeOptions().exclusive().deadline(heartbeat))),
        pub_(tw_.publisher(REQUEST_TAG)) {}
  void ask(const Bytes& b) override { pub_.send(b.data(), b.size()); }
  std::optional<std::size_t> next(std::uint8_t* buf, std::size_t cap, long wait_ms) override {
    try {
      auto info = sub_.receive_into(std::span(reinterpret_cast<std::byte*>(buf), cap), milliseconds(wait_ms));
      return info.len;
    } catch (const tagwire::Timeout&) {
    } catch (const tagwire::DeadlineMissed&) {
      // The owner went quiet: the next strongest takes over.
    } catch (const tagwire::Overflowed& e) {
      overflows += e.lost();
    }
    return std::nullopt;
  }

 private:
  static tagwire::Client make(const std::string& tag) {
    tagwire::Client c;
    c.create_tag(REQUEST_TAG);
    c.create_tag(tag);
    return c;
  }
  tagwire::Client tw_;
  tagwire::Subscriber sub_;
  tagwire::Publisher pub_;
};

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::uint32_t> id;
  bool ownership = false;
  long period_ms = 10, retry_ms = 50, heartbeat_ms = 100;
  double skew_ms = 2500.0, secs = 10.0;
  std::int64_t settled_us = 1000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (a == "--id") id = static_cast<std::uint32_t>(std::stoul(v));
    else if (a == "--variant") {
      if (v != "handshake" && v != "ownership") usage();
      ownership = v == "ownership";
    } else if (a == "--period-ms") period_ms = std::max(1L, std::stol(v));
    else if (a == "--heartbeat-ms") heartbeat_ms = std::max(1L, std::stol(v));
    else if (a == "--retry-ms") retry_ms = std::max(1L, std::stol(v));
    else if (a == "--skew-ms") skew_ms = std::stod(v);
    else if (a == "--seconds") secs = std::stod(v);
    else if (a == "--settled-us") settled_us = std::stoll(v);
    else usage();
  }
  if (!id) usage();
  const auto period = milliseconds(period_ms);
  const auto retry = milliseconds(retry_ms);
  const auto skew = static_cast<std::int64_t>(skew_ms * 1e6);
  // This slave's own clock, off by `skew`.
  auto raw = [&] { return realtime() + skew; };

  const std::string tag = reply_tag(*id);
  std::unique_ptr<Link> link;
  try {
    if (ownership) link = std::make_unique<OwnershipLink>(tag, milliseconds(heartbeat_ms));
    else link = std::make_unique<PaperLink>(tag);
  } catch (const tagwire::Error& e) {
    die(e.what());
  }
  auto ask = [&](std::uint64_t seq, std::int64_t t1) {
    try {
      link->ask(Request{*id, seq, t1}.encode());
    } catch (const tagwire::Error& e) {
      die(std::string("sending a request: ") + e.what());
    }
  };

  Estimator est;
  // Outstanding requests: seq -> (t1, when sent).
  std::map<std::uint64_t, std::pair<std::int64_t, Clock::time_point>> outstanding;
  std::set<std::uint64_t> answered;
  std::uint64_t seq = 0, sent = 0, got = 0, duplicates = 0, resent = 0;
  Clock::duration max_gap{0};
  std::int64_t max_err = 0;
  // The reply at which the estimate settled (its bound within settled_us;
  // max_err counts from there), and the most the error exceeded the
  // estimate's own bound, ns.
  std::uint64_t settled_reply = 0;
  std::int64_t max_excess = 0;
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
    std::optional<std::size_t> len;
    try {
      len = link->next(buf, sizeof buf, wait_ms);
    } catch (const tagwire::Error& e) {
      die(std::string("receiving a reply: ") + e.what());
    }
    if (!len) continue;
    std::int64_t t4 = raw();
    now = Clock::now();
    auto r = Reply::decode(std::span<const std::uint8_t>(buf, *len));
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
    if (auto b = est.best(t4)) {
      // Corrected clock minus the reference at one instant: skew + offset.
      std::int64_t err = std::abs(skew + b->first);
      max_excess = std::max(max_excess, err - b->second);
      if (settled_reply == 0 && b->second <= settled_us * 1000) settled_reply = got;
      if (settled_reply > 0) max_err = std::max(max_err, err);
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
            << " lost=" << link->overflows << " max_gap_us=" << duration_cast<microseconds>(max_gap).count()
            << " max_error_us=" << max_err / 1000
            << " settled_reply=" << settled_reply << " max_excess_us=" << max_excess / 1000 << " offset_ns=" << offset << " bound_ns=" << bound
            << " masters=" << join(by_master, [](auto& o, const auto& kv) { o << kv.first << ":" << kv.second; })
            << " last_second=" << join(last_second, [](auto& o, std::uint32_t m) { o << m; }) << std::endl;
  return 0;
}
