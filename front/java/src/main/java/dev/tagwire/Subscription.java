package dev.tagwire;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.function.Consumer;

/**
 * A callback subscription: a daemon Java thread that this binding owns loops
 * on the blocking native receive into its own buffer and calls the handler
 * for each message. No native thread calls into the JVM: the library only
 * ever returns from the receive that the Java thread made.
 *
 * <p>Losses to overflow are counted ({@link #lost()}) and the loop goes on;
 * a handler's exception goes to the error handler and the loop goes on; any
 * other failure (the tag destroyed, ...) goes to the error handler and ends
 * the loop ({@link #failure()}). {@link #close()} stops the thread (within
 * 0.1 s) and unsubscribes; it is idempotent.
 */
public final class Subscription implements AutoCloseable {
    private static final long SLICE_NS = 100_000_000L;
    private static final int TIMEOUT = 12, OVERFLOWED = 9, BUFFER_TOO_SMALL = 19;

    private final Subscriber sub;
    private final RawHandler handler;
    private final Consumer<? super Throwable> onError;
    private final Thread thread;
    private volatile boolean stop;
    private volatile long received;
    private volatile long lost;
    private volatile Throwable failure;

    Subscription(Subscriber sub, RawHandler handler, Consumer<? super Throwable> onError) {
        this.sub = sub;
        this.handler = handler;
        this.onError = onError != null ? onError : Subscription::printError;
        this.thread = Thread.ofPlatform()
                .daemon(true)
                .name("tagwire " + sub.tag())
                .unstarted(this::loop);
        this.thread.start();
    }

    static RawHandler adapt(MessageHandler h) {
        return (payload, info) -> h.onMessage(new Message(
                payload.toArray(ValueLayout.JAVA_BYTE), info.seq(), info.sender(), info.timestamp(),
                info.instance()));
    }

    private static void printError(Throwable t) {
        System.err.println("tagwire: subscription: " + t);
        t.printStackTrace();
    }

    private void loop() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(64 * 1024, 16);
            MessageInfo info = sub.info();
            while (!stop) {
                int st;
                sub.enter();
                try {
                    st = sub.receiveStatus(buf, buf.byteSize(), SLICE_NS);
                    if (st != 0 && st != TIMEOUT && st != OVERFLOWED && st != BUFFER_TOO_SMALL) {
                        failure = sub.failure(st);
                        break;
                    }
                    if (st == OVERFLOWED) {
                        lost += sub.lastLost();
                    }
                } finally {
                    sub.exit();
                }
                if (st == BUFFER_TOO_SMALL) {
                    buf = arena.allocate(Math.max(info.length(), buf.byteSize() * 2), 16);
                } else if (st == 0) {
                    received++;
                    try {
                        handler.onMessage(buf.asSlice(0, info.length()), info);
                    } catch (Exception e) {
                        onError.accept(e);
                    }
                }
            }
        } catch (RuntimeException | Error e) {
            if (!stop) {
                failure = e;
            }
        } finally {
            sub.close();
        }
        Throwable f = failure;
        if (f != null && !stop) {
            onError.accept(f);
        }
    }

    /** The thread that runs the handler (owned by this binding). */
    public Thread thread() {
        return thread;
    }

    /** The tag. */
    public String tag() {
        return sub.tag();
    }

    /** True while the loop runs. */
    public boolean isRunning() {
        return thread.isAlive();
    }

    /** Messages handed to the handler so far. */
    public long received() {
        return received;
    }

    /** Messages lost to overflow so far. */
    public long lost() {
        return lost;
    }

    /** What ended the loop, if a failure did (else {@code null}). */
    public Throwable failure() {
        return failure;
    }

    /**
     * Stops the thread and unsubscribes; waits for the thread to end unless
     * called from the handler itself. Idempotent.
     */
    @Override
    public void close() {
        stop = true;
        if (Thread.currentThread() == thread) {
            return;
        }
        boolean interrupted = false;
        while (thread.isAlive()) {
            try {
                thread.join();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public String toString() {
        return "Subscription[" + sub.tag() + ", " + (isRunning() ? "running" : "stopped") + "]";
    }
}
