package dev.tagwire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ReadOnlyBufferException;
import java.time.Duration;

/**
 * A subscription to one tag; {@link #close()} unsubscribes. A receive is a
 * blocking downcall made by the calling Java thread into the library, which
 * copies the message into the caller's buffer: no native thread ever calls
 * into the JVM, and {@link #receiveInto} allocates nothing.
 *
 * <p>Calls from several threads are serialized (the C ABI's subscriber is
 * used by one thread at a time). {@link #close()} may come from any thread,
 * also during a blocked receive, which then throws
 * {@link IllegalStateException} within a fraction of a second.
 */
public final class Subscriber extends Guard {
    /** The longest single wait in the library, so that a close is noticed. */
    static final long SLICE_NS = 200_000_000L;

    /** {@link #receiveStatus}'s status when the subscriber was closed meanwhile. */
    static final int CLOSED_STATUS = -1;

    private static final int TIMEOUT = 12, OVERFLOWED = 9, BUFFER_TOO_SMALL = 19;

    private final String tag;
    private final MemorySegment handle;
    private final MemorySegment infoSeg;
    private final MessageInfo info;
    private MemorySegment scratch;
    private ByteBuffer cachedBuffer;
    private MemorySegment cachedSegment;

    Subscriber(MemorySegment handle, String tag) {
        this.handle = handle;
        this.tag = tag;
        this.infoSeg = Native.malloc(Native.MESSAGE_INFO.byteSize());
        this.info = new MessageInfo(infoSeg);
        this.scratch = MemorySegment.NULL;
    }

    @Override
    String what() {
        return "the subscriber of " + tag;
    }

    /** The tag. */
    public String tag() {
        return tag;
    }

    /**
     * The next message, waiting at most {@code timeout} ({@code null}: for
     * ever, {@link Duration#ZERO}: poll). Messages of any size (up to the
     * library's 256 MiB) are returned whole.
     *
     * @throws TagwireException.ReceiveTimeout nothing came in time
     * @throws TagwireException.Overflowed     messages were dropped ({@code lost()}); receive again
     * @throws TagwireException.TagDestroyed   the tag was destroyed
     * @throws IllegalStateException           the subscriber is (or was meanwhile) closed
     */
    public Message receive(Duration timeout) {
        long t = Native.timeoutNs(timeout);
        enter();
        try {
            scratch(64 * 1024);
            for (;;) {
                int st = receiveStatus(scratch, scratch.byteSize(), t);
                if (st == BUFFER_TOO_SMALL) {
                    // Kept for the next call, which returns it at once.
                    scratch(Math.max(info.length(), scratch.byteSize() * 2));
                    continue;
                }
                if (st != 0) {
                    throw failure(st);
                }
                int len = info.length();
                byte[] payload = scratch.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE);
                return new Message(payload, info.seq(), info.sender(), info.timestamp(), info.instance());
            }
        } finally {
            exit();
        }
    }

    /** The next message, waiting for ever. */
    public Message receive() {
        return receive(null);
    }

    /**
     * Receives the next message into {@code buf} (from its offset 0, at most
     * its size), waiting at most {@code timeout} ({@code null}: for ever).
     * Returns this subscriber's {@link MessageInfo}, overwritten by the next
     * receive, whose {@link MessageInfo#length()} says how many bytes came.
     * A native segment is written in place; nothing is allocated.
     *
     * @throws TagwireException.BufferTooSmall the message is larger than {@code buf}
     *         ({@code needed()} bytes); it is kept, and the next receive returns it
     * @throws TagwireException.ReceiveTimeout nothing came in time
     * @throws TagwireException.Overflowed     messages were dropped ({@code lost()}); receive again
     */
    public MessageInfo receiveInto(MemorySegment buf, Duration timeout) {
        if (buf.isReadOnly()) {
            throw new IllegalArgumentException("a read-only segment cannot receive");
        }
        long t = Native.timeoutNs(timeout);
        enter();
        try {
            int st;
            if (buf.isNative()) {
                st = receiveStatus(buf, buf.byteSize(), t);
            } else {
                MemorySegment s = scratch(buf.byteSize());
                st = receiveStatus(s, buf.byteSize(), t);
                if (st == 0) {
                    MemorySegment.copy(s, 0, buf, 0, info.length());
                }
            }
            if (st != 0) {
                throw failure(st);
            }
            return info;
        } finally {
            exit();
        }
    }

    /**
     * Receives the next message into {@code buf} at its position (at most up
     * to its limit), as {@link #receiveInto(MemorySegment, Duration)}; the
     * buffer's position and limit are left as they were (the message is the
     * {@link MessageInfo#length()} bytes from the position). A direct buffer
     * is written in place and nothing is allocated once the same buffer has
     * been used before.
     */
    public MessageInfo receiveInto(ByteBuffer buf, Duration timeout) {
        if (buf.isReadOnly()) {
            throw new ReadOnlyBufferException();
        }
        long t = Native.timeoutNs(timeout);
        int pos = buf.position();
        int cap = buf.limit() - pos;
        enter();
        try {
            int st;
            if (buf.isDirect()) {
                st = receiveStatus(slice(buf, pos, cap), cap, t);
            } else {
                MemorySegment s = scratch(cap);
                st = receiveStatus(s, cap, t);
                if (st == 0) {
                    MemorySegment.copy(s, ValueLayout.JAVA_BYTE, 0, buf.array(), buf.arrayOffset() + pos, info.length());
                }
            }
            if (st != 0) {
                throw failure(st);
            }
            return info;
        } finally {
            exit();
        }
    }

    /**
     * One receive in slices of at most {@link #SLICE_NS}, without throwing:
     * the {@code tw_status}, or {@link #CLOSED_STATUS}. Called inside a guarded
     * call. {@code timeoutNs} negative: for ever.
     */
    int receiveStatus(MemorySegment buf, long cap, long timeoutNs) {
        if (timeoutNs >= 0 && timeoutNs <= SLICE_NS) {
            return call(buf, cap, timeoutNs);
        }
        // The common case (a message within the first slice) reads no clock.
        int st = call(buf, cap, SLICE_NS);
        if (st != TIMEOUT) {
            return st;
        }
        long deadline = timeoutNs < 0 ? 0 : System.nanoTime() + (timeoutNs - SLICE_NS);
        for (;;) {
            if (closing()) {
                return CLOSED_STATUS;
            }
            long wait = SLICE_NS;
            if (timeoutNs >= 0) {
                wait = Math.max(0, Math.min(SLICE_NS, deadline - System.nanoTime()));
            }
            st = call(buf, cap, wait);
            if (st != TIMEOUT || (timeoutNs >= 0 && wait < SLICE_NS)) {
                return st;
            }
        }
    }

    private int call(MemorySegment buf, long cap, long timeoutNs) {
        try {
            return (int) Native.H.subscriber_receive.invokeExact(handle, buf, cap, timeoutNs, infoSeg);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** The exception for a failed receive (read at once: the message is thread-local). */
    RuntimeException failure(int st) {
        if (st == CLOSED_STATUS) {
            return new IllegalStateException(what() + " was closed during the receive");
        }
        return Native.failure(st, infoSeg.get(ValueLayout.JAVA_LONG, Native.INFO_LOST), info.length());
    }

    /** The info segment's lost count (after an Overflowed status). */
    long lastLost() {
        return infoSeg.get(ValueLayout.JAVA_LONG, Native.INFO_LOST);
    }

    /** The info view the receives fill. */
    MessageInfo info() {
        return info;
    }

    private MemorySegment scratch(long len) {
        if (len > scratch.byteSize()) {
            MemorySegment old = scratch;
            scratch = Native.malloc(Math.max(len, Math.max(4096, scratch.byteSize() * 2)));
            Native.free(old);
        }
        return scratch;
    }

    private MemorySegment slice(ByteBuffer b, int pos, int len) {
        if (b != cachedBuffer) {
            cachedSegment = MemorySegment.ofBuffer(b.duplicate().clear());
            cachedBuffer = b;
        }
        return pos == 0 && len == cachedSegment.byteSize() ? cachedSegment : cachedSegment.asSlice(pos, len);
    }

    /** True when a receive would return at once (a message or a loss report). */
    public boolean available() {
        enter();
        try {
            return (boolean) Native.H.subscriber_available.invokeExact(handle);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit();
        }
    }

    /** Drops every unread message; returns how many. */
    public long purge() {
        return callLong(Native.H.subscriber_purge, handle);
    }

    /** Messages lost to overflow so far. */
    public long lost() {
        return callLong(Native.H.subscriber_lost, handle);
    }

    /** Messages received so far. */
    public long received() {
        return callLong(Native.H.subscriber_received, handle);
    }

    @Override
    void free() {
        try {
            Native.H.subscriber_free.invokeExact(handle);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            Native.free(infoSeg);
            Native.free(scratch);
        }
    }

    @Override
    public String toString() {
        return "Subscriber[" + tag + (isClosed() ? ", closed]" : "]");
    }
}
