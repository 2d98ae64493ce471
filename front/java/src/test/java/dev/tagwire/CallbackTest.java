package dev.tagwire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The callback API: handlers run on a Java thread the binding owns, which close() stops. */
class CallbackTest {
    @Test
    void handlersRunOnTheBindingsThreadAndStopOnClose() throws Exception {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("callback");
            c.createTag(tag);
            List<String> texts = new CopyOnWriteArrayList<>();
            List<Thread> threads = new CopyOnWriteArrayList<>();
            CountDownLatch three = new CountDownLatch(3);
            Subscription s = c.subscribe(tag, new SubscribeOptions().depth(64), m -> {
                threads.add(Thread.currentThread());
                texts.add(m.text() + "/" + m.sender().pid());
                three.countDown();
            });
            try (Publisher pub = c.publisher(tag)) {
                assertEquals(1, c.receivers(tag).size());
                pub.send("a");
                pub.send("b");
                pub.send("c");
                assertTrue(three.await(5, TimeUnit.SECONDS), "the handler got " + texts);
                long pid = ProcessHandle.current().pid();
                assertEquals(List.of("a/" + pid, "b/" + pid, "c/" + pid), texts);
                for (Thread t : threads) {
                    assertNotSame(Thread.currentThread(), t, "not the caller's thread");
                    assertSame(s.thread(), t, "the subscription's own thread");
                }
                assertTrue(s.thread().isDaemon());
                assertFalse(s.thread().isVirtual());
                assertEquals(3, s.received());
                assertTrue(s.isRunning());

                long t0 = System.nanoTime();
                s.close();
                assertTrue(System.nanoTime() - t0 < 2_000_000_000L, "close stops the loop promptly");
                assertFalse(s.isRunning(), "closing stops the thread");
                assertFalse(s.thread().isAlive());
                assertTrue(c.receivers(tag).isEmpty(), "and unsubscribes");
                pub.send("after close");
                TestDaemon.sleep(100);
                assertEquals(3, texts.size(), "nothing is handled after close");
                s.close(); // idempotent
            }
        }
    }

    @Test
    void theRawHandlerSeesThePayloadInPlaceAndErrorsGoToTheErrorHandler() throws Exception {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("raw-callback");
            c.createTag(tag);
            List<String> seen = new CopyOnWriteArrayList<>();
            List<Throwable> errors = new CopyOnWriteArrayList<>();
            CountDownLatch done = new CountDownLatch(3);
            byte[] big = new byte[200 * 1024];
            big[big.length - 1] = 42;
            try (Subscription s = c.subscribe(tag, new SubscribeOptions(), (payload, info) -> {
                try {
                    if (payload.byteSize() == 4) {
                        throw new IllegalArgumentException("the handler failed");
                    }
                    seen.add(payload.byteSize() + ":" + payload.get(ValueLayout.JAVA_BYTE, payload.byteSize() - 1)
                            + ":" + info.seq());
                } finally {
                    done.countDown();
                }
            }, errors::add); Publisher pub = c.publisher(tag)) {
                pub.send("boom");
                pub.send(big); // larger than the loop's first buffer: it grows
                pub.send("ok");
                assertTrue(done.await(5, TimeUnit.SECONDS));
                assertEquals(List.of(big.length + ":42:2", "2:107:3"), seen);
                assertEquals(1, errors.size());
                assertInstanceOf(IllegalArgumentException.class, errors.get(0));
                assertTrue(s.isRunning(), "a handler's exception does not end the loop");
            }
        }
    }

    @Test
    void aDestroyedTagEndsTheLoopWithItsFailure() throws Exception {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("callback-destroy");
            c.createTag(tag);
            List<Throwable> errors = new CopyOnWriteArrayList<>();
            try (Subscription s = c.subscribe(tag, null, m -> { }, errors::add)) {
                c.destroyTag(tag);
                s.thread().join(Duration.ofSeconds(5));
                assertFalse(s.isRunning());
                assertInstanceOf(TagwireException.TagDestroyed.class, s.failure());
                assertEquals(List.of(s.failure()), errors);
            }
        }
    }

    @Test
    void closingFromTheHandlerItselfIsFine() throws Exception {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("callback-self-close");
            c.createTag(tag);
            java.util.concurrent.atomic.AtomicReference<Subscription> self = new java.util.concurrent.atomic.AtomicReference<>();
            CountDownLatch got = new CountDownLatch(1);
            self.set(c.subscribe(tag, null, m -> {
                while (self.get() == null) {
                    Thread.onSpinWait();
                }
                self.get().close();
                got.countDown();
            }));
            try (Publisher pub = c.publisher(tag)) {
                pub.send("stop");
                assertTrue(got.await(5, TimeUnit.SECONDS));
                self.get().thread().join(Duration.ofSeconds(5));
                assertFalse(self.get().isRunning());
                assertTrue(c.receivers(tag).isEmpty());
            }
        }
    }
}
