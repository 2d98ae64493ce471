package dev.tagwire;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.time.Duration;

/**
 * Options of one subscription, chainable, as the Rust
 * {@code SubscribeOptions}: {@code new SubscribeOptions().depth(256).lossless()}.
 * Unset fields keep the library's defaults (depth 64 or a smaller ring's slots, reliable UDP, every
 * sample, filter in this library, blocking receive).
 */
public final class SubscribeOptions {
    private Integer depth;
    private Integer reliability;
    private Integer carrier;
    private Integer every;
    private Integer proxy;
    private byte[] proxyNode;
    private Integer delayBoundUs;
    private Boolean lossless;
    private Long busyPollNs;
    private Boolean exclusive;
    private Long deadlineNs;
    private Long minSeparationNs;
    private Integer priority;
    private Sched sched;

    /** The defaults. */
    public SubscribeOptions() {}

    /** The defaults (same as {@code new SubscribeOptions()}). */
    public static SubscribeOptions defaults() {
        return new SubscribeOptions();
    }

    /**
     * Unread messages kept before the oldest is dropped: at most the tag's ring
     * slots, else {@link TagwireException.DepthTooLarge}. Unset: 64, or the
     * ring's slots when it has fewer.
     */
    public SubscribeOptions depth(int depth) {
        if (depth <= 0) {
            throw new IllegalArgumentException("depth must be positive: " + depth);
        }
        this.depth = depth;
        return this;
    }

    /** Newest data across nodes: never retransmitted, never holds the publisher back (drops counted). */
    public SubscribeOptions bestEffort() {
        this.reliability = 1;
        return this;
    }

    /** Reliable delivery across nodes (the default). */
    public SubscribeOptions reliable() {
        this.reliability = 0;
        return this;
    }

    /** Bring this node's copy over a TCP connection. */
    public SubscribeOptions tcp() {
        this.carrier = 1;
        return this;
    }

    /** Bring this node's copy over UDP multicast (best effort). */
    public SubscribeOptions multicast() {
        this.carrier = 2;
        this.reliability = 1;
        return this;
    }

    /** Receive only the samples whose sequence number is a multiple of {@code n} (0 or 1: all). */
    public SubscribeOptions every(int n) {
        if (n < 0) {
            throw new IllegalArgumentException("every must not be negative: " + n);
        }
        this.every = n;
        return this;
    }

    /** Run the every-n-th filter in this library (the default). */
    public SubscribeOptions proxyAtSubscriber() {
        this.proxy = 0;
        return this;
    }

    /** Run the every-n-th filter in the publishing node's daemon. */
    public SubscribeOptions proxyAtPublisher() {
        this.proxy = 1;
        return this;
    }

    /** Run the every-n-th filter in the daemon of {@code node}. */
    public SubscribeOptions proxyAt(InetAddress node) {
        byte[] b = node.getAddress();
        byte[] v6 = new byte[16];
        if (b.length == 4) {
            v6[10] = (byte) 0xff;
            v6[11] = (byte) 0xff;
            System.arraycopy(b, 0, v6, 12, 4);
        } else {
            System.arraycopy(b, 0, v6, 0, 16);
        }
        this.proxy = 2;
        this.proxyNode = v6;
        return this;
    }

    /** Let the daemons place the filter, within {@code delayBound} ({@code null}: no bound). */
    public SubscribeOptions proxyAuto(Duration delayBound) {
        this.proxy = 3;
        long us = delayBound == null ? 0xffff_ffffL : Math.min(delayBound.toNanos() / 1000, 0xffff_fffeL);
        this.delayBoundUs = (int) us;
        return this;
    }

    /** Lose nothing: hold the publishers back instead (DDS reliable KEEP_ALL). */
    public SubscribeOptions lossless() {
        this.lossless = true;
        this.reliability = 0;
        return this;
    }

    /** Spin this long before sleeping in receive (for latency-critical users with a core to spare). */
    public SubscribeOptions busyPoll(Duration spin) {
        this.busyPollNs = spin.toNanos();
        return this;
    }

    /** Of each instance ({@link Publisher#sendKeyed}), only the strongest live publisher's messages. */
    public SubscribeOptions exclusive() {
        this.exclusive = true;
        return this;
    }

    /**
     * Receives throw a {@link TagwireException} of kind {@code DEADLINE_MISSED}
     * once per {@code period} an instance goes without a message (an
     * exclusive owner then loses the instance).
     */
    public SubscribeOptions deadline(Duration period) {
        this.deadlineNs = positive("deadline", period);
        return this;
    }

    /** The packet class of the datagrams that bring the messages from other nodes (default NORMAL). */
    public SubscribeOptions priority(Priority priority) {
        this.priority = priority.code;
        return this;
    }

    /** A packet class of one's own: the datagrams from other nodes carry DSCP {@code value} (0..63). */
    public SubscribeOptions dscp(int value) {
        if (value < 0 || value > 63) {
            throw new IllegalArgumentException("a DSCP is 0..63: " + value);
        }
        this.priority = 0x80 | value;
        return this;
    }

    /** The scheduling of the threads that bring the messages from other nodes (default other). */
    public SubscribeOptions sched(Sched sched) {
        this.sched = java.util.Objects.requireNonNull(sched, "sched");
        return this;
    }

    /** At most one message per instance per {@code interval}: the newest. */
    public SubscribeOptions minSeparation(Duration interval) {
        this.minSeparationNs = positive("minimum separation", interval);
        return this;
    }

    private static long positive(String what, Duration d) {
        if (d.isNegative() || d.isZero()) {
            throw new IllegalArgumentException(what + " must be positive: " + d);
        }
        return d.toNanos();
    }

    /** The library's {@code tw_subscribe_options} with these changes. */
    MemorySegment toNative(SegmentAllocator alloc) {
        MemorySegment o;
        try {
            o = (MemorySegment) Native.H.subscribe_options_default.invokeExact(alloc);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        if (depth != null) {
            o.set(ValueLayout.JAVA_INT, 0, depth);
        }
        if (reliability != null) {
            o.set(ValueLayout.JAVA_INT, 4, reliability);
        }
        if (carrier != null) {
            o.set(ValueLayout.JAVA_INT, 8, carrier);
        }
        if (every != null) {
            o.set(ValueLayout.JAVA_INT, 12, every);
        }
        if (proxy != null) {
            o.set(ValueLayout.JAVA_INT, 16, proxy);
        }
        if (proxyNode != null) {
            MemorySegment.copy(proxyNode, 0, o, ValueLayout.JAVA_BYTE, 20, 16);
        }
        if (delayBoundUs != null) {
            o.set(ValueLayout.JAVA_INT, 36, delayBoundUs);
        }
        if (lossless != null) {
            o.set(ValueLayout.JAVA_BOOLEAN, 40, lossless);
        }
        if (busyPollNs != null) {
            o.set(ValueLayout.JAVA_LONG, 48, busyPollNs);
        }
        if (exclusive != null) {
            o.set(ValueLayout.JAVA_BOOLEAN, 56, exclusive);
        }
        if (deadlineNs != null) {
            o.set(ValueLayout.JAVA_LONG, 64, deadlineNs);
        }
        if (minSeparationNs != null) {
            o.set(ValueLayout.JAVA_LONG, 72, minSeparationNs);
        }
        if (priority != null) {
            o.set(ValueLayout.JAVA_INT, 80, priority);
        }
        if (sched != null) {
            o.set(ValueLayout.JAVA_INT, 84, sched.code);
        }
        return o;
    }

    @Override
    public String toString() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment o = toNative(a);
            return "SubscribeOptions[depth=" + o.get(ValueLayout.JAVA_INT, 0)
                    + ", reliability=" + (o.get(ValueLayout.JAVA_INT, 4) == 0 ? "reliable" : "best-effort")
                    + ", carrier=" + new String[] {"udp", "tcp", "multicast"}[Math.min(2, o.get(ValueLayout.JAVA_INT, 8))]
                    + ", every=" + o.get(ValueLayout.JAVA_INT, 12)
                    + ", lossless=" + o.get(ValueLayout.JAVA_BOOLEAN, 40)
                    + ", busyPollNs=" + o.get(ValueLayout.JAVA_LONG, 48)
                    + ", priority=" + o.get(ValueLayout.JAVA_INT, 80)
                    + ", sched=0x" + Integer.toHexString(o.get(ValueLayout.JAVA_INT, 84)) + "]";
        }
    }
}
