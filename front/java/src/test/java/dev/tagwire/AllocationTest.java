package dev.tagwire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The steady state of receiveInto allocates nothing: 100k send + receiveInto
 * round trips on one thread, measured with the thread's allocated-bytes
 * counter, after a warm-up so that the JIT has compiled the path.
 */
class AllocationTest {
    private static final Duration WAIT = Duration.ofSeconds(5);
    private static final int N = 100_000;
    /** Far below one byte per message: a per-call allocation (>= 16 B) would be >= 1.6 MB. */
    private static final long BOUND = 64 * 1024;

    @Test
    void receiveIntoANativeSegmentAllocatesNothingPerMessage() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect(); Arena arena = Arena.ofConfined()) {
            String tag = TestDaemon.uniqueTag("alloc");
            c.createTag(tag, Domain.LOCAL);
            try (Subscriber sub = c.subscribe(tag); Publisher pub = c.publisher(tag)) {
                MemorySegment payload = arena.allocate(64).fill((byte) 1);
                MemorySegment buf = arena.allocate(256);
                loopSegment(pub, sub, payload, buf, 30_000); // warm-up
                long before = allocated();
                long sum = loopSegment(pub, sub, payload, buf, N);
                long bytes = allocated() - before;
                System.out.println("allocation: " + N + " receiveInto(MemorySegment) calls allocated " + bytes + " bytes");
                assertEquals(64L * N, sum);
                assertTrue(bytes < BOUND, N + " receives allocated " + bytes + " bytes");
            }
        }
    }

    @Test
    void receiveIntoADirectByteBufferAllocatesNothingPerMessage() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("alloc-bb");
            c.createTag(tag, Domain.LOCAL);
            try (Subscriber sub = c.subscribe(tag); Publisher pub = c.publisher(tag)) {
                ByteBuffer payload = ByteBuffer.allocateDirect(32);
                ByteBuffer buf = ByteBuffer.allocateDirect(256);
                loopBuffer(pub, sub, payload, buf, 30_000);
                long before = allocated();
                long sum = loopBuffer(pub, sub, payload, buf, N);
                long bytes = allocated() - before;
                System.out.println("allocation: " + N + " receiveInto(ByteBuffer) calls allocated " + bytes + " bytes");
                assertEquals(32L * N, sum);
                assertTrue(bytes < BOUND, N + " receives allocated " + bytes + " bytes");
            }
        }
    }

    private static long loopSegment(Publisher pub, Subscriber sub, MemorySegment payload, MemorySegment buf, int n) {
        long sum = 0;
        for (int i = 0; i < n; i++) {
            pub.send(payload);
            sum += sub.receiveInto(buf, WAIT).length();
        }
        return sum;
    }

    private static long loopBuffer(Publisher pub, Subscriber sub, ByteBuffer payload, ByteBuffer buf, int n) {
        long sum = 0;
        for (int i = 0; i < n; i++) {
            pub.send(payload);
            sum += sub.receiveInto(buf, WAIT).length();
        }
        return sum;
    }

    private static long allocated() {
        var mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        return mx.getThreadAllocatedBytes(Thread.currentThread().threadId());
    }
}
