package dev.tagwire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.time.Instant;

/**
 * Which messages of a tag's history {@link Client#pull} and
 * {@link Client#subscribeWithHistory} ask for: the last n, those from a
 * sequence number on, or those sent within a time range.
 */
public final class HistoryQuery {
    private final int kind;
    private final long a;
    private final long b;

    private HistoryQuery(int kind, long a, long b) {
        this.kind = kind;
        this.a = a;
        this.b = b;
    }

    /** The last {@code n} messages. */
    public static HistoryQuery last(long n) {
        if (n < 0) {
            throw new IllegalArgumentException("a count is not negative: " + n);
        }
        return new HistoryQuery(0, n, 0);
    }

    /** The messages whose sequence number is at least {@code seq}. */
    public static HistoryQuery since(long seq) {
        return new HistoryQuery(1, seq, 0);
    }

    /** The messages sent within {@code [fromNs, toNs]}, nanoseconds since the Unix epoch. */
    public static HistoryQuery between(long fromNs, long toNs) {
        return new HistoryQuery(2, fromNs, toNs);
    }

    /** The messages sent within {@code [from, to]}. */
    public static HistoryQuery between(Instant from, Instant to) {
        return between(epochNanos(from), epochNanos(to));
    }

    static long epochNanos(Instant t) {
        return Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1_000_000_000L), t.getNano());
    }

    MemorySegment toNative(SegmentAllocator alloc) {
        MemorySegment q = alloc.allocate(Native.HISTORY_QUERY);
        q.set(ValueLayout.JAVA_INT, 0, kind);
        q.set(ValueLayout.JAVA_LONG, 8, a);
        q.set(ValueLayout.JAVA_LONG, 16, b);
        return q;
    }

    @Override
    public String toString() {
        return switch (kind) {
            case 0 -> "last(" + a + ")";
            case 1 -> "since(" + a + ")";
            default -> "between(" + a + ", " + b + ")";
        };
    }
}
