package dev.tagwire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** Lossless delivery, history, and the tables (senders, receivers, tags, nodes). */
class DeliveryTest {
    private static final ValueLayout.OfLong LE = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    @Test
    void aLosslessSubscriberMissesNothingFromAFlatOutPublisherThread() throws Exception {
        TestDaemon d = TestDaemon.shared();
        final int n = 20_000;
        try (Client c = d.connect(); Arena arena = Arena.ofConfined()) {
            String tag = TestDaemon.uniqueTag("lossless");
            c.createTag(tag, Domain.GLOBAL, TagParams.DEFAULT.withRing(64, 0));
            try (Subscriber sub = c.subscribe(tag, new SubscribeOptions().lossless())) {
                AtomicReference<Throwable> failed = new AtomicReference<>();
                Thread writer = Thread.ofPlatform().start(() -> {
                    try (Client w = d.connect(); Publisher pub = w.publisher(tag); Arena a = Arena.ofConfined()) {
                        pub.setSendTimeout(Duration.ofSeconds(10));
                        MemorySegment buf = a.allocate(8);
                        for (long i = 0; i < n; i++) {
                            buf.set(LE, 0, i);
                            pub.send(buf);
                        }
                    } catch (Throwable t) {
                        failed.set(t);
                    }
                });
                MemorySegment buf = arena.allocate(64);
                for (long i = 0; i < n; i++) {
                    MessageInfo info = sub.receiveInto(buf, Duration.ofSeconds(10));
                    assertEquals(8, info.length());
                    assertEquals(i, buf.get(LE, 0));
                    assertEquals(i + 1, info.seq());
                }
                writer.join();
                assertEquals(null, failed.get());
                assertEquals(0, sub.lost());
                assertEquals(n, sub.received());
            }
        }
    }

    @Test
    void historyIsPulledAndHandedToALateJoiner() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("history");
            c.createTag(tag, Domain.GLOBAL, TagParams.keeping(50));
            try (Publisher pub = c.publisher(tag)) {
                for (int i = 1; i <= 10; i++) {
                    pub.send(Integer.toString(i));
                }
                List<Message> past = c.pull(tag, HistoryQuery.last(3));
                assertEquals(3, past.size());
                assertEquals("8", past.get(0).text());
                assertEquals("10", past.get(2).text());
                assertEquals(10, past.get(2).seq());
                assertEquals(ProcessHandle.current().pid(), past.get(2).sender().pid());
                assertEquals(2, c.pull(tag, HistoryQuery.since(9)).size());
                List<Message> all = c.pull(tag, HistoryQuery.between(past.get(0).timestamp(), past.get(2).timestamp()));
                assertEquals(3, all.size(), "a time range");
                try (Subscriber late = c.subscribeWithHistory(tag, new SubscribeOptions(), HistoryQuery.last(2))) {
                    pub.send("11");
                    assertEquals("9", late.receive(Duration.ofSeconds(1)).text());
                    assertEquals("10", late.receive(Duration.ofSeconds(1)).text());
                    assertEquals("11", late.receive(Duration.ofSeconds(1)).text(), "then live, no gap, no duplicate");
                }
            }
            // A history set after the tag was made.
            String other = TestDaemon.uniqueTag("set-history");
            c.createTag(other);
            c.setHistory(other, 5);
            try (Publisher pub = c.publisher(other)) {
                for (int i = 0; i < 8; i++) {
                    pub.send("m" + i);
                }
            }
            List<Message> kept = c.pull(other, HistoryQuery.last(100));
            assertEquals(5, kept.size());
            assertEquals("m7", kept.get(4).text());
        }
    }

    @Test
    void sendersReceiversTagsAndNodesAreListed() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("members");
            c.createTag(tag, Domain.LOCAL);
            assertTrue(c.senders(tag).isEmpty());
            try (Publisher pub = c.publisher(tag); Subscriber s1 = c.subscribe(tag); Subscriber s2 = c.subscribe(tag)) {
                List<Member> senders = c.senders(tag);
                assertEquals(1, senders.size());
                assertEquals(ProcessHandle.current().pid(), senders.get(0).who().pid());
                assertNotNull(senders.get(0).since());
                List<Member> receivers = c.receivers(tag);
                assertEquals(2, receivers.size());
                assertTrue(receivers.stream().allMatch(m -> m.who().pid() == ProcessHandle.current().pid()));
                TagInfo info = c.tags().stream().filter(t -> t.name().equals(tag)).findFirst().orElseThrow();
                assertEquals(Domain.LOCAL, info.domain());
                assertEquals(1, info.senders().size());
                assertEquals(2, info.receivers().size());
                List<NodeInfo> nodes = c.nodes();
                assertFalse(nodes.isEmpty());
                assertEquals(NodeInfo.State.UP, nodes.get(0).state());
                assertEquals(c.me().node(), nodes.get(0).node());
                c.ping();
            }
            assertTrue(c.senders(tag).isEmpty(), "a closed publisher releases its send access");
            assertTrue(c.receivers(tag).isEmpty(), "a closed subscriber unsubscribes");
            // More members than the first guess of the list's size.
            try (Client c2 = d.connect()) {
                Subscriber[] many = new Subscriber[12];
                for (int i = 0; i < many.length; i++) {
                    many[i] = c2.subscribe(tag);
                }
                assertEquals(12, c.receivers(tag).size());
                for (Subscriber s : many) {
                    s.close();
                }
            }
        }
    }
}
