package dev.tagwire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Each error kind: its exception class, kind() and the library's message. */
class ErrorsTest {
    @Test
    void everyStatusMapsToItsOwnClassAndKind() {
        for (TagwireException.Kind k : TagwireException.Kind.values()) {
            TagwireException e = TagwireException.of(k.code(), "what happened", 3, 7);
            assertEquals(k, e.kind());
            assertEquals("what happened", e.getMessage());
            assertEquals(TagwireException.class, e.getClass().getSuperclass(), "a subclass per kind");
            assertEquals("ERR_" + k.name(), e.kindName());
            assertEquals(e.kindName(), Native.statusName(k.code()), "the names are the C ABI's");
        }
        assertEquals(3, ((TagwireException.Overflowed) TagwireException.of(9, "", 3, 7)).lost());
        assertEquals(7, ((TagwireException.BufferTooSmall) TagwireException.of(19, "", 3, 7)).needed());
        assertInstanceOf(TagwireException.ReceiveTimeout.class, TagwireException.of(12, "", 0, 0));
        TagwireException unknown = TagwireException.of(99, "x", 0, 0);
        assertEquals(TagwireException.Kind.INTERNAL, unknown.kind());
        assertTrue(unknown.getMessage().contains("99"));
    }

    @Test
    void badNamesAndMissingTagsAreTheirKinds() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            var bad = assertThrows(TagwireException.InvalidName.class, () -> c.publisher("no-slash"));
            assertEquals(TagwireException.Kind.INVALID_NAME, bad.kind());
            assertTrue(!bad.getMessage().isEmpty());
            var missing = assertThrows(TagwireException.UnknownTag.class,
                    () -> c.publisher(TestDaemon.uniqueTag("missing")));
            assertTrue(missing.getMessage().contains("create it first"), missing.getMessage());
            var sub = assertThrows(TagwireException.class, () -> c.subscribe(TestDaemon.uniqueTag("missing")));
            assertEquals(TagwireException.Kind.UNKNOWN_TAG, sub.kind());
            assertEquals("ERR_UNKNOWN_TAG", sub.kindName());
            // Deeper than the ring: refused, not silently cut.
            String small = TestDaemon.uniqueTag("small-ring");
            c.createTag(small, Domain.LOCAL, TagParams.DEFAULT.withRing(16, 0));
            var deep = assertThrows(TagwireException.DepthTooLarge.class,
                    () -> c.subscribe(small, new SubscribeOptions().depth(17)));
            assertEquals(TagwireException.Kind.DEPTH_TOO_LARGE, deep.kind());
            assertTrue(deep.getMessage().contains("16"), deep.getMessage());
            c.subscribe(small, new SubscribeOptions().depth(16)).close();
            // Unset, the depth fits the ring; 64 asked for is checked like any.
            c.subscribe(small).close();
            assertThrows(TagwireException.DepthTooLarge.class,
                    () -> c.subscribe(small, new SubscribeOptions().depth(64)));
        }
    }

    @Test
    void noDaemonIsDaemonUnreachableSayingHowToStartOne() {
        TestDaemon.assumeTagwire();
        var e = assertThrows(TagwireException.DaemonUnreachable.class, () -> Client.connect(
                ClientOptions.defaults().socket("/nonexistent/tagwire.sock").autostart(false)));
        assertTrue(e.getMessage().contains("tagwire daemon"), e.getMessage());
        assertEquals(TagwireException.Kind.DAEMON_UNREACHABLE, e.kind());
    }

    @Test
    void timeoutsWaitTheirTimeAndNoLonger() throws Exception {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("timeout");
            c.createTag(tag, Domain.LOCAL);
            try (Subscriber sub = c.subscribe(tag); Publisher pub = c.publisher(tag)) {
                long t0 = System.nanoTime();
                var e = assertThrows(TagwireException.ReceiveTimeout.class, () -> sub.receive(Duration.ofMillis(50)));
                long ms = (System.nanoTime() - t0) / 1_000_000;
                assertTrue(ms >= 49 && ms < 2000, "waited " + ms + " ms for 50");
                assertEquals(TagwireException.Kind.TIMEOUT, e.kind());
                t0 = System.nanoTime();
                assertThrows(TagwireException.ReceiveTimeout.class, () -> sub.receive(Duration.ZERO));
                assertTrue(System.nanoTime() - t0 < 500_000_000L, "a poll does not wait");
                // Longer than one wait slice: the whole timeout, then ReceiveTimeout.
                t0 = System.nanoTime();
                assertThrows(TagwireException.ReceiveTimeout.class, () -> sub.receive(Duration.ofMillis(450)));
                ms = (System.nanoTime() - t0) / 1_000_000;
                assertTrue(ms >= 449 && ms < 3000, "waited " + ms + " ms for 450");
                // For ever: a message sent later (across several slices) is received.
                Thread later = Thread.ofPlatform().start(() -> {
                    TestDaemon.sleep(500);
                    pub.send("late");
                });
                assertEquals("late", sub.receive(null).text());
                later.join();
            }
        }
    }

    @Test
    void aDestroyedTagWakesABlockedReceiverAndStopsSenders() throws Exception {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("destroy");
            c.createTag(tag);
            try (Subscriber sub = c.subscribe(tag); Publisher pub = c.publisher(tag)) {
                Thread killer = Thread.ofPlatform().start(() -> {
                    TestDaemon.sleep(100);
                    try (Client k = d.connect()) {
                        k.destroyTag(tag);
                    }
                });
                var e = assertThrows(TagwireException.TagDestroyed.class, () -> sub.receive(Duration.ofSeconds(10)));
                assertEquals(TagwireException.Kind.TAG_DESTROYED, e.kind());
                killer.join();
                long deadline = System.nanoTime() + 5_000_000_000L;
                TagwireException sendError = null;
                while (sendError == null && System.nanoTime() < deadline) {
                    try {
                        pub.send("x");
                        TestDaemon.sleep(10);
                    } catch (TagwireException t) {
                        sendError = t;
                    }
                }
                assertInstanceOf(TagwireException.TagDestroyed.class, sendError);
            }
        }
    }

    @Test
    void anOverflowIsReportedWithTheCountLost() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("overflow");
            c.createTag(tag, Domain.LOCAL);
            try (Subscriber sub = c.subscribe(tag, new SubscribeOptions().depth(4)); Publisher pub = c.publisher(tag)) {
                for (int i = 0; i < 20; i++) {
                    pub.send("x");
                }
                long lost = 0, got = 0;
                for (;;) {
                    try {
                        sub.receive(Duration.ZERO);
                        got++;
                    } catch (TagwireException.Overflowed e) {
                        assertTrue(e.lost() > 0);
                        assertEquals(TagwireException.Kind.OVERFLOWED, e.kind());
                        lost += e.lost();
                    } catch (TagwireException.ReceiveTimeout e) {
                        break;
                    }
                }
                assertEquals(20, lost + got, "every message is received or counted as lost");
                assertTrue(lost > 0);
                assertEquals(lost, sub.lost());
            }
        }
    }

    @Test
    void aMessageOverTheLimitIsTooLargeAndAFullWindowIsWindowFull() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect(); Arena arena = Arena.ofConfined()) {
            String tag = TestDaemon.uniqueTag("limits");
            c.createTag(tag, Domain.LOCAL, TagParams.DEFAULT.withRing(16, 0));
            try (Subscriber sub = c.subscribe(tag, new SubscribeOptions().lossless());
                    Publisher pub = c.publisher(tag)) {
                // One byte over 256 MiB (never read: the length is checked first).
                MemorySegment huge = arena.allocate((256L << 20) + 1);
                var e = assertThrows(TagwireException.TooLarge.class, () -> pub.send(huge));
                assertEquals(TagwireException.Kind.TOO_LARGE, e.kind());
                // A lossless receiver that reads nothing holds the publisher back.
                pub.setSendTimeout(Duration.ofMillis(50));
                TagwireException full = null;
                int sent = 0;
                for (; sent < 10_000 && full == null; sent++) {
                    try {
                        pub.send("x");
                    } catch (TagwireException.WindowFull w) {
                        full = w;
                    }
                }
                assertInstanceOf(TagwireException.WindowFull.class, full, "sent " + sent + " without a full window");
                assertEquals(TagwireException.Kind.WINDOW_FULL, full.kind());
                assertTrue(sub.available());
            }
        }
    }
}
