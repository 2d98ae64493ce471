package dev.tagwire;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Closing: idempotent, use after close throws IllegalStateException, close during a blocked receive. */
class LifecycleTest {
    @Test
    void closeIsIdempotentAndUseAfterCloseThrows() {
        TestDaemon d = TestDaemon.shared();
        Client c = d.connect();
        String tag = TestDaemon.uniqueTag("close");
        c.createTag(tag);
        Publisher pub = c.publisher(tag);
        Subscriber sub = c.subscribe(tag);
        Subscription cb = c.subscribe(tag, null, m -> { });

        pub.close();
        pub.close();
        sub.close();
        sub.close();
        cb.close();
        cb.close();
        assertTrue(c.senders(tag).isEmpty());
        assertTrue(c.receivers(tag).isEmpty());
        try (Arena a = Arena.ofConfined()) {
            for (Executable e : new Executable[] {
                () -> pub.send("x"), () -> pub.send(new byte[1]), () -> pub.send(a.allocate(1)),
                () -> pub.send(ByteBuffer.allocateDirect(1)), pub::lastSeq, pub::maxFastMessage,
                () -> pub.setSendTimeout(Duration.ofSeconds(1)),
                () -> sub.receive(Duration.ZERO), () -> sub.receiveInto(a.allocate(8), Duration.ZERO),
                () -> sub.receiveInto(ByteBuffer.allocateDirect(8), Duration.ZERO),
                sub::available, sub::purge, sub::lost, sub::received,
            }) {
                var ex = assertThrows(IllegalStateException.class, e);
                assertTrue(ex.getMessage().contains("closed"), ex.getMessage());
            }
        }
        c.close();
        c.close();
        for (Executable e : new Executable[] {
            () -> c.createTag(tag), () -> c.destroyTag(tag), () -> c.publisher(tag), () -> c.subscribe(tag),
            () -> c.senders(tag), () -> c.receivers(tag), c::tags, c::nodes, c::me, c::ping,
            () -> c.pull(tag, HistoryQuery.last(1)), () -> c.setHistory(tag, 1),
            () -> c.subscribe(tag, null, m -> { }),
        }) {
            assertThrows(IllegalStateException.class, e);
        }
    }

    @Test
    void publishersAndSubscribersOutliveTheirClient() {
        TestDaemon d = TestDaemon.shared();
        String tag = TestDaemon.uniqueTag("outlive");
        Publisher pub;
        Subscriber sub;
        try (Client c = d.connect()) {
            c.createTag(tag);
            pub = c.publisher(tag);
            sub = c.subscribe(tag);
        }
        try (pub; sub) {
            pub.send("still here");
            assertEquals("still here", sub.receive(Duration.ofSeconds(1)).text());
        }
    }

    @Test
    void closingASubscriberBlockedInReceiveEndsThatReceive() throws Exception {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("close-blocked");
            c.createTag(tag);
            Subscriber sub = c.subscribe(tag);
            AtomicReference<Throwable> outcome = new AtomicReference<>();
            Thread receiver = Thread.ofPlatform().start(() -> {
                try {
                    sub.receive(null);
                } catch (Throwable t) {
                    outcome.set(t);
                }
            });
            TestDaemon.sleep(300);
            assertTrue(receiver.isAlive(), "blocked in receive");
            long t0 = System.nanoTime();
            sub.close();
            receiver.join(Duration.ofSeconds(5));
            assertTrue(System.nanoTime() - t0 < 2_000_000_000L);
            assertInstanceOf(IllegalStateException.class, outcome.get());
            // Unsubscribed once the receive returned.
            long deadline = System.nanoTime() + 2_000_000_000L;
            while (!c.receivers(tag).isEmpty() && System.nanoTime() < deadline) {
                TestDaemon.sleep(10);
            }
            assertTrue(c.receivers(tag).isEmpty());
            assertDoesNotThrow(sub::close);
        }
    }

    @Test
    void aMissingLibraryWouldSayHowToPointAtIt() {
        TestDaemon.assumeTagwire();
        // The library is found; its path is one the loader reports.
        assertTrue(Native.libraryPath().contains("tagwire_c"), Native.libraryPath());
        assertTrue(!Client.version().isEmpty());
    }
}
