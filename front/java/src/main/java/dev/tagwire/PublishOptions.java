package dev.tagwire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.util.Objects;

/**
 * What a publisher asks of its node, chainable, as the Rust {@code PublishOptions}: {@code new
 * PublishOptions().priority(Priority.CRITICAL).sched(Sched.fifo(40))}. The packet class is the
 * least that everything its node sends the tag in carries (default normal: the receivers' class
 * alone); the policy the least its node's forwarder of the tag runs at (a real-time one needs
 * the privilege: {@link TagwireException.NotPermitted}); the pacing that of the tag's reliable
 * streams to other nodes ({@link Pacing}).
 */
public final class PublishOptions {
    private int priority;
    private int sched;
    private Pacing pacing = Pacing.DAEMON;

    /** The defaults. */
    public PublishOptions() {}

    /** The packet class. */
    public PublishOptions priority(Priority p) {
        this.priority = Objects.requireNonNull(p, "priority").code;
        return this;
    }

    /** A DSCP of one's own (0..63) as the packet class. */
    public PublishOptions dscp(int value) {
        if (value < 0 || value > 63) {
            throw new IllegalArgumentException("a DSCP is 0..63: " + value);
        }
        this.priority = 0x80 | value;
        return this;
    }

    /** The policy of this node's forwarder of the tag. */
    public PublishOptions sched(Sched s) {
        this.sched = Objects.requireNonNull(s, "sched").code;
        return this;
    }

    /** How the node paces the tag's reliable streams to other nodes. */
    public PublishOptions pacing(Pacing p) {
        this.pacing = Objects.requireNonNull(p, "pacing");
        return this;
    }

    /**
     * A {@code tw_publish_options}: the class, the policy and the pacing as 32-bit codes, then
     * (8-aligned) the fixed pace's rate, 64 bits.
     */
    MemorySegment toNative(SegmentAllocator alloc) {
        MemorySegment o = alloc.allocate(24, 8);
        o.set(ValueLayout.JAVA_INT, 0, priority);
        o.set(ValueLayout.JAVA_INT, 4, sched);
        o.set(ValueLayout.JAVA_INT, 8, pacing.code);
        o.set(ValueLayout.JAVA_LONG, 16, pacing.rate);
        return o;
    }
}
