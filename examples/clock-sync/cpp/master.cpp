// A clock master in C++, the same as the Rust `clock-master`: answers the
// slaves' time requests when the handshake makes it the answering master
// (`--variant handshake`) or always, at a strength of its rank
// (`--variant ownership`). Prints `ROLE active` / `ROLE backup` when its
// role changes and a `STATUS` line every second.
//
// It uses the C++ API rather than the paper's DistTag_IPC (slave.cpp does):
// a master hears requests and heartbeats best-effort and must never wait
// on one slave's reply stream, settings the paper's calls do not have.
#include <tagwire.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <queue>
#include <string>
#include <thread>

#include "clock_sync.hpp"

using namespace clock_sync;
using namespace std::chrono;

namespace {

std::int64_t realtime() {
  return duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
}

struct Event {
  enum { request, masters } kind;
  Bytes payload;
  std::int64_t at;  // uncorrected clock, ns
};

/// What the receiving threads hand the loop.
class Events {
 public:
  void push(Event e) {
    {
      std::lock_guard g(m_);
      q_.push(std::move(e));
    }
    cv_.notify_one();
  }
  std::optional<Event> pop_until(Clock::time_point t) {
    std::unique_lock g(m_);
    cv_.wait_until(g, t, [&] { return !q_.empty(); });
    if (q_.empty()) return std::nullopt;
    Event e = std::move(q_.front());
    q_.pop();
    return e;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::queue<Event> q_;
};

/// Receives for ever on `sub`, stamping arrival; counts what it lost.
void receive_loop(tagwire::Subscriber sub, Events& out, decltype(Event::kind) kind, std::atomic<std::uint64_t>& lost) {
  for (;;) {
    try {
      tagwire::Message m = sub.receive();
      const auto* p = reinterpret_cast<const std::uint8_t*>(m.payload.data());
      out.push(Event{kind, Bytes(p, p + m.payload.size()), realtime()});
    } catch (const tagwire::Overflowed& e) {
      // Reported, not fatal: the subscription stays valid.
      lost += e.lost();
    } catch (const tagwire::Error& e) {
      std::cerr << "clock-master: " << e.what() << "\n";
      std::exit(1);
    }
  }
}

std::int32_t strength(std::uint32_t rank) { return 1000000 - static_cast<std::int32_t>(std::min<std::uint32_t>(rank, 999999)); }

void usage() {
  std::cerr << "usage: tagwire-clock-master --id N --rank R [--variant handshake|ownership] [--heartbeat-ms MS]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::uint32_t> id, rank;
  std::string variant = "handshake";
  long heartbeat_ms = 100;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (a == "--id") id = static_cast<std::uint32_t>(std::stoul(v));
    else if (a == "--rank") rank = static_cast<std::uint32_t>(std::stoul(v));
    else if (a == "--variant") variant = v;
    else if (a == "--heartbeat-ms") heartbeat_ms = std::max(1L, std::stol(v));
    else usage();
  }
  if (!id || !rank || (variant != "handshake" && variant != "ownership")) usage();
  const bool ownership = variant == "ownership";
  const auto heartbeat = milliseconds(heartbeat_ms);

  try {
    tagwire::Client tw;
    tw.create_tag(REQUEST_TAG);
    tw.create_tag(MASTERS_TAG);
    // Best effort, both: a master cut off from the others must not stall
    // the slaves' requests or the other masters' heartbeats (a reliable
    // subscriber holds its publishers back while it is unreachable).
    auto opts = tagwire::SubscribeOptions().best_effort();
    Events events;
    std::atomic<std::uint64_t> lost_requests{0}, lost_masters{0};
    std::thread(receive_loop, tw.subscribe(REQUEST_TAG, opts), std::ref(events), Event::request,
                std::ref(lost_requests))
        .detach();
    std::thread(receive_loop, tw.subscribe(MASTERS_TAG, opts), std::ref(events), Event::masters,
                std::ref(lost_masters))
        .detach();
    tagwire::Publisher say = tw.publisher(MASTERS_TAG);
    std::map<std::uint32_t, tagwire::Publisher> repliers;
    // This master's clock: the kernel's, corrected by its estimate of the
    // answering master's (while it does not answer itself).
    MasterClock clk;
    auto clock = [&] { return clk.read(realtime()); };
    auto send = [](tagwire::Publisher& p, const Bytes& b) { p.send(b.data(), b.size()); };

    const auto start = Clock::now();
    Master m(*id, *rank, Config::with_heartbeat(heartbeat), start);
    auto next_status = start + seconds(1);
    auto next_sync = start;
    std::uint64_t full = 0;  // replies dropped: their slave's stream was full
    std::cout << "ROLE backup" << std::endl;
    for (;;) {
      auto wake = std::min({m.poll_timeout(Clock::now()), next_status, next_sync});
      std::optional<Event> ev = events.pop_until(wake);
      auto now = Clock::now();
      std::vector<Action> actions;
      if (ev && ev->kind == Event::request) {
        if (auto req = Request::decode(ev->payload)) {
          // The reply publisher is made when a slave first asks, whatever
          // the role: a new right is a table change, slow at the very
          // moment of a fail-over.
          if (!repliers.count(req->slave)) {
            std::string tag = reply_tag(req->slave);
            tw.create_tag(tag);
            tagwire::Publisher p = tw.publisher(tag);
            // A reply never waits on one slave's full stream: dropped and
            // counted (`full=`); the slave asks again.
            p.set_send_timeout(nanoseconds(0));
            if (ownership) p.set_strength(strength(*rank));
            repliers.emplace(req->slave, std::move(p));
          }
          // Arrival on the kernel's clock: put on this master's at sending,
          // with t3, so that one exchange never mixes two corrections (a
          // backup's pending requests are answered after its clock became
          // the reference).
          std::int64_t t2 = ev->at;
          // Every master whose clock is trusted answers; the slaves'
          // ownership picks.
          if (ownership) {
            if (clk.trusted(ev->at)) actions.push_back(Answer{Reply{req->slave, req->seq, req->t1, t2, t2, *id}});
          } else if (auto r = m.on_request(*req, t2)) {
            actions.push_back(Answer{*r});
          }
        }
      } else if (ev) {
        if (auto msg = decode_master_msg(ev->payload)) {
          if (std::holds_alternative<Heartbeat>(*msg)) {
            for (auto& a : m.on_heartbeat(*msg, now)) actions.push_back(std::move(a));
          } else if (auto* q = std::get_if<SyncRequest>(&*msg); q && m.is_active() && q->from != *id) {
            send(say, encode(SyncReply{q->from, q->t1, clk.read(ev->at), clock()}));
          } else if (auto* r = std::get_if<SyncReply>(&*msg); r && r->to == *id) {
            clk.on_sync_reply(r->t1, r->t2, r->t3, ev->at);
          }
        }
      }
      for (auto& a : m.tick(now, realtime())) actions.push_back(std::move(a));
      for (auto& a : actions) {
        if (auto* s = std::get_if<Say>(&a)) {
          send(say, encode(s->msg));
        } else if (auto* r = std::get_if<Answer>(&a)) {
          Reply reply = r->reply;
          reply.t2 = clk.read(reply.t2);
          reply.t3 = clock();
          auto it = repliers.find(reply.slave);
          if (it == repliers.end()) continue;
          try {
            send(it->second, reply.encode());
          } catch (const tagwire::WindowFull&) {
            ++full;
          }
        } else if (auto* role = std::get_if<Role>(&a)) {
          std::cout << (role->active ? "ROLE active" : "ROLE backup") << std::endl;
          if (role->active) clk.become_reference();
        }
      }
      if (!m.is_active()) {
        if (auto a = m.active_master(now)) clk.follow(*a);
      }
      if (now >= next_sync) {
        next_sync = now + heartbeat;
        if (!m.is_active() && m.active_master(now)) send(say, encode(SyncRequest{*id, realtime()}));
      }
      if (now >= next_status) {
        next_status = now + seconds(1);
        auto [offset, bound] = clk.estimate(realtime()).value_or(std::pair<std::int64_t, std::int64_t>{0, 0});
        auto answering = m.active_master(now);
        std::cout << "STATUS id=" << *id << " active=" << (m.is_active() ? "true" : "false")
                  << " answering=" << (answering ? std::to_string(*answering) : "none") << " pending=" << m.pending()
                  << " dropped=" << m.dropped() << " full=" << full << " offset_ns=" << offset << " bound_ns=" << bound
                  << " lost_requests=" << lost_requests << " lost_masters=" << lost_masters << std::endl;
      }
    }
  } catch (const tagwire::Error& e) {
    std::cerr << "clock-master: " << e.what() << std::endl;
    // (Not a return: the receiving threads still use what main holds.)
    std::_Exit(1);
  }
}
