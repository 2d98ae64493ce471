// The C++ side of `tagwire perf rtt --lang cpp` (and of the cross-language
// tests), on the modern API:
//
//   tagwire-lang-cpp pong  --socket S --data D --ack A
//       echo every message on D back on A, until a message "\xffSTOP"
//   tagwire-lang-cpp ping  --socket S --data D --ack A --size N --rounds R [--warmup W]
//       R timed round trips after W untimed ones; prints one JSON line
//       {"lang":"cpp","size":N,"samples_ns":[...]}
//   tagwire-lang-cpp relay --socket S --data D --ack A --count N
//       receive N messages on D, print "pid seq" of each sender, and
//       resend each payload on A (a C++ program in a cross-language chain)
//   tagwire-lang-cpp sub-ints --socket S --data D --count N [--warmup W]
//       a lossless subscriber waiting for N 4-byte little-endian integers
//       0..N-1; prints {"lang":"cpp","first_ns":..,"last_ns":..,"received":N,"lost":0}
//       (CLOCK_MONOTONIC: steady_clock), for `tagwire perf table2`
//   tagwire-lang-cpp pub-ints --socket S --data D --count N [--warmup W]
//       once the tag has a receiver, sends 0..N-1 flat out (long send
//       timeout); prints {"lang":"cpp","start_ns":..,"end_ns":..}
//   With --warmup W, both first send W integers to themselves through a
//   private tag, untimed (as every runner does, for the JIT of the Java one).
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tagwire.hpp"

using namespace std::chrono_literals;

namespace {

const char STOP[] = "\xffSTOP";

struct Args {
  std::map<std::string, std::string> kv;
  std::string get(const std::string& k, const std::string& d = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? d : it->second;
  }
  long num(const std::string& k, long d) const {
    auto it = kv.find(k);
    return it == kv.end() ? d : std::atol(it->second.c_str());
  }
};

tagwire::Client connect(const Args& a) {
  tagwire::ClientOptions o;
  if (!a.get("socket").empty()) o.socket = a.get("socket");
  o.autostart = false;
  o.timeout = 5s;
  return tagwire::Client(o);
}

int pong(const Args& a) {
  auto c = connect(a);
  c.create_tag(a.get("data"));
  c.create_tag(a.get("ack"));
  auto sub = c.subscribe(a.get("data"));
  auto pub = c.publisher(a.get("ack"));
  std::vector<std::byte> buf(1 << 20);
  for (;;) {
    tagwire::MessageInfo i;
    try {
      i = sub.receive_into(buf, 60s);
    } catch (const tagwire::Overflowed&) {
      continue;
    }
    if (i.len == sizeof STOP - 1 && std::memcmp(buf.data(), STOP, i.len) == 0) return 0;
    pub.send(buf.data(), i.len);
  }
}

int ping(const Args& a) {
  auto c = connect(a);
  c.create_tag(a.get("data"));
  c.create_tag(a.get("ack"));
  auto sub = c.subscribe(a.get("ack"), tagwire::SubscribeOptions().depth(256));
  auto pub = c.publisher(a.get("data"));
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (c.senders(a.get("ack")).empty()) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("no pong came up");
    std::this_thread::sleep_for(5ms);
  }
  std::size_t size = static_cast<std::size_t>(a.num("size", 256));
  long rounds = a.num("rounds", 1000), warmup = a.num("warmup", 100);
  std::vector<std::byte> payload(size, std::byte{0x5a}), buf(size + 64);
  std::vector<long long> samples;
  samples.reserve(static_cast<std::size_t>(rounds));
  for (long r = 0; r < warmup + rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    pub.send(payload);
    sub.receive_into(buf, 10s);
    if (r >= warmup)
      samples.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  }
  pub.send(std::string_view(STOP, sizeof STOP - 1));
  std::printf("{\"lang\":\"cpp\",\"size\":%zu,\"samples_ns\":[", size);
  for (std::size_t i = 0; i < samples.size(); ++i) std::printf(i ? ",%lld" : "%lld", samples[i]);
  std::printf("]}\n");
  return 0;
}

int relay(const Args& a) {
  auto c = connect(a);
  c.create_tag(a.get("data"));
  c.create_tag(a.get("ack"));
  auto sub = c.subscribe(a.get("data"), tagwire::SubscribeOptions().lossless());
  auto pub = c.publisher(a.get("ack"));
  std::printf("ready %u\n", c.me().pid);
  std::fflush(stdout);
  for (long n = a.num("count", 1); n > 0; --n) {
    auto m = sub.receive(30s);
    std::printf("%u %llu\n", m.sender.pid, static_cast<unsigned long long>(m.seq));
    std::fflush(stdout);
    pub.send(std::span<const std::byte>(m.payload));
  }
  return 0;
}

std::int64_t now_ns() {
  // libstdc++'s steady_clock is CLOCK_MONOTONIC, the clock the other
  // runners (Java's System.nanoTime, Rust's clock_gettime) read.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void send_int(tagwire::Publisher& pub, std::array<unsigned char, 4>& buf, long n) {
  auto v = static_cast<std::uint32_t>(n);
  for (std::size_t k = 0; k < 4; ++k) buf[k] = static_cast<unsigned char>(v >> (8 * k));
  pub.send(buf.data(), buf.size());
}

// Receives integer n into buf; false (with a message) when it is not.
bool receive_int(tagwire::Subscriber& sub, std::array<std::byte, 64>& buf, long n) {
  auto i = sub.receive_into(buf, 60s);
  std::uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<std::uint32_t>(buf[static_cast<std::size_t>(k)]);
  if (i.len != 4 || v != static_cast<std::uint32_t>(n)) {
    std::fprintf(stderr, "tagwire-lang-cpp: message %ld is %zu bytes, value %u\n", n, i.len, v);
    return false;
  }
  return true;
}

// Sends `n` integers to itself through a private tag, untimed.
bool warm_up(tagwire::Client& c, const std::string& data, long n) {
  if (n <= 0) return true;
  std::string tag = data + "/warmup-" + std::to_string(getpid());
  c.create_tag(tag, tagwire::Domain::local);
  bool ok = true;
  {
    auto sub = c.subscribe(tag, tagwire::SubscribeOptions().lossless());
    auto pub = c.publisher(tag);
    std::array<unsigned char, 4> out{};
    std::array<std::byte, 64> in{};
    for (long i = 0; i < n && ok; ++i) {
      send_int(pub, out, i);
      ok = receive_int(sub, in, i);
    }
  }
  c.destroy_tag(tag);
  return ok;
}

int sub_ints(const Args& a) {
  auto c = connect(a);
  c.create_tag(a.get("data"));
  if (!warm_up(c, a.get("data"), a.num("warmup", 0))) return 1;
  auto sub = c.subscribe(a.get("data"), tagwire::SubscribeOptions().lossless());
  long count = a.num("count", 10000);
  std::array<std::byte, 64> buf{};
  std::int64_t first = 0, last = 0;
  for (long n = 0; n < count; ++n) {
    if (!receive_int(sub, buf, n)) return 1;
    std::int64_t t = now_ns();
    if (n == 0) first = t;
    last = t;
  }
  std::printf("{\"lang\":\"cpp\",\"first_ns\":%lld,\"last_ns\":%lld,\"received\":%ld,\"lost\":%llu}\n",
              static_cast<long long>(first), static_cast<long long>(last), count,
              static_cast<unsigned long long>(sub.lost()));
  return 0;
}

int pub_ints(const Args& a) {
  auto c = connect(a);
  c.create_tag(a.get("data"));
  if (!warm_up(c, a.get("data"), a.num("warmup", 0))) return 1;
  auto pub = c.publisher(a.get("data"));
  pub.set_send_timeout(60s);
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (c.receivers(a.get("data")).empty()) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("no receiver came up");
    std::this_thread::sleep_for(1ms);
  }
  long count = a.num("count", 10000);
  std::array<unsigned char, 4> buf{};
  std::int64_t start = now_ns();
  for (long n = 0; n < count; ++n) send_int(pub, buf, n);
  std::int64_t end = now_ns();
  std::printf("{\"lang\":\"cpp\",\"start_ns\":%lld,\"end_ns\":%lld}\n", static_cast<long long>(start),
              static_cast<long long>(end));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ping|pong|relay|sub-ints|pub-ints --socket S --data D [--ack A --size N --rounds R --warmup W --count N]\n", argv[0]);
    return 2;
  }
  Args a;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k.rfind("--", 0) == 0) a.kv[k.substr(2)] = argv[i + 1];
  }
  std::string role = argv[1];
  try {
    if (role == "ping") return ping(a);
    if (role == "pong") return pong(a);
    if (role == "relay") return relay(a);
    if (role == "sub-ints") return sub_ints(a);
    if (role == "pub-ints") return pub_ints(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tagwire-lang-cpp %s: %s\n", role.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "unknown role %s\n", role.c_str());
  return 2;
}
