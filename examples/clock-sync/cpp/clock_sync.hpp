// The clock-synchronisation example's protocol in C++: the same messages,
// byte for byte, and the same master handshake as the Rust crate's
// src/lib.rs, so C++ and Rust masters and slaves work together. Pure: time
// and messages in, what to send out; the programs (master.cpp, slave.cpp)
// do the I/O. The README says how it works.
#ifndef TAGWIRE_CLOCK_SYNC_HPP
#define TAGWIRE_CLOCK_SYNC_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace clock_sync {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<std::uint8_t>;

/// Where slaves ask for the time.
inline constexpr const char* REQUEST_TAG = "/clock/master-request";
/// The masters' own tag: heartbeats and their clock comparisons.
inline constexpr const char* MASTERS_TAG = "/clock/masters";
/// The tag on which slave `slave` gets its replies.
inline std::string reply_tag(std::uint32_t slave) { return "/clock/reply/" + std::to_string(slave); }

/// Most slaves a heartbeat lists.
inline constexpr std::size_t MAX_LISTED = 1024;

enum Kind : std::uint8_t { REQUEST = 1, REPLY = 2, HEARTBEAT = 3, SYNC_REQUEST = 4, SYNC_REPLY = 5 };

/// Little-endian fields onto a byte vector.
class Writer {
 public:
  explicit Writer(Kind k) { b_.push_back(k); }
  template <class T>
  Writer& put(T v) {
    static_assert(std::is_integral_v<T>);
    for (std::size_t i = 0; i < sizeof(T); ++i) b_.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(v) >> (8 * i)));
    return *this;
  }
  Bytes take() { return std::move(b_); }

 private:
  Bytes b_;
};

/// Little-endian fields off a byte span; every read fails once it runs out.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> b) : b_(b) {}
  template <class T>
  std::optional<T> get() {
    static_assert(std::is_integral_v<T>);
    if (b_.size() < sizeof(T)) return std::nullopt;
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(b_[i]) << (8 * i);
    b_ = b_.subspan(sizeof(T));
    return static_cast<T>(v);
  }
  bool done() const { return b_.empty(); }

 private:
  std::span<const std::uint8_t> b_;
};

/// A slave's request: t1 is the slave's clock when it sent it (ns).
struct Request {
  std::uint32_t slave = 0;
  std::uint64_t seq = 0;
  std::int64_t t1 = 0;

  Bytes encode() const { return Writer(REQUEST).put(slave).put(seq).put(t1).take(); }
  static std::optional<Request> decode(std::span<const std::uint8_t> b) {
    Reader r(b);
    if (r.get<std::uint8_t>() != REQUEST) return std::nullopt;
    auto slave = r.get<std::uint32_t>();
    auto seq = r.get<std::uint64_t>();
    auto t1 = r.get<std::int64_t>();
    if (!slave || !seq || !t1 || !r.done()) return std::nullopt;
    return Request{*slave, *seq, *t1};
  }
  bool operator==(const Request&) const = default;
};

/// A master's answer: the request's t1 echoed, t2 when it arrived, t3 when
/// the answer left (the master's clock, ns), and who answered.
struct Reply {
  std::uint32_t slave = 0;
  std::uint64_t seq = 0;
  std::int64_t t1 = 0, t2 = 0, t3 = 0;
  std::uint32_t master = 0;

  Bytes encode() const { return Writer(REPLY).put(slave).put(seq).put(t1).put(t2).put(t3).put(master).take(); }
  static std::optional<Reply> decode(std::span<const std::uint8_t> b) {
    Reader r(b);
    if (r.get<std::uint8_t>() != REPLY) return std::nullopt;
    auto slave = r.get<std::uint32_t>();
    auto seq = r.get<std::uint64_t>();
    auto t1 = r.get<std::int64_t>();
    auto t2 = r.get<std::int64_t>();
    auto t3 = r.get<std::int64_t>();
    auto master = r.get<std::uint32_t>();
    if (!master || !t3 || !t2 || !t1 || !seq || !slave || !r.done()) return std::nullopt;
    return Reply{*slave, *seq, *t1, *t2, *t3, *master};
  }
  bool operator==(const Reply&) const = default;
};

/// Alive; whether the sender answers; the newest request of each slave it
/// answered (an answering master's only).
struct Heartbeat {
  std::uint32_t master = 0;
  std::uint32_t rank = 0;
  bool active = false;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> answered;
  bool operator==(const Heartbeat&) const = default;
};
/// A master asks the answering one for the time.
struct SyncRequest {
  std::uint32_t from = 0;
  std::int64_t t1 = 0;
  bool operator==(const SyncRequest&) const = default;
};
/// The answering master's reply to a SyncRequest.
struct SyncReply {
  std::uint32_t to = 0;
  std::int64_t t1 = 0, t2 = 0, t3 = 0;
  bool operator==(const SyncReply&) const = default;
};
/// What masters say to each other on MASTERS_TAG.
using MasterMsg = std::variant<Heartbeat, SyncRequest, SyncReply>;

inline Bytes encode(const MasterMsg& m) {
  if (auto* h = std::get_if<Heartbeat>(&m)) {
    std::size_t n = std::min(h->answered.size(), MAX_LISTED);
    Writer w(HEARTBEAT);
    w.put(h->master).put(h->rank).put(static_cast<std::uint8_t>(h->active)).put(static_cast<std::uint32_t>(n));
    for (std::size_t i = 0; i < n; ++i) w.put(h->answered[i].first).put(h->answered[i].second);
    return w.take();
  }
  if (auto* s = std::get_if<SyncRequest>(&m)) return Writer(SYNC_REQUEST).put(s->from).put(s->t1).take();
  const auto& s = std::get<SyncReply>(m);
  return Writer(SYNC_REPLY).put(s.to).put(s.t1).put(s.t2).put(s.t3).take();
}

/// A masters' message from its bytes; nullopt for anything malformed.
inline std::optional<MasterMsg> decode_master_msg(std::span<const std::uint8_t> b) {
  Reader r(b);
  auto kind = r.get<std::uint8_t>();
  if (kind == HEARTBEAT) {
    Heartbeat h;
    auto master = r.get<std::uint32_t>();
    auto rank = r.get<std::uint32_t>();
    auto active = r.get<std::uint8_t>();
    auto n = r.get<std::uint32_t>();
    if (!master || !rank || !active || *active > 1 || !n || *n > MAX_LISTED) return std::nullopt;
    h.master = *master;
    h.rank = *rank;
    h.active = *active == 1;
    for (std::uint32_t i = 0; i < *n; ++i) {
      auto slave = r.get<std::uint32_t>();
      auto seq = r.get<std::uint64_t>();
      if (!slave || !seq) return std::nullopt;
      h.answered.emplace_back(*slave, *seq);
    }
    if (!r.done()) return std::nullopt;
    return h;
  }
  if (kind == SYNC_REQUEST) {
    auto from = r.get<std::uint32_t>();
    auto t1 = r.get<std::int64_t>();
    if (!from || !t1 || !r.done()) return std::nullopt;
    return SyncRequest{*from, *t1};
  }
  if (kind == SYNC_REPLY) {
    auto to = r.get<std::uint32_t>();
    auto t1 = r.get<std::int64_t>();
    auto t2 = r.get<std::int64_t>();
    auto t3 = r.get<std::int64_t>();
    if (!to || !t1 || !t2 || !t3 || !r.done()) return std::nullopt;
    return SyncReply{*to, *t1, *t2, *t3};
  }
  return std::nullopt;
}

/// The offset of a remote clock from ours, from exchanges of four
/// timestamps (sent t1, received there t2, answered there t3, received
/// back t4): each gives ((t2 - t1) + (t3 - t4)) / 2, wrong by at most half
/// its round trip plus DRIFT_PPM of its age. The estimate is the sample of
/// least such bound; a full window drops its sample of worst bound.
class Estimator {
 public:
  static constexpr std::size_t WINDOW = 1024;
  static constexpr std::int64_t DRIFT_PPM = 50;

  /// Adds an exchange; returns its (offset, round trip), ns.
  std::pair<std::int64_t, std::int64_t> sample(std::int64_t t1, std::int64_t t2, std::int64_t t3, std::int64_t t4) {
    std::int64_t offset = ((t2 - t1) + (t3 - t4)) / 2;
    std::int64_t delay = std::max<std::int64_t>((t4 - t1) - (t3 - t2), 0);
    if (samples_.size() == WINDOW) {
      auto worst = std::max_element(samples_.begin(), samples_.end(), [&](const Sample& a, const Sample& b) {
        return bound(a, t4) < bound(b, t4);
      });
      samples_.erase(worst);
    }
    samples_.push_back({offset, delay, t4});
    return {offset, delay};
  }

  /// The least bound the samples put at `now` on the error of `offset`:
  /// each sample's bound plus its distance from `offset`.
  std::optional<std::int64_t> bound_of(std::int64_t offset, std::int64_t now) const {
    std::optional<std::int64_t> out;
    for (const auto& s : samples_) {
      std::int64_t b = std::abs(offset - s.offset) + bound(s, now);
      if (!out || b < *out) out = b;
    }
    return out;
  }

  /// The estimate at `now` (our clock, ns): (offset, bound on its error).
  std::optional<std::pair<std::int64_t, std::int64_t>> best(std::int64_t now) const {
    std::optional<std::pair<std::int64_t, std::int64_t>> out;
    for (const auto& s : samples_) {
      std::int64_t b = bound(s, now);
      if (!out || b < out->second) out = std::pair{s.offset, b};
    }
    return out;
  }

 private:
  struct Sample {
    std::int64_t offset, delay, at;
  };
  static std::int64_t bound(const Sample& s, std::int64_t now) {
    std::int64_t age = std::max<std::int64_t>(now - s.at, 0);
    return s.delay / 2 + age / 1000000 * DRIFT_PPM;
  }
  std::deque<Sample> samples_;
};

/// A master's clock: the kernel's, corrected by its estimate of the
/// reference, the answering master's clock. The answering master is the
/// reference itself (correction 0); a master that does not answer follows
/// it, and is trusted to time slaves while exchanges with the current
/// reference put it within TRUSTED_BOUND_NS of it (the Rust MasterClock).
class MasterClock {
 public:
  static constexpr std::int64_t TRUSTED_BOUND_NS = 500000;

  /// Reads the kernel's clock `raw` (ns) as this master's.
  std::int64_t read(std::int64_t raw) const { return raw + correction_; }

  /// This master answers now: its clock becomes the reference.
  void become_reference() {
    *this = MasterClock();
    reference_ = true;
  }

  /// This master does not answer; `id` does. Trust waits for an exchange
  /// with `id` when it is a new reference.
  void follow(std::uint32_t id) {
    reference_ = false;
    if (following_ != id) {
      following_ = id;
      current_ = Estimator();
    }
  }

  /// An exchange with the reference, t1 and t4 on the kernel's clock.
  void on_sync_reply(std::int64_t t1, std::int64_t t2, std::int64_t t3, std::int64_t t4) {
    sync_.sample(t1, t2, t3, t4);
    current_.sample(t1, t2, t3, t4);
    if (auto b = sync_.best(t4)) correction_ = b->first;
  }

  /// (correction, bound from the exchanges with the current reference) at
  /// the kernel's `now`; (0, 0) for the reference.
  std::optional<std::pair<std::int64_t, std::int64_t>> estimate(std::int64_t now) const {
    if (reference_) return std::pair<std::int64_t, std::int64_t>{0, 0};
    auto b = current_.bound_of(correction_, now);
    if (!b) return std::nullopt;
    return std::pair{correction_, *b};
  }

  /// Whether this clock may time slaves at the kernel's `now`.
  bool trusted(std::int64_t now) const {
    auto e = estimate(now);
    return e && e->second <= TRUSTED_BOUND_NS;
  }

 private:
  Estimator sync_;     // every exchange since this master was the reference
  Estimator current_;  // the exchanges with the current reference
  std::int64_t correction_ = 0;
  std::optional<std::uint32_t> following_;
  bool reference_ = false;
};

/// Timing of the handshake.
struct Config {
  Clock::duration heartbeat;
  /// A master silent this long is gone (1.5 heartbeats).
  Clock::duration fail_after;
  /// A starting master listens this long before it may answer.
  Clock::duration settle;
  /// Most outstanding requests a master keeps (the oldest go first).
  std::size_t max_pending = 4096;

  static Config with_heartbeat(Clock::duration hb) { return Config{hb, hb * 3 / 2, hb * 2, 4096}; }
};

/// What a Master asks its program to do: publish on MASTERS_TAG, reply to
/// a slave (t3 set at sending), or say that its role changed.
struct Say {
  MasterMsg msg;
};
struct Answer {
  Reply reply;
};
struct Role {
  bool active;
};
using Action = std::variant<Say, Answer, Role>;

/// One master's side of the handshake: the live master of best rank
/// answers; the others keep what it has not reported answered and take
/// over, answering all of it, when its heartbeats stop.
class Master {
 public:
  Master(std::uint32_t id, std::uint32_t rank, Config cfg, Clock::time_point now)
      : id_(id), rank_(rank), cfg_(cfg), started_(now), next_heartbeat_(now) {}

  bool is_active() const { return active_; }
  std::size_t pending() const { return pending_.size(); }
  /// Outstanding requests dropped because max_pending was reached.
  std::uint64_t dropped() const { return dropped_; }

  /// The answering master as this one hears it (itself included).
  std::optional<std::uint32_t> active_master(Clock::time_point now) const {
    if (active_) return id_;
    std::optional<std::pair<std::uint32_t, std::uint32_t>> best;  // (rank, id)
    for (const auto& [id, p] : peers_) {
      if (live(p, now) && p.active && (!best || p.rank < best->first)) best = std::pair{p.rank, id};
    }
    if (!best) return std::nullopt;
    return best->second;
  }

  /// A request arrived at `clock` (ns; the programs give the kernel's clock
  /// and put t2 and t3 on the master's at sending, so that one exchange
  /// never mixes two corrections): the reply if
  /// this master answers (every request it hears: a slave asks again when
  /// no answer came, and drops one it has), else kept.
  std::optional<Reply> on_request(const Request& req, std::int64_t clock) {
    auto& known = answered_[req.slave];
    if (active_) {
      known = std::max(known, req.seq);
      return Reply{req.slave, req.seq, req.t1, clock, clock, id_};
    }
    if (known >= req.seq) return std::nullopt;
    if (pending_.size() >= cfg_.max_pending) {
      pending_.erase(pending_.begin());
      ++dropped_;
    }
    pending_[{req.slave, req.seq}] = {req, clock};
    return std::nullopt;
  }

  /// A message on MASTERS_TAG arrived at `now`: a role change to make at once.
  std::vector<Action> on_heartbeat(const MasterMsg& msg, Clock::time_point now) {
    const auto* h = std::get_if<Heartbeat>(&msg);
    if (!h || h->master == id_) return {};
    peers_[h->master] = Peer{h->rank, h->active, now};
    for (auto [slave, seq] : h->answered) {
      auto& known = answered_[slave];
      known = std::max(known, seq);
    }
    std::erase_if(pending_, [&](const auto& kv) {
      auto it = answered_.find(kv.first.first);
      return it != answered_.end() && kv.first.second <= it->second;
    });
    // Two answer: the worse-ranked stops (ties: the higher id).
    if (active_ && h->active && std::pair{h->rank, h->master} < std::pair{rank_, id_}) {
      active_ = false;
      return {Role{false}};
    }
    return {};
  }

  /// Time passes: heartbeats due, and a take-over when the answering master
  /// went quiet (answering everything kept, oldest first, with the time
  /// each arrived; `clock`, on the clock of on_request, is their t3).
  std::vector<Action> tick(Clock::time_point now, std::int64_t clock) {
    std::vector<Action> out;
    if (!active_ && may_take_over(now)) {
      active_ = true;
      out.push_back(Role{true});
      for (const auto& [key, kept] : pending_) {
        const auto& [req, t2] = kept;
        auto& known = answered_[req.slave];
        known = std::max(known, req.seq);
        out.push_back(Answer{Reply{req.slave, req.seq, req.t1, t2, clock, id_}});
      }
      pending_.clear();
    }
    if (now >= next_heartbeat_) {
      while (next_heartbeat_ <= now) next_heartbeat_ += cfg_.heartbeat;
      Heartbeat h{id_, rank_, active_, {}};
      if (active_) {
        for (auto [slave, seq] : answered_) {
          if (seq > 0) h.answered.emplace_back(slave, seq);
        }
        std::sort(h.answered.begin(), h.answered.end());
      }
      out.push_back(Say{std::move(h)});
    }
    return out;
  }

  /// When tick next has something to do (after `now`).
  Clock::time_point poll_timeout(Clock::time_point now) const {
    Clock::time_point t = next_heartbeat_;
    if (!active_) {
      auto consider = [&](Clock::time_point e) {
        if (e > now) t = std::min(t, e);
      };
      consider(started_ + cfg_.settle);
      for (const auto& [id, p] : peers_) consider(p.last + cfg_.fail_after);
    }
    return t;
  }

 private:
  struct Peer {
    std::uint32_t rank;
    bool active;
    Clock::time_point last;
  };
  bool live(const Peer& p, Clock::time_point now) const { return now - p.last < cfg_.fail_after; }
  bool may_take_over(Clock::time_point now) const {
    if (now - started_ < cfg_.settle) return false;
    for (const auto& [id, p] : peers_) {
      if (live(p, now) && (p.active || std::pair{p.rank, id} < std::pair{rank_, id_})) return false;
    }
    return true;
  }

  std::uint32_t id_, rank_;
  Config cfg_;
  Clock::time_point started_;
  bool active_ = false;
  std::unordered_map<std::uint32_t, Peer> peers_;
  /// Requests heard and not known answered, with their arrival time on this
  /// master's clock, by (slave, seq).
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::pair<Request, std::int64_t>> pending_;
  /// Per slave, the newest request known answered (by anyone).
  std::unordered_map<std::uint32_t, std::uint64_t> answered_;
  Clock::time_point next_heartbeat_;
  std::uint64_t dropped_ = 0;
};

}  // namespace clock_sync

#endif  // TAGWIRE_CLOCK_SYNC_HPP
