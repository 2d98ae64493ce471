package dev.tagwire;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Objects;

/**
 * Send access to one tag; {@link #close()} releases it. Calls from several
 * threads are serialized (the C ABI's publisher is used by one thread at a
 * time). A send copies the payload once into the tag's shared-memory ring,
 * whatever the number of subscribers; a native {@link MemorySegment} or a
 * direct {@link ByteBuffer} is read in place, a {@code byte[]} or heap
 * buffer is first copied into the publisher's own native buffer. A send
 * allocates nothing on the Java heap.
 */
public final class Publisher extends Guard {
    private final String tag;
    private final MemorySegment handle;
    private final MemorySegment seqOut;
    private MemorySegment scratch;
    private ByteBuffer cachedBuffer;
    private MemorySegment cachedSegment;

    Publisher(MemorySegment handle, String tag) {
        this.handle = handle;
        this.tag = tag;
        this.seqOut = Native.malloc(8);
        this.scratch = Native.malloc(4096);
    }

    @Override
    String what() {
        return "the publisher on " + tag;
    }

    /** The tag. */
    public String tag() {
        return tag;
    }

    /** Sends {@code data}; returns its sequence number. */
    public long send(byte[] data) {
        return send(data, 0, data.length);
    }

    /** Sends {@code len} bytes of {@code data} from {@code off}; returns the sequence number. */
    public long send(byte[] data, int off, int len) {
        Objects.checkFromIndexSize(off, len, data.length);
        enter();
        try {
            MemorySegment s = scratch(len);
            MemorySegment.copy(data, off, s, ValueLayout.JAVA_BYTE, 0, len);
            return sendRaw(s, len);
        } finally {
            exit();
        }
    }

    /** Sends the text as UTF-8; returns the sequence number. */
    public long send(String text) {
        return send(text.getBytes(StandardCharsets.UTF_8));
    }

    /**
     * Sends the bytes between the buffer's position and limit (its position
     * and limit are left as they were); returns the sequence number.
     */
    public long send(ByteBuffer data) {
        int pos = data.position();
        int len = data.limit() - pos;
        enter();
        try {
            if (data.isDirect()) {
                return sendRaw(slice(data, pos, len), len);
            }
            MemorySegment s = scratch(len);
            if (data.hasArray()) {
                MemorySegment.copy(data.array(), data.arrayOffset() + pos, s, ValueLayout.JAVA_BYTE, 0, len);
            } else {
                MemorySegment.copy(MemorySegment.ofBuffer(data), 0, s, 0, len);
            }
            return sendRaw(s, len);
        } finally {
            exit();
        }
    }

    /** Sends the whole segment (native: read in place; heap: copied first); returns the sequence number. */
    public long send(MemorySegment data) {
        long len = data.byteSize();
        enter();
        try {
            if (data.isNative()) {
                return sendRaw(data, len);
            }
            MemorySegment s = scratch(len);
            MemorySegment.copy(data, 0, s, 0, len);
            return sendRaw(s, len);
        } finally {
            exit();
        }
    }

    /**
     * Sends {@code length} bytes of {@code data} from {@code offset} (a native
     * segment is read in place, without making a slice); returns the sequence
     * number. For forwarding what {@link Subscriber#receiveInto} wrote.
     */
    public long send(MemorySegment data, long offset, long length) {
        java.util.Objects.checkFromIndexSize(offset, length, data.byteSize());
        if (offset == 0 && length == data.byteSize()) {
            return send(data);
        }
        enter();
        try {
            if (data.isNative() && offset == 0) {
                return sendRaw(data, length);
            }
            MemorySegment s = scratch(length);
            MemorySegment.copy(data, offset, s, 0, length);
            return sendRaw(s, length);
        } finally {
            exit();
        }
    }

    /**
     * Sends a sample of instance {@code key} (at most 16 bytes name the
     * instance themselves, a longer key its MD5, as a DDS key hash); returns
     * the sequence number. Subscribers read the key in
     * {@link Message#instance()}; exclusive ownership, deadlines and minimum
     * separation apply per instance.
     */
    public long sendKeyed(byte[] key, byte[] data) {
        return keyed(key, data, 0);
    }

    /** Says that instance {@code key} is deleted: subscribers get an empty message, state DISPOSED. */
    public long dispose(byte[] key) {
        return keyed(key, null, 1);
    }

    /** Says that this publisher writes instance {@code key} no more: an exclusive owner gives it up at once. */
    public long unregister(byte[] key) {
        return keyed(key, null, 2);
    }

    /**
     * This publisher's ownership strength, carried by every message from now
     * on (empty: none, counted as 0): a subscriber with
     * {@link SubscribeOptions#exclusive()} takes each instance from its
     * strongest live publisher only.
     */
    public void setStrength(java.util.OptionalInt strength) {
        enter();
        try {
            Native.check((int) Native.H.publisher_set_strength.invokeExact(
                    handle, strength.isPresent(), strength.orElse(0)));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit();
        }
    }

    /**
     * Offers a deadline: each instance this publisher writes (messages
     * without a key are one instance) should get a sample at least every
     * {@code period} ({@code null}: none). {@link #missedDeadlines()} says
     * which did not.
     */
    public void offerDeadline(Duration period) {
        if (period != null && (period.isNegative() || period.isZero())) {
            throw new IllegalArgumentException("deadline must be positive: " + period);
        }
        enter();
        try {
            Native.check((int) Native.H.publisher_offer_deadline.invokeExact(
                    handle, period == null ? 0L : period.toNanos()));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit();
        }
    }

    /**
     * The instances this publisher left without a sample for a whole offered
     * deadline period since the last call, one per period missed, oldest
     * first: each its 16-byte key, or an empty array for messages sent
     * without a key.
     */
    public java.util.List<byte[]> missedDeadlines() {
        java.util.List<byte[]> out = new java.util.ArrayList<>();
        enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment key = a.allocate(16);
            MemorySegment hasKey = a.allocate(ValueLayout.JAVA_BOOLEAN);
            MemorySegment missed = a.allocate(ValueLayout.JAVA_BOOLEAN);
            for (;;) {
                Native.check((int) Native.H.publisher_missed_deadline.invokeExact(handle, key, hasKey, missed));
                if (!missed.get(ValueLayout.JAVA_BOOLEAN, 0)) {
                    return out;
                }
                out.add(hasKey.get(ValueLayout.JAVA_BOOLEAN, 0) ? key.toArray(ValueLayout.JAVA_BYTE) : new byte[0]);
            }
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit();
        }
    }

    /** {@code op}: 0 send, 1 dispose, 2 unregister. */
    private long keyed(byte[] key, byte[] data, int op) {
        enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment k = a.allocateFrom(ValueLayout.JAVA_BYTE, key);
            Native.check(switch (op) {
                case 0 -> (int) Native.H.publisher_send_keyed.invokeExact(
                        handle, k, (long) key.length,
                        a.allocateFrom(ValueLayout.JAVA_BYTE, data), (long) data.length, seqOut);
                case 1 -> (int) Native.H.publisher_dispose.invokeExact(handle, k, (long) key.length, seqOut);
                default -> (int) Native.H.publisher_unregister.invokeExact(handle, k, (long) key.length, seqOut);
            });
            return seqOut.get(ValueLayout.JAVA_LONG, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit();
        }
    }

    private long sendRaw(MemorySegment data, long len) {
        int st;
        try {
            st = (int) Native.H.publisher_send.invokeExact(handle, data, len, seqOut);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        if (st != 0) {
            throw Native.failure(st);
        }
        return seqOut.get(ValueLayout.JAVA_LONG, 0);
    }

    private MemorySegment scratch(long len) {
        if (len > scratch.byteSize()) {
            MemorySegment old = scratch;
            scratch = Native.malloc(Math.max(len, scratch.byteSize() * 2));
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

    /**
     * How long a send may wait for a full window (a lossless or reliable
     * receiver holding it back) before it fails with
     * {@link TagwireException.WindowFull}, having sent nothing (default 1 s).
     */
    public void setSendTimeout(Duration timeout) {
        long ns = Math.max(0, Native.timeoutNs(timeout));
        if (timeout == null) {
            ns = Long.MAX_VALUE;
        }
        enter();
        try {
            Native.check((int) Native.H.publisher_set_send_timeout.invokeExact(handle, ns));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit();
        }
    }

    /** The sequence number of the last message sent (0 before the first). */
    public long lastSeq() {
        return callLong(Native.H.publisher_last_seq, handle);
    }

    /** The largest message that takes the shared-memory fast path, bytes. */
    public long maxFastMessage() {
        return callLong(Native.H.publisher_max_fast_message, handle);
    }

    @Override
    void free() {
        try {
            Native.H.publisher_free.invokeExact(handle);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            Native.free(seqOut);
            Native.free(scratch);
        }
    }

    @Override
    public String toString() {
        return "Publisher[" + tag + (isClosed() ? ", closed]" : "]");
    }
}
