package dev.tagwire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

/** Sending and receiving: senders, sequence numbers, buffers of every kind, large messages. */
class PubSubTest {
    private static final Duration SECOND = Duration.ofSeconds(1);

    @Test
    void aMessageArrivesWithOurPidNodeSeqAndTimestamp() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("round");
            assertTrue(c.createTag(tag), "this call created the tag");
            assertFalse(c.createTag(tag), "creating an existing tag is fine, and says so");
            try (Subscriber sub = c.subscribe(tag); Publisher pub = c.publisher(tag)) {
                Instant before = Instant.now();
                assertEquals(1, pub.send("hello from Java"));
                assertEquals(1, pub.lastSeq());
                Message m = sub.receive(SECOND);
                assertEquals("hello from Java", m.text());
                assertEquals(1, m.seq());
                assertEquals(ProcessHandle.current().pid(), m.sender().pid());
                assertEquals(c.me(), m.sender());
                assertEquals(ProcessHandle.current().pid(), c.me().pid());
                assertFalse(m.timestamp().isBefore(before.minusSeconds(1)), m.timestamp() + " vs " + before);
                assertFalse(m.timestamp().isAfter(Instant.now().plusSeconds(1)));
                assertEquals(1, sub.received());
                assertEquals(0, sub.lost());
                assertFalse(sub.available());
                // A node prints as the other APIs print it; a local node is IPv4 here.
                assertEquals(m.sender().pid() + "@" + m.sender().nodeString(), m.sender().toString());
                assertInstanceOf(Inet4Address.class, m.sender().node());
            }
        }
    }

    @Test
    void everyKindOfBufferSendsAndReceives() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect(); Arena arena = Arena.ofConfined()) {
            String tag = TestDaemon.uniqueTag("buffers");
            c.createTag(tag, Domain.LOCAL);
            try (Subscriber sub = c.subscribe(tag, new SubscribeOptions().depth(16));
                    Publisher pub = c.publisher(tag)) {
                byte[] bytes = "0123456789".getBytes(StandardCharsets.US_ASCII);
                pub.send(bytes, 2, 3); // "234"
                ByteBuffer direct = ByteBuffer.allocateDirect(16).put(bytes).flip().position(5);
                pub.send(direct); // "56789"
                assertEquals(5, direct.position(), "a send leaves the buffer's position alone");
                pub.send(ByteBuffer.wrap(bytes, 1, 2)); // "12"
                pub.send(ByteBuffer.wrap(bytes).asReadOnlyBuffer().position(8)); // "89"
                MemorySegment seg = arena.allocateFrom("native", StandardCharsets.US_ASCII);
                pub.send(seg.asSlice(0, 6)); // "native"
                pub.send(MemorySegment.ofArray("heap".getBytes(StandardCharsets.US_ASCII))); // "heap"
                pub.send(seg, 0, 3); // "nat"
                pub.send(new byte[0]); // empty

                MemorySegment into = arena.allocate(64);
                MessageInfo i = sub.receiveInto(into, SECOND);
                assertEquals("234", text(into, i.length()));
                assertEquals(ProcessHandle.current().pid(), i.senderPid());
                assertEquals(1, i.seq());

                ByteBuffer bb = ByteBuffer.allocateDirect(64).position(10);
                i = sub.receiveInto(bb, SECOND);
                assertEquals(5, i.length());
                assertEquals(10, bb.position(), "a receive leaves the buffer's position alone");
                byte[] got = new byte[5];
                bb.get(10, got);
                assertEquals("56789", new String(got, StandardCharsets.US_ASCII));

                ByteBuffer heap = ByteBuffer.allocate(8);
                i = sub.receiveInto(heap, SECOND);
                assertEquals("12", new String(heap.array(), 0, i.length(), StandardCharsets.US_ASCII));

                MemorySegment heapSeg = MemorySegment.ofArray(new byte[8]);
                i = sub.receiveInto(heapSeg, SECOND);
                assertEquals("89", text(heapSeg, i.length()));
                MessageInfo kept = i.copy();

                assertEquals("native", sub.receive(SECOND).text());
                assertEquals("heap", sub.receive(SECOND).text());
                Message nat = sub.receive(SECOND);
                assertEquals("nat", nat.text());
                assertEquals(7, nat.seq());
                Message empty = sub.receive(SECOND);
                assertEquals(0, empty.payload().length);
                assertEquals(0, i.length(), "the info view shows the last receive");
                assertEquals(2, kept.length(), "a copy keeps its values");
                assertEquals(4, kept.seq());
                assertThrows(IllegalArgumentException.class,
                        () -> sub.receiveInto(arena.allocate(8).asReadOnly(), Duration.ZERO));
                assertThrows(java.nio.ReadOnlyBufferException.class,
                        () -> sub.receiveInto(ByteBuffer.allocateDirect(8).asReadOnlyBuffer(), Duration.ZERO));
            }
        }
    }

    private static String text(MemorySegment s, int len) {
        return new String(s.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.US_ASCII);
    }

    @Test
    void aLargeMessageTakesTheBlobPathAndArrivesWhole() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect(); Arena arena = Arena.ofConfined()) {
            String tag = TestDaemon.uniqueTag("large");
            c.createTag(tag);
            try (Subscriber sub = c.subscribe(tag); Publisher pub = c.publisher(tag)) {
                byte[] big = new byte[300 * 1024];
                for (int i = 0; i < big.length; i++) {
                    big[i] = (byte) (i * 31);
                }
                assertTrue(big.length > pub.maxFastMessage(), "300 KiB is over the slot: " + pub.maxFastMessage());
                pub.send(big);
                Message m = sub.receive(Duration.ofSeconds(5));
                assertArrayEquals(big, m.payload());

                // Into a buffer too small: the size needed is reported, and the message kept.
                pub.send(big);
                MemorySegment small = arena.allocate(16);
                var e = assertThrows(TagwireException.BufferTooSmall.class,
                        () -> sub.receiveInto(small, Duration.ofSeconds(5)));
                assertEquals(big.length, e.needed());
                assertEquals(TagwireException.Kind.BUFFER_TOO_SMALL, e.kind());
                assertTrue(e.getMessage().contains(String.valueOf(big.length)), e.getMessage());
                assertTrue(sub.available(), "the message that did not fit is kept");
                MemorySegment fits = arena.allocate(big.length);
                MessageInfo i = sub.receiveInto(fits, Duration.ZERO);
                assertEquals(big.length, i.length());
                assertEquals(2, i.seq());
                assertArrayEquals(big, fits.toArray(ValueLayout.JAVA_BYTE));

                // And through receive(), which grows its own buffer.
                pub.send(big);
                assertThrows(TagwireException.BufferTooSmall.class,
                        () -> sub.receiveInto(ByteBuffer.allocateDirect(10), Duration.ofSeconds(5)));
                assertArrayEquals(big, sub.receive(Duration.ZERO).payload());
            }
        }
    }

    @Test
    void optionsReachTheLibraryEveryNthAndBestEffort() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("every");
            c.createTag(tag);
            try (Subscriber sub = c.subscribe(tag, new SubscribeOptions().every(5).bestEffort().depth(256));
                    Publisher pub = c.publisher(tag)) {
                for (int i = 0; i < 20; i++) {
                    pub.send("x");
                }
                StringBuilder seqs = new StringBuilder();
                while (sub.available()) {
                    seqs.append(sub.receive(Duration.ZERO).seq()).append(' ');
                }
                assertEquals("5 10 15 20 ", seqs.toString());
            }
            assertTrue(new SubscribeOptions().lossless().depth(8).toString().contains("lossless=true"));
        }
    }

    @Test
    void aClientIsSharedByThreads() throws Exception {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("threads");
            c.createTag(tag);
            try (Subscriber sub = c.subscribe(tag, new SubscribeOptions().depth(256))) {
                Thread[] ts = new Thread[4];
                for (int t = 0; t < ts.length; t++) {
                    ts[t] = Thread.ofPlatform().start(() -> {
                        try (Publisher p = c.publisher(tag)) {
                            for (int i = 0; i < 10; i++) {
                                p.send("t");
                            }
                        }
                    });
                }
                for (Thread t : ts) {
                    t.join();
                }
                int n = 0;
                while (sub.available()) {
                    sub.receive(Duration.ZERO);
                    n++;
                }
                assertEquals(40, n);
            }
        }
    }

    @Test
    void aThreadPolicyIsASubscriptionOptionAndABadOneIsRefused() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("sched");
            c.createTag(tag);
            java.util.List<Subscriber> subs = new java.util.ArrayList<>();
            subs.add(c.subscribe(tag, new SubscribeOptions().sched(Sched.other(5))));
            boolean root = "root".equals(System.getProperty("user.name"));
            if (root) {
                subs.add(c.subscribe(tag, new SubscribeOptions().sched(Sched.fifo(10))));
                subs.add(c.subscribe(tag, new SubscribeOptions().sched(Sched.roundRobin(10))));
            } else {
                assertThrows(TagwireException.NotPermitted.class,
                        () -> c.subscribe(tag, new SubscribeOptions().sched(Sched.fifo(10))));
            }
            assertTrue(new SubscribeOptions().sched(Sched.fifo(10)).toString().contains("sched=0x10a"));
            try (Publisher pub = c.publisher(tag)) {
                pub.send("x");
                for (Subscriber s : subs) {
                    assertEquals(1, s.receive(SECOND).seq());
                    s.close();
                }
            }
            assertThrows(IllegalArgumentException.class, () -> Sched.fifo(0));
            assertThrows(IllegalArgumentException.class, () -> Sched.roundRobin(100));
            assertThrows(IllegalArgumentException.class, () -> Sched.other(20));
            assertEquals("other:-3", Sched.other(-3).toString());
        }
    }

    @Test
    void everyPacketClassIsASubscriptionOptionAndABadDscpIsRefused() {
        // (The struct's layout: InstancesTest.theLayoutsMatchTheCStructs.)
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("classes");
            c.createTag(tag);
            java.util.List<Subscriber> subs = new java.util.ArrayList<>();
            for (Priority p : Priority.values()) {
                subs.add(c.subscribe(tag, new SubscribeOptions().priority(p)));
            }
            subs.add(c.subscribe(tag, new SubscribeOptions().dscp(18)));
            assertTrue(new SubscribeOptions().dscp(18).toString().contains("priority=146"));
            try (Publisher pub = c.publisher(tag)) {
                pub.send("x");
                for (Subscriber s : subs) {
                    assertEquals(1, s.receive(SECOND).seq());
                    s.close();
                }
            }
            assertThrows(IllegalArgumentException.class, () -> new SubscribeOptions().dscp(64));
        }
    }

    @Test
    void aSubscriptionsClassChangesAtRunTime() {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("reclass");
            c.createTag(tag);
            try (Subscriber sub = c.subscribe(tag, new SubscribeOptions())) {
                assertEquals(1, c.setChannelQos(tag, Priority.CRITICAL, 0));
                // The class it has already: nothing changes.
                assertEquals(0, c.setChannelQos(tag, Priority.CRITICAL, 0));
                int me = (int) ProcessHandle.current().pid();
                assertEquals(1, c.setChannelDscp(tag, 18, me));
                TagwireException none =
                        assertThrows(TagwireException.class, () -> c.setChannelQos(tag, Priority.HIGH, 1));
                assertEquals(TagwireException.Kind.NOT_SUBSCRIBED, none.kind());
                assertThrows(IllegalArgumentException.class, () -> c.setChannelDscp(tag, 64, 0));
                // The thread policy likewise.
                assertEquals(1, c.setChannelSched(tag, Sched.other(5), 0));
                assertEquals(0, c.setChannelSched(tag, Sched.other(5), me));
                if ("root".equals(System.getProperty("user.name"))) {
                    assertEquals(1, c.setChannelSched(tag, Sched.fifo(10), 0));
                } else {
                    assertThrows(TagwireException.NotPermitted.class,
                            () -> c.setChannelSched(tag, Sched.fifo(10), 0));
                }
                // Whose, on which node, both at once, or one kept.
                assertEquals(1, c.changeChannels(tag, "all", Priority.HIGH, Sched.other(3)));
                assertEquals(0, c.changeChannels(tag, "here", Priority.HIGH, Sched.other(3)));
                assertEquals(1, c.changeChannels(tag, Integer.toString(me), null, Sched.other(4)));
                TagwireException elsewhere = assertThrows(
                        TagwireException.class, () -> c.changeChannels(tag, "1@127.0.0.1", Priority.LOW, null));
                assertEquals(TagwireException.Kind.NOT_SUBSCRIBED, elsewhere.kind());
                // A daemon alone reaches no other node; a choice that is none.
                TagwireException alone = assertThrows(
                        TagwireException.class, () -> c.changeChannels(tag, "@10.99.0.9", Priority.LOW, null));
                assertTrue(alone.getMessage().contains("alone"), alone.getMessage());
                TagwireException bad = assertThrows(
                        TagwireException.class, () -> c.changeChannels(tag, "x@node", Priority.LOW, null));
                assertEquals(TagwireException.Kind.INVALID_ARGUMENT, bad.kind());
                try (Publisher pub = c.publisher(tag)) {
                    pub.send("x");
                    assertEquals(1, sub.receive(SECOND).seq());
                }
                // A publisher's own class and policy.
                PublishOptions classed = new PublishOptions().priority(Priority.CRITICAL).sched(Sched.other(2));
                try (Publisher pub = c.publisher(tag, classed)) {
                    pub.send("y");
                    assertEquals("y", new String(sub.receive(SECOND).payload()));
                }
                assertThrows(IllegalArgumentException.class, () -> new PublishOptions().dscp(64));
                assertThrows(IllegalArgumentException.class, () -> Pacing.fixed(0));
                // A publisher's pacing, and publishers' rights changed at run time: a change to
                // what the publisher already asked changes nothing (the option reached its right).
                try (Publisher paced = c.publisher(tag, new PublishOptions().pacing(Pacing.fixed(2_000_000)))) {
                    assertEquals(0, c.changePacing(tag, "all", Pacing.fixed(2_000_000)));
                    assertEquals(1, c.changePacing(tag, "all", Pacing.ADAPTIVE));
                    assertEquals(0, c.changePacing(tag, Integer.toString(me), Pacing.ADAPTIVE));
                    assertEquals(1, c.changePacing(tag, "here", Pacing.OFF));
                    assertEquals("fixed:5", Pacing.fixed(5).toString());
                    assertEquals(1, c.changePublishers(tag, "all", Priority.CRITICAL, null));
                    assertEquals(0, c.changePublishers(tag, "all", Priority.CRITICAL, Sched.other(0)));
                    TagwireException noone = assertThrows(TagwireException.class,
                            () -> c.changePublishers(tag, "1@127.0.0.1", Priority.LOW, null));
                    assertEquals(TagwireException.Kind.NO_SEND_ACCESS, noone.kind());
                    try (Publisher adaptive = c.publisher(tag, new PublishOptions().pacing(Pacing.ADAPTIVE))) {
                        assertEquals(1, c.changePacing(tag, "all", Pacing.OFF));
                        paced.send("p");
                        adaptive.send("a");
                        assertEquals("p", new String(sub.receive(SECOND).payload()));
                        assertEquals("a", new String(sub.receive(SECOND).payload()));
                    }
                }
                if ("root".equals(System.getProperty("user.name"))) {
                    try (Publisher pub = c.publisher(tag, new PublishOptions().sched(Sched.fifo(10)))) {
                        pub.send("z");
                        assertEquals("z", new String(sub.receive(SECOND).payload()));
                    }
                } else {
                    assertThrows(TagwireException.NotPermitted.class,
                            () -> c.publisher(tag, new PublishOptions().sched(Sched.fifo(10))));
                }
            }
        }
    }
}
