package dev.tagwire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemoryLayout.PathElement;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;

/** Keyed messages from Java: keys, states and strength; exclusive ownership and deadlines. */
class InstancesTest {
    private static final Duration SECOND = Duration.ofSeconds(1);

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static byte[] key16(String s) {
        return Arrays.copyOf(b(s), 16);
    }

    @Test
    void theLayoutsMatchTheCStructs() {
        // The same offsets the C++ suite checks with offsetof.
        assertEquals(80, Native.MESSAGE_INFO.byteSize());
        assertEquals(Native.INFO_KEY, Native.MESSAGE_INFO.byteOffset(PathElement.groupElement("key")));
        assertEquals(Native.INFO_HAS_KEY, Native.MESSAGE_INFO.byteOffset(PathElement.groupElement("has_key")));
        assertEquals(Native.INFO_STATE, Native.MESSAGE_INFO.byteOffset(PathElement.groupElement("state")));
        assertEquals(Native.INFO_STRENGTH, Native.MESSAGE_INFO.byteOffset(PathElement.groupElement("strength")));
        assertEquals(88, Native.SUBSCRIBE_OPTIONS.byteSize());
        assertEquals(80, Native.SUBSCRIBE_OPTIONS.byteOffset(PathElement.groupElement("priority")));
        assertEquals(84, Native.SUBSCRIBE_OPTIONS.byteOffset(PathElement.groupElement("sched")));
        assertEquals(56, Native.SUBSCRIBE_OPTIONS.byteOffset(PathElement.groupElement("exclusive")));
        assertEquals(64, Native.SUBSCRIBE_OPTIONS.byteOffset(PathElement.groupElement("deadline_ns")));
        assertEquals(72, Native.SUBSCRIBE_OPTIONS.byteOffset(PathElement.groupElement("min_separation_ns")));
    }

    @Test
    void keysStatesAndStrengthReachTheSubscriber() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("keyed");
            c.createTag(tag);
            try (Subscriber sub = c.subscribe(tag); Publisher pub = c.publisher(tag)) {
                pub.send("plain");
                pub.sendKeyed(b("robot-7"), b("pose"));
                pub.setStrength(OptionalInt.of(30));
                pub.sendKeyed(b("robot-8"), b("twist"));
                pub.dispose(b("robot-7"));
                pub.unregister(b("robot-8"));

                Message m = sub.receive(SECOND);
                assertEquals(Instance.NONE, m.instance());
                assertNull(m.instance().key());
                m = sub.receive(SECOND);
                assertEquals("pose", m.text());
                assertEquals(new Instance(key16("robot-7"), Instance.State.ALIVE, OptionalInt.empty()), m.instance());
                m = sub.receive(SECOND);
                assertEquals(new Instance(key16("robot-8"), Instance.State.ALIVE, OptionalInt.of(30)), m.instance());
                m = sub.receive(SECOND);
                assertEquals(0, m.payload().length);
                assertEquals(Instance.State.DISPOSED, m.instance().state());
                assertArrayEquals(key16("robot-7"), m.instance().key());
                m = sub.receive(SECOND);
                assertEquals(Instance.State.UNREGISTERED, m.instance().state());
                assertEquals(OptionalInt.of(30), m.instance().strength());
            }
        }
    }

    @Test
    void anExclusiveSubscriberTakesEachInstanceFromItsStrongestPublisher() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("owned");
            c.createTag(tag);
            try (Subscriber sub = c.subscribe(tag, new SubscribeOptions().exclusive());
                    Publisher weak = c.publisher(tag);
                    Publisher strong = c.publisher(tag)) {
                weak.setStrength(OptionalInt.of(10));
                strong.setStrength(OptionalInt.of(20));
                weak.sendKeyed(b("a"), b("weak-1"));
                strong.sendKeyed(b("a"), b("strong-1"));
                weak.sendKeyed(b("a"), b("weak-2")); // not the owner: dropped
                strong.unregister(b("a"));
                weak.sendKeyed(b("a"), b("weak-3"));
                assertEquals("weak-1", sub.receive(SECOND).text());
                assertEquals("strong-1", sub.receive(SECOND).text());
                assertEquals(Instance.State.UNREGISTERED, sub.receive(SECOND).instance().state());
                assertEquals("weak-3", sub.receive(SECOND).text());
                assertThrows(TagwireException.ReceiveTimeout.class, () -> sub.receive(Duration.ofMillis(200)));
            }
        }
    }

    @Test
    void aPublisherIsToldWhichInstancesItLeftPastItsOfferedDeadline() throws InterruptedException {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("offered");
            c.createTag(tag);
            try (Publisher pub = c.publisher(tag)) {
                assertTrue(pub.missedDeadlines().isEmpty());
                pub.offerDeadline(Duration.ofMillis(50));
                long t0 = System.nanoTime();
                pub.sendKeyed(b("quiet"), b("q"));
                while (System.nanoTime() - t0 < 180_000_000L) {
                    pub.sendKeyed(b("busy"), b("b"));
                    Thread.sleep(10);
                }
                var missed = pub.missedDeadlines();
                // At most one per whole period gone by (fewer if this thread was
                // held up past a period: the exact count is a Rust unit test's).
                long periods = (System.nanoTime() - t0) / 50_000_000L;
                assertTrue(missed.size() >= 1 && missed.size() <= periods,
                        "missed " + missed.size() + " in " + periods + " periods");
                for (byte[] k : missed) {
                    assertArrayEquals(key16("quiet"), k);
                }
                pub.offerDeadline(null);
                assertTrue(pub.missedDeadlines().isEmpty());
            }
        }
    }

    @Test
    void aMissedDeadlineIsThrownAndTheSubscriptionGoesOn() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("deadline");
            c.createTag(tag);
            try (Subscriber sub = c.subscribe(tag, new SubscribeOptions().deadline(Duration.ofMillis(200)));
                    Publisher pub = c.publisher(tag)) {
                pub.sendKeyed(b("quiet"), b("1"));
                assertEquals("1", sub.receive(Duration.ofSeconds(5)).text());
                long t0 = System.nanoTime();
                assertThrows(TagwireException.DeadlineMissed.class, () -> sub.receive(Duration.ofSeconds(5)));
                assertTrue(System.nanoTime() - t0 >= 150_000_000L);
                pub.sendKeyed(b("quiet"), b("2"));
                assertEquals("2", sub.receive(Duration.ofSeconds(5)).text());
            }
        }
        assertThrows(IllegalArgumentException.class, () -> new SubscribeOptions().deadline(Duration.ZERO));
    }
}
