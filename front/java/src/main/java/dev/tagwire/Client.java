package dev.tagwire;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.invoke.MethodHandle;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.locks.StampedLock;
import java.util.function.Consumer;

/**
 * A connection to the node's tagwire daemon. Thread-safe: share one client
 * between threads. Publishers, subscribers and subscriptions made from it
 * stay valid after it is closed. A client whose daemon restarts gets
 * {@link TagwireException.DaemonUnreachable} meanwhile, then reconnects and
 * re-registers its tags, publishers and subscribers by itself.
 *
 * <pre>{@code
 * try (Client tw = Client.connect()) {
 *     tw.createTag("/robot/laser", Domain.GLOBAL);
 *     try (Subscriber sub = tw.subscribe("/robot/laser", new SubscribeOptions().depth(64));
 *          Publisher pub = tw.publisher("/robot/laser")) {
 *         pub.send("scan".getBytes());
 *         Message m = sub.receive(Duration.ofMillis(100));
 *         System.out.println(m.payload().length + " from " + m.sender() + " seq " + m.seq());
 *     }
 * }
 * }</pre>
 */
public final class Client implements AutoCloseable {
    private final MemorySegment handle;
    private final StampedLock lock = new StampedLock();
    private volatile boolean closed;

    private Client(MemorySegment handle) {
        this.handle = handle;
    }

    /** Connects to the node's daemon with the default options. */
    public static Client connect() {
        return connect(ClientOptions.defaults());
    }

    /** Connects to the daemon described by {@code o}. */
    public static Client connect(ClientOptions o) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment opts = (MemorySegment) Native.H.client_options_default.invokeExact((SegmentAllocator) a);
            if (o.socket() != null) {
                opts.set(ADDRESS, 0, a.allocateFrom(o.socket()));
            }
            opts.set(JAVA_LONG, 8, Math.max(0, o.timeout().toMillis()));
            if (o.autostart() != null) {
                opts.set(JAVA_BOOLEAN, 16, o.autostart());
            }
            if (o.name() != null) {
                opts.set(ADDRESS, 24, a.allocateFrom(o.name()));
            }
            MemorySegment out = a.allocate(ADDRESS);
            int st = (int) Native.H.client_connect_with.invokeExact(opts, out);
            if (st != 0) {
                throw Native.failure(st);
            }
            return new Client(out.get(ADDRESS, 0));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** The library's version ("0.2.0"). */
    public static String version() {
        return Native.version();
    }

    // ------------------------------------------------------------ guard ---

    private long enter() {
        long stamp = lock.readLock();
        if (closed) {
            lock.unlockRead(stamp);
            throw new IllegalStateException("the client is closed");
        }
        return stamp;
    }

    private void exit(long stamp) {
        lock.unlockRead(stamp);
    }

    /** Closes the connection (idempotent); its publishers and subscribers stay valid. */
    @Override
    public void close() {
        long stamp = lock.writeLock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            Native.H.client_free.invokeExact(handle);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    // ------------------------------------------------------------- tags ---

    /** Creates a global tag; true when this call created it (an existing tag is fine). */
    public boolean createTag(String name) {
        return createTag(name, Domain.GLOBAL, TagParams.DEFAULT);
    }

    /** Creates a tag in {@code domain}; true when this call created it. */
    public boolean createTag(String name, Domain domain) {
        return createTag(name, domain, TagParams.DEFAULT);
    }

    /** Creates a tag with a ring shape and a history kept from the start; true when this call created it. */
    public boolean createTag(String name, Domain domain, TagParams p) {
        Objects.requireNonNull(name, "name");
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment params = a.allocate(Native.TAG_PARAMS);
            params.set(JAVA_INT, 0, p.slots());
            params.set(JAVA_INT, 4, p.slotPayload());
            params.set(JAVA_INT, 8, p.historyDepth());
            params.set(JAVA_LONG, 16, p.historyMaxBytes());
            MemorySegment created = a.allocate(JAVA_BOOLEAN);
            Native.check((int) Native.H.create_tag_with.invokeExact(handle, a.allocateFrom(name), domain.code, params,
                    created));
            return created.get(JAVA_BOOLEAN, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    /** Destroys a tag: every publisher and subscriber on it, in every process, gets TagDestroyed. */
    public void destroyTag(String name) {
        Objects.requireNonNull(name, "name");
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            Native.check((int) Native.H.destroy_tag.invokeExact(handle, a.allocateFrom(name)));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    /**
     * Gives this node's subscriptions to a tag (those of process {@code pid}; 0: every process) the
     * packet class {@code priority} at run time: every sending node's streams carry it from their
     * next datagram, losing nothing. Returns how many subscriptions changed class (0 when they had
     * it already). A {@code DENIED} error unless this process's user may change them; {@code
     * NOT_SUBSCRIBED} when no such subscription is held on this node.
     */
    public long setChannelQos(String name, Priority priority, int pid) {
        Objects.requireNonNull(priority, "priority");
        return setChannelClass(name, priority.code, pid);
    }

    /** {@link #setChannelQos} with a DSCP of one's own (0..63). */
    public long setChannelDscp(String name, int dscp, int pid) {
        if (dscp < 0 || dscp > 63) {
            throw new IllegalArgumentException("a DSCP is 0..63: " + dscp);
        }
        return setChannelClass(name, 0x80 | dscp, pid);
    }

    private long setChannelClass(String name, int code, int pid) {
        return changeChannels(Native.H.set_channel_qos, name, code, pid);
    }

    /**
     * Gives this node's subscriptions to {@code name} (those of process {@code pid}; 0: every
     * process) the thread policy {@code sched} at run time: the sending nodes' forwarders and this
     * node's inbound threads run at it. Returns how many changed. A real-time policy this process
     * may not run at itself: {@link TagwireException.NotPermitted}.
     */
    public long setChannelSched(String name, Sched sched, int pid) {
        Objects.requireNonNull(sched, "sched");
        return changeChannels(Native.H.set_channel_sched, name, sched.code, pid);
    }

    /**
     * Gives the subscriptions to {@code name} that {@code subscribers} chooses ({@code "PID@NODE"},
     * {@code "@NODE"}: every process there, {@code "PID"} or {@code "here"}: this node, {@code
     * "all"}: every node's) the class {@code priority} and the thread policy {@code sched} (each
     * {@code null} to keep it) at run time, on any node: the node holding each restates it. Returns
     * how many changed. Another node's subscriptions only root, the tag's owner or a user allowed to
     * destroy the tag may change ({@link TagwireException.Kind#DENIED}); a node that is down or
     * silent: {@link TagwireException.Kind#PEERS_UNRESPONSIVE}.
     */
    public long changeChannels(String name, String subscribers, Priority priority, Sched sched) {
        return changeRights(Native.H.change_channels, name, subscribers, priority, sched);
    }

    /**
     * {@link #changeChannels} for the send rights of the publishers {@code publishers} chooses
     * (spelled the same): their nodes send the tag in at least the class {@code priority} and run
     * its forwarder at least at {@code sched} (each {@code null} to keep it). Returns how many
     * changed; none chosen: {@link TagwireException.Kind#NO_SEND_ACCESS}.
     */
    public long changePublishers(String name, String publishers, Priority priority, Sched sched) {
        return changeRights(Native.H.change_publishers, name, publishers, priority, sched);
    }

    /**
     * Paces the tag's reliable streams of the publishers {@code publishers} chooses (as in {@link
     * #changePublishers}) as {@code pacing} says, at run time, from any node. Returns how many
     * publishers' pacing changed (none if they had it already).
     */
    public long changePacing(String name, String publishers, Pacing pacing) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(publishers, "publishers");
        Objects.requireNonNull(pacing, "pacing");
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment changed = a.allocate(JAVA_LONG);
            Native.check((int) Native.H.change_pacing.invokeExact(
                    handle, a.allocateFrom(name), a.allocateFrom(publishers), pacing.code, pacing.rate, changed));
            return changed.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    private long changeRights(
            java.lang.invoke.MethodHandle call, String name, String whose, Priority priority, Sched sched) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(whose, "whose");
        int keep = -1; // TW_KEEP
        int klass = priority == null ? keep : priority.code;
        int policy = sched == null ? keep : sched.code;
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment changed = a.allocate(JAVA_LONG);
            Native.check((int) call.invokeExact(
                    handle, a.allocateFrom(name), a.allocateFrom(whose), klass, policy, changed));
            return changed.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    private long changeChannels(java.lang.invoke.MethodHandle call, String name, int code, int pid) {
        Objects.requireNonNull(name, "name");
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment changed = a.allocate(JAVA_LONG);
            Native.check((int) call.invokeExact(handle, a.allocateFrom(name), pid, code, changed));
            return changed.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    /**
     * Makes this node's daemon keep the last {@code depth} messages of a tag
     * (at most {@code maxBytes}, 0: its default) for {@link #pull}; 0 stops.
     */
    public void setHistory(String name, int depth, long maxBytes) {
        Objects.requireNonNull(name, "name");
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            Native.check((int) Native.H.set_history.invokeExact(handle, a.allocateFrom(name), depth, maxBytes));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    /** {@link #setHistory(String, int, long)} with the daemon's byte limit. */
    public void setHistory(String name, int depth) {
        setHistory(name, depth, 0);
    }

    // -------------------------------------------------------- endpoints ---

    /** Gets send access to a tag. */
    public Publisher publisher(String name) {
        return publisher(name, new PublishOptions());
    }

    /** Gets send access to a tag, asking its node for a packet class and a forwarder policy. */
    public Publisher publisher(String name, PublishOptions o) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(o, "options");
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            Native.check((int) Native.H.publisher_new_with.invokeExact(
                    handle, a.allocateFrom(name), o.toNative(a), out));
            return new Publisher(out.get(ADDRESS, 0), name);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    /** Subscribes with the default options; only messages sent after this call are received. */
    public Subscriber subscribe(String name) {
        return subscribe(name, SubscribeOptions.defaults());
    }

    /** Subscribes; only messages sent after this call are received. */
    public Subscriber subscribe(String name, SubscribeOptions o) {
        return subscribe(name, o, (HistoryQuery) null);
    }

    /**
     * Subscribes, then pulls {@code q} from the tag's history: the subscriber
     * receives those messages first and then live ones, with no gap and no
     * duplicate (a late joiner catching up).
     */
    public Subscriber subscribeWithHistory(String name, SubscribeOptions o, HistoryQuery q) {
        return subscribe(name, o, Objects.requireNonNull(q, "query"));
    }

    private Subscriber subscribe(String name, SubscribeOptions o, HistoryQuery q) {
        Objects.requireNonNull(name, "name");
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment opts = (o == null ? SubscribeOptions.defaults() : o).toNative(a);
            MemorySegment out = a.allocate(ADDRESS);
            MemorySegment n = a.allocateFrom(name);
            int st = q == null
                    ? (int) Native.H.subscribe.invokeExact(handle, n, opts, out)
                    : (int) Native.H.subscribe_with_history.invokeExact(handle, n, opts, q.toNative(a), out);
            Native.check(st);
            return new Subscriber(out.get(ADDRESS, 0), name);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    /**
     * Subscribes and calls {@code handler} for each message on a daemon Java
     * thread that this binding owns (see {@link Subscription}). Handler
     * exceptions and failures are printed to stderr.
     */
    public Subscription subscribe(String name, SubscribeOptions o, MessageHandler handler) {
        return subscribe(name, o, handler, null);
    }

    /** As {@link #subscribe(String, SubscribeOptions, MessageHandler)}, errors to {@code onError}. */
    public Subscription subscribe(String name, SubscribeOptions o, MessageHandler handler,
            Consumer<? super Throwable> onError) {
        Objects.requireNonNull(handler, "handler");
        return new Subscription(subscribe(name, o), Subscription.adapt(handler), onError);
    }

    /** As {@link #subscribe(String, SubscribeOptions, MessageHandler)}, the payload in place (no copy). */
    public Subscription subscribe(String name, SubscribeOptions o, RawHandler handler) {
        return subscribe(name, o, handler, null);
    }

    /** As {@link #subscribe(String, SubscribeOptions, RawHandler)}, errors to {@code onError}. */
    public Subscription subscribe(String name, SubscribeOptions o, RawHandler handler,
            Consumer<? super Throwable> onError) {
        Objects.requireNonNull(handler, "handler");
        return new Subscription(subscribe(name, o), handler, onError);
    }

    // ----------------------------------------------------------- tables ---

    /** The processes holding send access to a tag. */
    public List<Member> senders(String name) {
        return members(Native.H.senders, name);
    }

    /** The processes subscribed to a tag. */
    public List<Member> receivers(String name) {
        return members(Native.H.receivers, name);
    }

    private List<Member> members(MethodHandle f, String name) {
        Objects.requireNonNull(name, "name");
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment n = a.allocateFrom(name);
            MemorySegment count = a.allocate(JAVA_LONG);
            long cap = 8;
            for (;;) {
                MemorySegment buf = a.allocate(Native.MEMBER, cap);
                int st = (int) f.invokeExact(handle, n, buf, cap, count);
                if (st == TagwireException.Kind.BUFFER_TOO_SMALL.code()) {
                    cap = count.get(JAVA_LONG, 0);
                    continue;
                }
                Native.check(st);
                return readMembers(buf, count.get(JAVA_LONG, 0));
            }
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    private static List<Member> readMembers(MemorySegment m, long n) {
        long size = Native.MEMBER.byteSize();
        MemorySegment s = m.reinterpret(n * size);
        List<Member> out = new ArrayList<>((int) n);
        for (long i = 0; i < n; i++) {
            out.add(new Member(Sender.read(s, i * size), instant(s.get(JAVA_LONG, i * size + 24))));
        }
        return Collections.unmodifiableList(out);
    }

    static Instant instant(long unixNs) {
        return Instant.ofEpochSecond(Long.divideUnsigned(unixNs, 1_000_000_000L),
                Long.remainderUnsigned(unixNs, 1_000_000_000L));
    }

    /** Every tag with its senders and receivers. */
    public List<TagInfo> tags() {
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            Native.check((int) Native.H.tags.invokeExact(handle, out));
            MemorySegment list = out.get(ADDRESS, 0);
            try {
                long n = (long) Native.H.tag_list_len.invokeExact(list);
                MemorySegment t = a.allocate(Native.TAG_INFO);
                List<TagInfo> tags = new ArrayList<>((int) n);
                for (long i = 0; i < n; i++) {
                    Native.check((int) Native.H.tag_list_get.invokeExact(list, i, t));
                    tags.add(new TagInfo(Native.cString(t.get(ADDRESS, 0)), Domain.of(t.get(JAVA_INT, 8)),
                            readMembers(t.get(ADDRESS, 16), t.get(JAVA_LONG, 24)),
                            readMembers(t.get(ADDRESS, 32), t.get(JAVA_LONG, 40))));
                }
                return Collections.unmodifiableList(tags);
            } finally {
                Native.H.tag_list_free.invokeExact(list);
            }
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    /** The nodes the daemon knows, this one first. */
    public List<NodeInfo> nodes() {
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            Native.check((int) Native.H.nodes.invokeExact(handle, out));
            MemorySegment list = out.get(ADDRESS, 0);
            try {
                long n = (long) Native.H.node_list_len.invokeExact(list);
                MemorySegment t = a.allocate(Native.NODE_INFO);
                List<NodeInfo> nodes = new ArrayList<>((int) n);
                for (long i = 0; i < n; i++) {
                    Native.check((int) Native.H.node_list_get.invokeExact(list, i, t));
                    byte[] addr = t.asSlice(0, 16).toArray(JAVA_BYTE);
                    int state = t.get(JAVA_INT, 24);
                    long heard = t.get(JAVA_LONG, 32);
                    nodes.add(new NodeInfo(address(addr), Native.cString(t.get(ADDRESS, 16)),
                            NodeInfo.State.values()[Math.min(2, Math.max(0, state))], heard == -1L ? -1 : heard,
                            Native.cString(t.get(ADDRESS, 40))));
                }
                return Collections.unmodifiableList(nodes);
            } finally {
                Native.H.node_list_free.invokeExact(list);
            }
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    private static InetAddress address(byte[] b) {
        try {
            return InetAddress.getByAddress(b);
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }

    // ---------------------------------------------------------- history ---

    /**
     * Pulls messages from a tag's history (see {@link #setHistory}), oldest
     * first: from this node's daemon if it keeps one, else from the fullest
     * history a live peer keeps.
     */
    public List<Message> pull(String name, HistoryQuery q) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(q, "query");
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            Native.check((int) Native.H.pull.invokeExact(handle, a.allocateFrom(name), q.toNative(a), out));
            MemorySegment list = out.get(ADDRESS, 0);
            try {
                long n = (long) Native.H.message_list_len.invokeExact(list);
                MemorySegment v = a.allocate(Native.MESSAGE_VIEW);
                List<Message> msgs = new ArrayList<>((int) n);
                for (long i = 0; i < n; i++) {
                    Native.check((int) Native.H.message_list_get.invokeExact(list, i, v));
                    long len = v.get(JAVA_LONG, 8);
                    byte[] payload = len == 0 ? new byte[0]
                            : v.get(ADDRESS, 0).reinterpret(len).toArray(JAVA_BYTE);
                    msgs.add(new Message(payload, v.get(JAVA_LONG, 16), Sender.read(v, 24),
                            instant(v.get(JAVA_LONG, 48))));
                }
                return Collections.unmodifiableList(msgs);
            } finally {
                Native.H.message_list_free.invokeExact(list);
            }
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    // ------------------------------------------------------------- misc ---

    /** This process as the daemon sees it (pid and node address). */
    public Sender me() {
        long stamp = enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(Native.SENDER);
            Native.check((int) Native.H.client_me.invokeExact(handle, s));
            return Sender.read(s, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    /** Checks the daemon answers. */
    public void ping() {
        long stamp = enter();
        try {
            Native.check((int) Native.H.ping.invokeExact(handle));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit(stamp);
        }
    }

    @Override
    public String toString() {
        return closed ? "Client[closed]" : "Client";
    }
}
