package dev.tagwire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Instant;

/**
 * What {@link Subscriber#receiveInto} returns beside the payload: a view of
 * the subscriber's own {@code tw_message_info}, reused by every receive (so a
 * receive allocates nothing). Its values are those of the last receive and
 * change with the next one: call {@link #copy()} to keep them. The primitive
 * accessors ({@link #length()}, {@link #seq()}, {@link #senderPid()},
 * {@link #timestampNanos()}) allocate nothing either.
 */
public final class MessageInfo {
    private final MemorySegment info;

    MessageInfo(MemorySegment info) {
        this.info = info;
    }

    /** The payload's length, bytes. */
    public int length() {
        return (int) info.get(ValueLayout.JAVA_LONG, Native.INFO_LEN);
    }

    /** The publisher's sequence number. */
    public long seq() {
        return info.get(ValueLayout.JAVA_LONG, Native.INFO_SEQ);
    }

    /** The sending process's id. */
    public long senderPid() {
        return Integer.toUnsignedLong(info.get(ValueLayout.JAVA_INT, Native.INFO_PID));
    }

    /** Who sent it (allocates). */
    public Sender sender() {
        return Sender.read(info, Native.INFO_PID);
    }

    /** When it was sent, nanoseconds since the Unix epoch (the publisher's clock). */
    public long timestampNanos() {
        return info.get(ValueLayout.JAVA_LONG, Native.INFO_TS);
    }

    /** When it was sent (allocates). */
    public Instant timestamp() {
        long ns = timestampNanos();
        return Instant.ofEpochSecond(Long.divideUnsigned(ns, 1_000_000_000L), Long.remainderUnsigned(ns, 1_000_000_000L));
    }

    /** The instance: key, state, strength (allocates). */
    public Instance instance() {
        byte[] key = info.get(ValueLayout.JAVA_BOOLEAN, Native.INFO_HAS_KEY)
                ? info.asSlice(Native.INFO_KEY, 16).toArray(ValueLayout.JAVA_BYTE)
                : null;
        java.util.OptionalInt strength = info.get(ValueLayout.JAVA_BOOLEAN, Native.INFO_HAS_STRENGTH)
                ? java.util.OptionalInt.of(info.get(ValueLayout.JAVA_INT, Native.INFO_STRENGTH))
                : java.util.OptionalInt.empty();
        return new Instance(key, Instance.State.of(info.get(ValueLayout.JAVA_BYTE, Native.INFO_STATE)), strength);
    }

    /** A copy that later receives leave alone. */
    public MessageInfo copy() {
        MemorySegment c = MemorySegment.ofArray(new long[(int) (Native.MESSAGE_INFO.byteSize() / 8)]);
        c.copyFrom(info);
        return new MessageInfo(c);
    }

    @Override
    public String toString() {
        return length() + " B seq " + seq() + " from " + sender() + " at " + timestamp();
    }
}
