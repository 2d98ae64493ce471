package dev.tagwire;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * The life cycle of a native handle used by one thread at a time: calls are
 * serialized (a second thread waits for the first), and {@link #close()} may
 * come from any thread at any time. A close while a call is in progress
 * (a receive blocked in the library) does not free the handle under it: the
 * call notices ({@link #closing()}), returns, and frees it on its way out.
 * Allocates nothing per call; an uncontended call costs two compare-and-sets.
 */
abstract class Guard implements AutoCloseable {
    private static final int IDLE = 0, BUSY = 1, CLOSED = 2, CLOSE_PENDING = 3;

    private final AtomicInteger state = new AtomicInteger(IDLE);

    /** What this is, for messages ("subscriber of /robot/laser"). */
    abstract String what();

    /** Frees the native handle; called exactly once, by no thread in a call. */
    abstract void free();

    /** Starts a call: waits for another thread's call, throws when closed. */
    final void enter() {
        if (state.compareAndSet(IDLE, BUSY)) {
            return;
        }
        // Another thread's call (or closed): wait for it, briefly spinning,
        // then sleeping (a receive may block for a while).
        for (int spins = 0;; spins++) {
            int s = state.get();
            if (s >= CLOSED) {
                throw closed();
            }
            if (s == IDLE && state.compareAndSet(IDLE, BUSY)) {
                return;
            }
            if (spins < 100) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(spins < 1000 ? 10_000 : 1_000_000);
            }
        }
    }

    /** Ends a call; frees the handle if it was closed meanwhile. */
    final void exit() {
        if (!state.compareAndSet(BUSY, IDLE)) {
            state.set(CLOSED);
            free();
        }
    }

    /**
     * One call of a native {@code long f(handle)} (a counter or a getter)
     * between {@link #enter()} and {@link #exit()}.
     */
    final long callLong(MethodHandle f, MemorySegment handle) {
        enter();
        try {
            return (long) f.invokeExact(handle);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            exit();
        }
    }

    /** True when {@link #close()} came during the current call. */
    final boolean closing() {
        return state.get() == CLOSE_PENDING;
    }

    /** True once closed. */
    final boolean isClosed() {
        return state.get() >= CLOSED;
    }

    final IllegalStateException closed() {
        return new IllegalStateException(what() + " is closed");
    }

    /**
     * Releases the handle. Idempotent; safe from any thread. A call in
     * progress on another thread finishes first (a blocked receive returns
     * within a fraction of a second and throws {@link IllegalStateException}).
     */
    @Override
    public void close() {
        for (;;) {
            int s = state.get();
            if (s == IDLE) {
                if (state.compareAndSet(IDLE, CLOSED)) {
                    free();
                    return;
                }
            } else if (s == BUSY) {
                if (state.compareAndSet(BUSY, CLOSE_PENDING)) {
                    return;
                }
            } else {
                return;
            }
        }
    }
}
