// tagwire.hpp: the C++ API of tagwire, header-only over the C ABI (tagwire.h).
//
// Two APIs side by side:
//   - tagwire::Client, Publisher, Subscriber, Message: RAII handles,
//     std::chrono timeouts, std::span payloads, one exception class per
//     error kind (all derived from tagwire::Error, which carries the kind);
//   - DistTag_IPC: the class of the real-time publisher/subscriber paper
//     (Rajkumar, Gagliardi, Sha, Figure 2-1), with its calls and meanings:
//     integer results, negative on error, tags named by strings.
//
// Requires C++20 (std::span). Threads: a Client may be shared between
// threads; a Publisher or Subscriber is used by one thread at a time.
#ifndef TAGWIRE_HPP
#define TAGWIRE_HPP

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tagwire.h"

namespace tagwire {

// ---------------------------------------------------------------- errors ---

/// The kind of an error: the C ABI's tw_status.
enum class Errc : int {
  ok = TW_OK,
  daemon_unreachable = TW_ERR_DAEMON_UNREACHABLE,
  daemon_timeout = TW_ERR_DAEMON_TIMEOUT,
  unknown_tag = TW_ERR_UNKNOWN_TAG,
  tag_destroyed = TW_ERR_TAG_DESTROYED,
  invalid_name = TW_ERR_INVALID_NAME,
  no_send_access = TW_ERR_NO_SEND_ACCESS,
  not_subscribed = TW_ERR_NOT_SUBSCRIBED,
  too_large = TW_ERR_TOO_LARGE,
  overflowed = TW_ERR_OVERFLOWED,
  window_full = TW_ERR_WINDOW_FULL,
  no_lossless_room = TW_ERR_NO_LOSSLESS_ROOM,
  timeout = TW_ERR_TIMEOUT,
  peers_unresponsive = TW_ERR_PEERS_UNRESPONSIVE,
  no_placement = TW_ERR_NO_PLACEMENT,
  refused = TW_ERR_REFUSED,
  io = TW_ERR_IO,
  protocol = TW_ERR_PROTOCOL,
  invalid_argument = TW_ERR_INVALID_ARGUMENT,
  buffer_too_small = TW_ERR_BUFFER_TOO_SMALL,
  internal = TW_ERR_INTERNAL,
  depth_too_large = TW_ERR_DEPTH_TOO_LARGE,
  denied = TW_ERR_DENIED,
  foreign_daemon = TW_ERR_FOREIGN_DAEMON,
  quota = TW_ERR_QUOTA,
  deadline_missed = TW_ERR_DEADLINE_MISSED,
  not_permitted = TW_ERR_NOT_PERMITTED,
};

/// Every tagwire failure: what() says what happened and what to do, kind()
/// which error it is.
class Error : public std::runtime_error {
 public:
  Error(Errc kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Errc kind() const noexcept { return kind_; }
  /// The constant's name ("ERR_TIMEOUT").
  const char* kind_name() const noexcept { return tw_status_name(static_cast<tw_status>(kind_)); }

 private:
  Errc kind_;
};

#define TAGWIRE_ERROR_KIND(Name, code)                                     \
  class Name : public Error {                                               \
   public:                                                                  \
    explicit Name(const std::string& what) : Error(Errc::code, what) {}     \
  };
TAGWIRE_ERROR_KIND(DaemonUnreachable, daemon_unreachable)
TAGWIRE_ERROR_KIND(DaemonTimeout, daemon_timeout)
TAGWIRE_ERROR_KIND(UnknownTag, unknown_tag)
TAGWIRE_ERROR_KIND(TagDestroyed, tag_destroyed)
TAGWIRE_ERROR_KIND(InvalidName, invalid_name)
TAGWIRE_ERROR_KIND(NoSendAccess, no_send_access)
TAGWIRE_ERROR_KIND(NotSubscribed, not_subscribed)
TAGWIRE_ERROR_KIND(TooLarge, too_large)
TAGWIRE_ERROR_KIND(WindowFull, window_full)
TAGWIRE_ERROR_KIND(NoLosslessRoom, no_lossless_room)
TAGWIRE_ERROR_KIND(Timeout, timeout)
TAGWIRE_ERROR_KIND(PeersUnresponsive, peers_unresponsive)
TAGWIRE_ERROR_KIND(NoPlacement, no_placement)
TAGWIRE_ERROR_KIND(Refused, refused)
TAGWIRE_ERROR_KIND(IoError, io)
TAGWIRE_ERROR_KIND(ProtocolError, protocol)
TAGWIRE_ERROR_KIND(InvalidArgument, invalid_argument)
TAGWIRE_ERROR_KIND(BufferTooSmall, buffer_too_small)
TAGWIRE_ERROR_KIND(InternalError, internal)
TAGWIRE_ERROR_KIND(DepthTooLarge, depth_too_large)
TAGWIRE_ERROR_KIND(Denied, denied)
TAGWIRE_ERROR_KIND(ForeignDaemon, foreign_daemon)
TAGWIRE_ERROR_KIND(Quota, quota)
TAGWIRE_ERROR_KIND(DeadlineMissed, deadline_missed)
TAGWIRE_ERROR_KIND(NotPermitted, not_permitted)
#undef TAGWIRE_ERROR_KIND

/// The subscriber fell behind: lost() messages were dropped, oldest first.
/// The subscription stays valid: receive again for the next one.
class Overflowed : public Error {
 public:
  Overflowed(const std::string& what, std::uint64_t lost) : Error(Errc::overflowed, what), lost_(lost) {}
  std::uint64_t lost() const noexcept { return lost_; }

 private:
  std::uint64_t lost_;
};

namespace detail {
[[noreturn]] inline void raise(tw_status s, std::uint64_t lost = 0) {
  std::string w = tw_last_error();
  switch (s) {
    case TW_ERR_DAEMON_UNREACHABLE: throw DaemonUnreachable(w);
    case TW_ERR_DAEMON_TIMEOUT: throw DaemonTimeout(w);
    case TW_ERR_UNKNOWN_TAG: throw UnknownTag(w);
    case TW_ERR_TAG_DESTROYED: throw TagDestroyed(w);
    case TW_ERR_INVALID_NAME: throw InvalidName(w);
    case TW_ERR_NO_SEND_ACCESS: throw NoSendAccess(w);
    case TW_ERR_NOT_SUBSCRIBED: throw NotSubscribed(w);
    case TW_ERR_TOO_LARGE: throw TooLarge(w);
    case TW_ERR_OVERFLOWED: throw Overflowed(w, lost);
    case TW_ERR_WINDOW_FULL: throw WindowFull(w);
    case TW_ERR_NO_LOSSLESS_ROOM: throw NoLosslessRoom(w);
    case TW_ERR_TIMEOUT: throw Timeout(w);
    case TW_ERR_PEERS_UNRESPONSIVE: throw PeersUnresponsive(w);
    case TW_ERR_NO_PLACEMENT: throw NoPlacement(w);
    case TW_ERR_REFUSED: throw Refused(w);
    case TW_ERR_IO: throw IoError(w);
    case TW_ERR_PROTOCOL: throw ProtocolError(w);
    case TW_ERR_INVALID_ARGUMENT: throw InvalidArgument(w);
    case TW_ERR_BUFFER_TOO_SMALL: throw BufferTooSmall(w);
    case TW_ERR_DEPTH_TOO_LARGE: throw DepthTooLarge(w);
    case TW_ERR_DENIED: throw Denied(w);
    case TW_ERR_FOREIGN_DAEMON: throw ForeignDaemon(w);
    case TW_ERR_QUOTA: throw Quota(w);
    case TW_ERR_DEADLINE_MISSED: throw DeadlineMissed(w);
    case TW_ERR_NOT_PERMITTED: throw NotPermitted(w);
    default: throw InternalError(w.empty() ? std::string("unknown tagwire status") : w);
  }
}

inline void check(tw_status s) {
  if (s != TW_OK) raise(s);
}

inline std::int64_t to_ns(std::optional<std::chrono::nanoseconds> t) {
  if (!t) return -1;
  return t->count() < 0 ? 0 : static_cast<std::int64_t>(t->count());
}

template <class Handle, void (*Free)(Handle*)>
struct Deleter {
  void operator()(Handle* h) const noexcept { Free(h); }
};
}  // namespace detail

// ----------------------------------------------------------------- values ---

using Clock = std::chrono::system_clock;

/// A node's address (IPv4 or IPv6).
struct NodeAddr {
  tw_node_addr raw{};
  /// "10.0.0.1" or an IPv6 address.
  std::string str() const {
    char buf[64];
    std::size_t n = tw_node_addr_format(&raw, buf, sizeof buf);
    return std::string(buf, n < sizeof buf ? n : sizeof buf - 1);
  }
  static NodeAddr parse(const std::string& text) {
    NodeAddr a;
    detail::check(tw_node_addr_parse(text.c_str(), &a.raw));
    return a;
  }
  friend bool operator==(const NodeAddr& a, const NodeAddr& b) {
    for (int i = 0; i < 16; ++i)
      if (a.raw.bytes[i] != b.raw.bytes[i]) return false;
    return true;
  }
};

/// Who sent a message: process id and node.
struct Sender {
  std::uint32_t pid = 0;
  NodeAddr node;
  static Sender from(const tw_sender& s) { return Sender{s.pid, NodeAddr{s.node}}; }
  /// "pid@node", as the Rust API prints it.
  std::string str() const { return std::to_string(pid) + "@" + node.str(); }
};

/// A sender or receiver of a tag.
struct Member {
  Sender who;
  Clock::time_point since;
};

/// The state of the instance a message is about.
enum class InstanceState : std::uint8_t {
  alive = TW_STATE_ALIVE,
  disposed = TW_STATE_DISPOSED,
  unregistered = TW_STATE_UNREGISTERED,
  disposed_unregistered = TW_STATE_DISPOSED_UNREGISTERED,
};

/// A message's instance: its 16-byte key (a key of at most 16 bytes, zero
/// padded; a longer one's MD5) if sent with one, its state, and the
/// publisher's ownership strength if it set one.
struct Instance {
  std::optional<std::array<std::uint8_t, 16>> key;
  InstanceState state = InstanceState::alive;
  std::optional<std::int32_t> strength;
  static Instance from(const tw_message_info& i) {
    Instance r;
    if (i.has_key) {
      r.key.emplace();
      std::copy(std::begin(i.key), std::end(i.key), r.key->begin());
    }
    r.state = static_cast<InstanceState>(i.state);
    if (i.has_strength) r.strength = i.strength;
    return r;
  }
};

/// A received message.
struct Message {
  std::vector<std::byte> payload;
  std::uint64_t seq = 0;
  Sender sender;
  Clock::time_point timestamp;
  Instance instance;
  std::string_view text() const {
    return {reinterpret_cast<const char*>(payload.data()), payload.size()};
  }
};

/// What receive_into returns beside the payload.
struct MessageInfo {
  std::size_t len = 0;
  std::uint64_t seq = 0;
  Sender sender;
  Clock::time_point timestamp;
  Instance instance;
};

enum class Domain : std::uint32_t { global = TW_DOMAIN_GLOBAL, local = TW_DOMAIN_LOCAL };

/// A tag's ring shape and history kept from its creation (0: defaults).
struct TagParams {
  std::uint32_t slots = 0;
  std::uint32_t slot_payload = 0;
  std::uint32_t history_depth = 0;
  std::uint64_t history_max_bytes = 0;
};

/// A history query for pull and subscribe_with_history.
struct HistoryQuery {
  tw_history_query raw{};
  static HistoryQuery last(std::uint32_t n) { return {{TW_HISTORY_LAST, n, 0}}; }
  static HistoryQuery since(std::uint64_t seq) { return {{TW_HISTORY_SINCE, seq, 0}}; }
  static HistoryQuery between(std::uint64_t from_ns, std::uint64_t to_ns) {
    return {{TW_HISTORY_BETWEEN, from_ns, to_ns}};
  }
};

/// Options of one subscription, as the Rust SubscribeOptions (chainable).
struct SubscribeOptions {
  tw_subscribe_options raw = tw_subscribe_options_default();
  SubscribeOptions& depth(std::uint32_t d) { raw.depth = d; return *this; }
  SubscribeOptions& best_effort() { raw.reliability = TW_BEST_EFFORT; return *this; }
  SubscribeOptions& tcp() { raw.carrier = TW_CARRIER_TCP; return *this; }
  SubscribeOptions& multicast() { raw.carrier = TW_CARRIER_MULTICAST; raw.reliability = TW_BEST_EFFORT; return *this; }
  SubscribeOptions& every(std::uint32_t n) { raw.every = n; return *this; }
  SubscribeOptions& proxy_at_publisher() { raw.proxy = TW_PROXY_PUBLISHER; return *this; }
  SubscribeOptions& proxy_at_subscriber() { raw.proxy = TW_PROXY_SUBSCRIBER; return *this; }
  SubscribeOptions& proxy_at(const NodeAddr& node) { raw.proxy = TW_PROXY_NODE; raw.proxy_node = node.raw; return *this; }
  SubscribeOptions& proxy_auto(std::chrono::microseconds bound) {
    raw.proxy = TW_PROXY_AUTO;
    raw.delay_bound_us = static_cast<std::uint32_t>(bound.count());
    return *this;
  }
  SubscribeOptions& lossless() { raw.lossless = true; raw.reliability = TW_RELIABLE; return *this; }
  SubscribeOptions& busy_poll(std::chrono::nanoseconds spin) { raw.busy_poll_ns = static_cast<std::uint64_t>(spin.count()); return *this; }
  /// Of each instance, only the strongest live publisher's messages.
  SubscribeOptions& exclusive() { raw.exclusive = true; return *this; }
  /// Receives throw DeadlineMissed once per period an instance goes silent.
  SubscribeOptions& deadline(std::chrono::nanoseconds period) { raw.deadline_ns = static_cast<std::uint64_t>(period.count()); return *this; }
  /// At most one message per instance per interval, the newest.
  SubscribeOptions& min_separation(std::chrono::nanoseconds interval) {
    raw.min_separation_ns = static_cast<std::uint64_t>(interval.count());
    return *this;
  }
  /// The packet class of the datagrams from other nodes: TW_PRIORITY_LOW,
  /// _NORMAL, _HIGH, _CRITICAL.
  SubscribeOptions& priority(std::uint32_t klass) { raw.priority = klass; return *this; }
  /// The packet class of a DSCP of one's own (0..63).
  SubscribeOptions& dscp(std::uint8_t value) { raw.priority = TW_PRIORITY_DSCP | value; return *this; }
  /// The threads that bring the messages from other nodes run SCHED_FIFO
  /// at `priority` (1..99; needs CAP_SYS_NICE or `ulimit -r`, else
  /// subscribe throws NotPermitted).
  SubscribeOptions& sched_fifo(std::uint8_t priority) { raw.sched = TW_SCHED_FIFO | priority; return *this; }
  /// ... SCHED_RR at `priority` (1..99).
  SubscribeOptions& sched_rr(std::uint8_t priority) { raw.sched = TW_SCHED_RR | priority; return *this; }
  /// ... the time-sharing policy at `nice` (-20..19; below 0 needs the
  /// privilege too).
  SubscribeOptions& sched_other(std::int8_t nice) {
    raw.sched = TW_SCHED_OTHER | static_cast<std::uint8_t>(nice);
    return *this;
  }
};

/// What a publisher asks of its node (Client::publisher): a packet class
/// for everything its node sends the tag in, at least, a policy for the
/// node's forwarder of the tag, at least, and the pacing of the tag's
/// reliable streams to other nodes.
struct PublishOptions {
  tw_publish_options raw = tw_publish_options_default();
  /// TW_PRIORITY_LOW, _NORMAL (default), _HIGH, _CRITICAL.
  PublishOptions& priority(std::uint32_t klass) { raw.priority = klass; return *this; }
  /// The packet class of a DSCP of one's own (0..63).
  PublishOptions& dscp(std::uint8_t value) { raw.priority = TW_PRIORITY_DSCP | value; return *this; }
  /// The node's forwarder of the tag runs SCHED_FIFO at `priority` (1..99;
  /// needs CAP_SYS_NICE or `ulimit -r`, else publisher throws NotPermitted).
  PublishOptions& sched_fifo(std::uint8_t priority) { raw.sched = TW_SCHED_FIFO | priority; return *this; }
  /// ... SCHED_RR at `priority` (1..99).
  PublishOptions& sched_rr(std::uint8_t priority) { raw.sched = TW_SCHED_RR | priority; return *this; }
  /// ... the time-sharing policy at `nice` (-20..19; below 0 needs the
  /// privilege too).
  PublishOptions& sched_other(std::int8_t nice) {
    raw.sched = TW_SCHED_OTHER | static_cast<std::uint8_t>(nice);
    return *this;
  }
  /// Paced from each stream's send-window occupancy (NAPA): the path's
  /// rate without filling a bottleneck's queue.
  PublishOptions& pacing_adaptive() { raw.pacing = TW_PACING_ADAPTIVE; return *this; }
  /// Released at `bytes_per_sec` (> 0) whatever the acknowledgements say.
  PublishOptions& pacing_fixed(std::uint64_t bytes_per_sec) {
    raw.pacing = TW_PACING_FIXED;
    raw.pacing_rate = bytes_per_sec;
    return *this;
  }
  /// Not paced, whatever the daemon is set to.
  PublishOptions& pacing_off() { raw.pacing = TW_PACING_OFF; return *this; }
};

/// How to reach the daemon.
struct ClientOptions {
  std::optional<std::string> socket;  ///< default: $TAGWIRE_SOCKET or the per-user path
  std::chrono::milliseconds timeout{1000};
  std::optional<bool> autostart;      ///< default: TAGWIRE_AUTOSTART=1
  std::optional<std::string> name;
};

/// A tag with its senders and receivers.
struct TagSummary {
  std::string name;
  Domain domain = Domain::global;
  std::vector<Member> senders, receivers;
};

/// A node the daemon knows.
struct NodeSummary {
  NodeAddr node;
  std::string name;
  enum class State { connecting, up, dead } state = State::connecting;
  std::uint64_t last_heard_ms = 0;
  std::string source;
};

namespace detail {
inline Clock::time_point at(std::uint64_t ns) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}
inline std::vector<Member> members(const tw_member* m, std::size_t n) {
  std::vector<Member> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.push_back(Member{Sender::from(m[i].who), at(m[i].since_unix_ns)});
  return v;
}
}  // namespace detail

// ---------------------------------------------------------------- handles ---

/// Send access to one tag; destroying it releases the access.
class Publisher {
 public:
  explicit Publisher(tw_publisher* p) : p_(p) {}
  /// Sends one message; returns its sequence number.
  std::uint64_t send(std::span<const std::byte> data) { return send(data.data(), data.size()); }
  std::uint64_t send(std::string_view text) { return send(text.data(), text.size()); }
  std::uint64_t send(const void* data, std::size_t len) {
    std::uint64_t seq = 0;
    detail::check(tw_publisher_send(p_.get(), static_cast<const std::uint8_t*>(data), len, &seq));
    return seq;
  }
  /// Sends a sample of instance `key` (see Instance); returns its sequence number.
  std::uint64_t send_keyed(std::span<const std::byte> key, std::span<const std::byte> data) {
    std::uint64_t seq = 0;
    detail::check(tw_publisher_send_keyed(p_.get(), reinterpret_cast<const std::uint8_t*>(key.data()), key.size(),
                                          reinterpret_cast<const std::uint8_t*>(data.data()), data.size(), &seq));
    return seq;
  }
  std::uint64_t send_keyed(std::string_view key, std::string_view text) {
    return send_keyed(std::as_bytes(std::span(key)), std::as_bytes(std::span(text)));
  }
  /// Deletes instance `key`: subscribers get an empty message, InstanceState::disposed.
  std::uint64_t dispose(std::string_view key) {
    std::uint64_t seq = 0;
    detail::check(tw_publisher_dispose(p_.get(), reinterpret_cast<const std::uint8_t*>(key.data()), key.size(), &seq));
    return seq;
  }
  /// Writes instance `key` no more: an exclusive owner gives it up at once.
  std::uint64_t unregister(std::string_view key) {
    std::uint64_t seq = 0;
    detail::check(
        tw_publisher_unregister(p_.get(), reinterpret_cast<const std::uint8_t*>(key.data()), key.size(), &seq));
    return seq;
  }
  /// Offers a deadline: each instance written should get a sample at least
  /// every `period` (nullopt: none); missed_deadlines() says which did not.
  void offer_deadline(std::optional<std::chrono::nanoseconds> period) {
    detail::check(tw_publisher_offer_deadline(p_.get(), period ? static_cast<std::uint64_t>(period->count()) : 0));
  }
  /// The instances left without a sample for a whole offered period since
  /// the last call, one per period missed (nullopt: messages without a key).
  std::vector<std::optional<std::array<std::uint8_t, 16>>> missed_deadlines() {
    std::vector<std::optional<std::array<std::uint8_t, 16>>> out;
    for (;;) {
      std::array<std::uint8_t, 16> key{};
      bool has_key = false, missed = false;
      detail::check(tw_publisher_missed_deadline(p_.get(), key.data(), &has_key, &missed));
      if (!missed) return out;
      out.push_back(has_key ? std::optional(key) : std::nullopt);
    }
  }
  /// Ownership strength carried from now on (nullopt: none, counted as 0).
  void set_strength(std::optional<std::int32_t> strength) {
    detail::check(tw_publisher_set_strength(p_.get(), strength.has_value(), strength.value_or(0)));
  }
  void set_send_timeout(std::chrono::nanoseconds t) {
    detail::check(tw_publisher_set_send_timeout(p_.get(), static_cast<std::uint64_t>(t.count())));
  }
  std::uint64_t last_seq() const { return tw_publisher_last_seq(p_.get()); }
  std::size_t max_fast_message() const { return tw_publisher_max_fast_message(p_.get()); }
  tw_publisher* raw() const noexcept { return p_.get(); }

 private:
  std::unique_ptr<tw_publisher, detail::Deleter<tw_publisher, tw_publisher_free>> p_;
};

/// A subscription to one tag; destroying it unsubscribes.
class Subscriber {
 public:
  explicit Subscriber(tw_subscriber* s) : s_(s) {}

  /// The next message; throws Timeout, Overflowed (then call again),
  /// TagDestroyed. No timeout: wait for ever.
  Message receive(std::optional<std::chrono::nanoseconds> timeout = std::nullopt) {
    Message m;
    if (buf_.empty()) buf_.resize(64 * 1024);
    MessageInfo i = receive_grow(timeout);
    m.payload.assign(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(i.len));
    m.seq = i.seq;
    m.sender = i.sender;
    m.timestamp = i.timestamp;
    m.instance = i.instance;
    return m;
  }

  /// Like receive, but nullopt on timeout.
  std::optional<Message> try_receive(std::optional<std::chrono::nanoseconds> timeout) {
    try {
      return receive(timeout);
    } catch (const Timeout&) {
      return std::nullopt;
    }
  }

  /// Receives into the caller's buffer (no allocation per message). A message
  /// larger than buf throws BufferTooSmall and is kept for the next call.
  MessageInfo receive_into(std::span<std::byte> buf, std::optional<std::chrono::nanoseconds> timeout = std::nullopt) {
    tw_message_info info{};
    tw_status s = tw_subscriber_receive(s_.get(), reinterpret_cast<std::uint8_t*>(buf.data()), buf.size(),
                                        detail::to_ns(timeout), &info);
    if (s != TW_OK) detail::raise(s, info.lost);
    return MessageInfo{info.len, info.seq, Sender::from(info.sender), detail::at(info.timestamp_ns), Instance::from(info)};
  }

  bool available() const { return tw_subscriber_available(s_.get()); }
  std::uint64_t purge() { return tw_subscriber_purge(s_.get()); }
  std::uint64_t lost() const { return tw_subscriber_lost(s_.get()); }
  std::uint64_t received() const { return tw_subscriber_received(s_.get()); }
  tw_subscriber* raw() const noexcept { return s_.get(); }

 private:
  MessageInfo receive_grow(std::optional<std::chrono::nanoseconds> timeout) {
    for (;;) {
      tw_message_info info{};
      tw_status s = tw_subscriber_receive(s_.get(), reinterpret_cast<std::uint8_t*>(buf_.data()), buf_.size(),
                                          detail::to_ns(timeout), &info);
      if (s == TW_ERR_BUFFER_TOO_SMALL) {
        buf_.resize(info.len);  // the message is kept for the next call
        continue;
      }
      if (s != TW_OK) detail::raise(s, info.lost);
      return MessageInfo{info.len, info.seq, Sender::from(info.sender), detail::at(info.timestamp_ns), Instance::from(info)};
    }
  }

  std::unique_ptr<tw_subscriber, detail::Deleter<tw_subscriber, tw_subscriber_free>> s_;
  std::vector<std::byte> buf_;
};

/// A connection to the node's tagwire daemon. Copies share the connection.
class Client {
 public:
  Client() : Client(ClientOptions{}) {}
  explicit Client(const ClientOptions& o) {
    tw_client_options raw = tw_client_options_default();
    if (o.socket) raw.socket = o.socket->c_str();
    raw.timeout_ms = static_cast<std::uint64_t>(o.timeout.count());
    if (o.autostart) raw.autostart = *o.autostart;
    if (o.name) raw.name = o.name->c_str();
    tw_client* c = nullptr;
    detail::check(tw_client_connect_with(&raw, &c));
    c_.reset(c, tw_client_free);
  }

  /// Creates a tag; true when this call created it (an existing tag is fine).
  bool create_tag(const std::string& name, Domain d = Domain::global, const TagParams& p = {}) {
    tw_tag_params raw{p.slots, p.slot_payload, p.history_depth, p.history_max_bytes};
    bool created = false;
    detail::check(tw_create_tag_with(c_.get(), name.c_str(), static_cast<std::uint32_t>(d), &raw, &created));
    return created;
  }
  void destroy_tag(const std::string& name) { detail::check(tw_destroy_tag(c_.get(), name.c_str())); }

  Publisher publisher(const std::string& name, const PublishOptions& o = {}) {
    tw_publisher* p = nullptr;
    detail::check(tw_publisher_new_with(c_.get(), name.c_str(), &o.raw, &p));
    return Publisher(p);
  }
  Subscriber subscribe(const std::string& name, const SubscribeOptions& o = {}) {
    tw_subscriber* s = nullptr;
    detail::check(tw_subscribe(c_.get(), name.c_str(), &o.raw, &s));
    return Subscriber(s);
  }
  /// Subscribes, then hands out `q` from the tag's history before live messages.
  Subscriber subscribe_with_history(const std::string& name, const SubscribeOptions& o, const HistoryQuery& q) {
    tw_subscriber* s = nullptr;
    detail::check(tw_subscribe_with_history(c_.get(), name.c_str(), &o.raw, &q.raw, &s));
    return Subscriber(s);
  }

  std::vector<Member> senders(const std::string& name) { return members(name, tw_senders); }
  std::vector<Member> receivers(const std::string& name) { return members(name, tw_receivers); }

  std::vector<TagSummary> tags() {
    tw_tag_list* l = nullptr;
    detail::check(tw_tags(c_.get(), &l));
    return tag_list(l);
  }

  /// This library's own copy of the tag's entry (its local tag table),
  /// without asking the daemon; nullopt when this process does not know it.
  std::optional<TagSummary> local_view(const std::string& name) {
    tw_tag_list* l = nullptr;
    detail::check(tw_local_view(c_.get(), name.c_str(), &l));
    auto v = tag_list(l);
    if (v.empty()) return std::nullopt;
    return v.front();
  }

 private:
  static std::vector<TagSummary> tag_list(tw_tag_list* l) {
    std::unique_ptr<tw_tag_list, detail::Deleter<tw_tag_list, tw_tag_list_free>> guard(l);
    std::vector<TagSummary> out;
    for (std::size_t i = 0, n = tw_tag_list_len(l); i < n; ++i) {
      tw_tag_info t{};
      detail::check(tw_tag_list_get(l, i, &t));
      out.push_back(TagSummary{t.name, static_cast<Domain>(t.domain), detail::members(t.senders, t.sender_count),
                               detail::members(t.receivers, t.receiver_count)});
    }
    return out;
  }

 public:
  std::vector<NodeSummary> nodes() {
    tw_node_list* l = nullptr;
    detail::check(tw_nodes(c_.get(), &l));
    std::unique_ptr<tw_node_list, detail::Deleter<tw_node_list, tw_node_list_free>> guard(l);
    std::vector<NodeSummary> out;
    for (std::size_t i = 0, n = tw_node_list_len(l); i < n; ++i) {
      tw_node_info t{};
      detail::check(tw_node_list_get(l, i, &t));
      out.push_back(NodeSummary{NodeAddr{t.node}, t.name, static_cast<NodeSummary::State>(t.state), t.last_heard_ms,
                                t.source});
    }
    return out;
  }

  // Gives this node's subscriptions to `name` (of process `pid`; 0: every
  // process) the packet class `klass` (a TW_PRIORITY_* value, or
  // TW_PRIORITY_DSCP | n) at run time; returns how many changed.
  std::size_t set_channel_qos(const std::string& name, std::uint32_t klass, std::uint32_t pid = 0) {
    std::size_t changed = 0;
    detail::check(tw_set_channel_qos(c_.get(), name.c_str(), pid, klass, &changed));
    return changed;
  }

  // ... the thread policy `sched` (a TW_SCHED_* code: TW_SCHED_FIFO | p,
  // TW_SCHED_RR | p, TW_SCHED_OTHER | nice); returns how many changed.
  std::size_t set_channel_sched(const std::string& name, std::uint32_t sched, std::uint32_t pid = 0) {
    std::size_t changed = 0;
    detail::check(tw_set_channel_sched(c_.get(), name.c_str(), pid, sched, &changed));
    return changed;
  }

  // Gives the subscriptions to `name` that `subscribers` chooses ("PID@NODE",
  // "@NODE", "PID", "here", "all": every node's) the class `klass` and the
  // policy `sched` (each TW_KEEP to leave it) at run time, on any node: the
  // node holding each restates it; returns how many changed.
  std::size_t change_channels(const std::string& name, const std::string& subscribers, std::uint32_t klass,
                              std::uint32_t sched = TW_KEEP) {
    std::size_t changed = 0;
    detail::check(tw_change_channels(c_.get(), name.c_str(), subscribers.c_str(), klass, sched, &changed));
    return changed;
  }

  // change_channels for the send rights of the publishers `publishers`
  // chooses (spelled the same): their nodes send the tag in at least
  // `klass` and run its forwarder at least at `sched` (each TW_KEEP to
  // leave it); returns how many changed. None chosen: NoSendAccess.
  std::size_t change_publishers(const std::string& name, const std::string& publishers, std::uint32_t klass,
                                std::uint32_t sched = TW_KEEP) {
    std::size_t changed = 0;
    detail::check(tw_change_publishers(c_.get(), name.c_str(), publishers.c_str(), klass, sched, &changed));
    return changed;
  }

  // Paces the tag's reliable streams of the publishers `publishers`
  // chooses: TW_PACING_DAEMON, _OFF, _ADAPTIVE or _FIXED (at `rate` bytes
  // per second), at run time, from any node; returns how many publishers'
  // pacing changed (none if they had it already).
  std::size_t change_pacing(const std::string& name, const std::string& publishers, std::uint32_t pacing,
                            std::uint64_t rate = 0) {
    std::size_t changed = 0;
    detail::check(tw_change_pacing(c_.get(), name.c_str(), publishers.c_str(), pacing, rate, &changed));
    return changed;
  }

  void set_history(const std::string& name, std::uint32_t depth, std::uint64_t max_bytes = 0) {
    detail::check(tw_set_history(c_.get(), name.c_str(), depth, max_bytes));
  }

  std::vector<Message> pull(const std::string& name, const HistoryQuery& q) {
    tw_message_list* l = nullptr;
    detail::check(tw_pull(c_.get(), name.c_str(), &q.raw, &l));
    std::unique_ptr<tw_message_list, detail::Deleter<tw_message_list, tw_message_list_free>> guard(l);
    std::vector<Message> out;
    for (std::size_t i = 0, n = tw_message_list_len(l); i < n; ++i) {
      tw_message_view v{};
      detail::check(tw_message_list_get(l, i, &v));
      Message m;
      const std::byte* p = reinterpret_cast<const std::byte*>(v.payload);
      m.payload.assign(p, p + v.len);
      m.seq = v.seq;
      m.sender = Sender::from(v.sender);
      m.timestamp = detail::at(v.timestamp_ns);
      out.push_back(std::move(m));
    }
    return out;
  }

  /// This process as the daemon sees it.
  Sender me() const {
    tw_sender s{};
    detail::check(tw_client_me(c_.get(), &s));
    return Sender::from(s);
  }
  void ping() { detail::check(tw_ping(c_.get())); }
  tw_client* raw() const noexcept { return c_.get(); }

 private:
  using ListFn = tw_status (*)(const tw_client*, const char*, tw_member*, std::size_t, std::size_t*);
  std::vector<Member> members(const std::string& name, ListFn f) {
    std::vector<tw_member> buf(8);
    for (;;) {
      std::size_t n = 0;
      tw_status s = f(c_.get(), name.c_str(), buf.data(), buf.size(), &n);
      if (s == TW_ERR_BUFFER_TOO_SMALL) {
        buf.resize(n);
        continue;
      }
      detail::check(s);
      return detail::members(buf.data(), n);
    }
  }

  std::shared_ptr<tw_client> c_;
};

}  // namespace tagwire

// ------------------------------------------------------------ DistTag_IPC ---
//
// The paper's API (Figure 2-1). Results are integers: >= 0 on success,
// -(error kind) on failure (e.g. -TW_ERR_TIMEOUT), with Last_Error() saying
// what happened. Receive_Message returns the sender's process id.

/// A distribution tag: its name.
typedef const char* tag_t;
/// A node's address, as Receive_Message reports it.
typedef tw_node_addr node_addr_t;
/// A process on a tag, as the Get_*_On_Distribution_Tag calls list them.
struct process_t {
  std::uint32_t pid;
  node_addr_t node;
};
/// Tag domains.
enum domain_t { GLOBAL = TW_DOMAIN_GLOBAL, LOCAL = TW_DOMAIN_LOCAL };
/// Receive_Message's timeout for "wait for ever".
constexpr long TW_WAIT_FOREVER = -1;

class DistTag_IPC {
 public:
  /// Connects to the node's daemon (the default socket, or `socket`). A
  /// daemon that does not answer makes every call fail with
  /// -TW_ERR_DAEMON_UNREACHABLE until one does.
  explicit DistTag_IPC(const char* socket = nullptr) : socket_(socket ? socket : "") {}

  /// Creates a tag in domain GLOBAL (all nodes) or LOCAL (this node).
  int Create_Distribution_Tag(tag_t tag, int domain) {
    return call([&](tagwire::Client& c) { c.create_tag(tag, static_cast<tagwire::Domain>(domain)); return 0; });
  }
  /// Destroys a tag everywhere.
  int Destroy_Distribution_Tag(tag_t tag) {
    return call([&](tagwire::Client& c) {
      c.destroy_tag(tag);
      pubs_.erase(tag);
      subs_.erase(tag);
      return 0;
    });
  }
  /// Gets the right to send on a tag.
  int Get_Send_Access(tag_t tag) {
    return call([&](tagwire::Client& c) {
      if (!pubs_.count(tag)) pubs_.emplace(tag, c.publisher(tag));
      return 0;
    });
  }
  /// Gives the right back.
  int Release_Send_Access(tag_t tag) {
    return pubs_.erase(tag) ? 0 : fail(TW_ERR_NO_SEND_ACCESS, std::string("no send access on ") + tag);
  }
  /// Subscribes to a tag: messages sent from now on are received.
  int Subscribe(tag_t tag) {
    return call([&](tagwire::Client& c) {
      if (!subs_.count(tag)) subs_.emplace(tag, c.subscribe(tag));
      return 0;
    });
  }
  /// Unsubscribes.
  int Unsubscribe(tag_t tag) {
    return subs_.erase(tag) ? 0 : fail(TW_ERR_NOT_SUBSCRIBED, std::string("not subscribed to ") + tag);
  }
  /// Sends msglen bytes to every receiver of the tag.
  int Send_Message(tag_t tag, const void* msg, std::size_t msglen) {
    auto it = pubs_.find(tag);
    if (it == pubs_.end()) return fail(TW_ERR_NO_SEND_ACCESS, std::string("no send access on ") + tag);
    return call([&](tagwire::Client&) { it->second.send(msg, msglen); return 0; });
  }
  /// Receives the next message into msg (*msglen: its capacity in, the
  /// message's length out), waiting at most tout milliseconds
  /// (TW_WAIT_FOREVER: for ever; 0: poll). Returns the sender's process id;
  /// *from_addr (if given) gets the sender's node.
  int Receive_Message(tag_t tag, void* msg, std::size_t* msglen, long tout, node_addr_t* from_addr = nullptr) {
    auto it = subs_.find(tag);
    if (it == subs_.end()) return fail(TW_ERR_NOT_SUBSCRIBED, std::string("not subscribed to ") + tag);
    if (!msglen) return fail(TW_ERR_INVALID_ARGUMENT, "msglen is NULL");
    tw_message_info info{};
    std::int64_t ns = tout < 0 ? -1 : static_cast<std::int64_t>(tout) * 1000000;
    tw_status s = tw_subscriber_receive(it->second.raw(), static_cast<std::uint8_t*>(msg), *msglen, ns, &info);
    if (s == TW_ERR_BUFFER_TOO_SMALL) *msglen = info.len;
    if (s != TW_OK) return fail(s, tw_last_error());
    *msglen = info.len;
    if (from_addr) *from_addr = info.sender.node;
    return static_cast<int>(info.sender.pid);
  }
  /// Drops the unread messages of a tag; returns how many.
  int Purge_Messages(tag_t tag) {
    auto it = subs_.find(tag);
    if (it == subs_.end()) return fail(TW_ERR_NOT_SUBSCRIBED, std::string("not subscribed to ") + tag);
    return static_cast<int>(it->second.purge());
  }
  /// 1 when a message is waiting on the tag, 0 when not.
  int Message_Available(tag_t tag) {
    auto it = subs_.find(tag);
    if (it == subs_.end()) return fail(TW_ERR_NOT_SUBSCRIBED, std::string("not subscribed to ") + tag);
    return it->second.available() ? 1 : 0;
  }
  /// The processes with send access on the tag; returns their count.
  int Get_Senders_On_Distribution_Tag(tag_t tag, std::vector<process_t>& senders) {
    return call([&](tagwire::Client& c) { return list(c.senders(tag), senders); });
  }
  /// The processes subscribed to the tag; returns their count.
  int Get_Receiver_On_Distribution_Tag(tag_t tag, std::vector<process_t>& receivers) {
    return call([&](tagwire::Client& c) { return list(c.receivers(tag), receivers); });
  }
  /// What the last failed call said.
  const char* Last_Error() const { return error_.c_str(); }

 private:
  template <class F>
  int call(F&& f) {
    try {
      if (!client_) {
        tagwire::ClientOptions o;
        if (!socket_.empty()) o.socket = socket_;
        client_.emplace(o);
      }
      return f(*client_);
    } catch (const tagwire::Error& e) {
      return fail(static_cast<tw_status>(e.kind()), e.what());
    }
  }
  int fail(tw_status s, const std::string& what) {
    error_ = what;
    return -static_cast<int>(s);
  }
  static int list(const std::vector<tagwire::Member>& m, std::vector<process_t>& out) {
    out.clear();
    for (const auto& x : m) out.push_back(process_t{x.who.pid, x.who.node.raw});
    return static_cast<int>(out.size());
  }

  std::string socket_;
  std::optional<tagwire::Client> client_;
  std::map<std::string, tagwire::Publisher> pubs_;
  std::map<std::string, tagwire::Subscriber> subs_;
  std::string error_;
};

#endif  // TAGWIRE_HPP
