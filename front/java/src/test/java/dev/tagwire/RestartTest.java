package dev.tagwire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * A daemon restart: the daemon is killed and started again on the same
 * socket; the client reconnects and re-registers by itself.
 */
class RestartTest {
    @Test
    void aDaemonRestartIsSurvivedByPublishersAndSubscribers() throws Exception {
        try (TestDaemon d = TestDaemon.fresh(); Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("restart");
            c.createTag(tag);
            try (Subscriber sub = c.subscribe(tag); Publisher pub = c.publisher(tag)) {
                pub.send("before");
                assertEquals("before", sub.receive(Duration.ofSeconds(1)).text());
                long oldPid = d.pid();
                d.restart();
                assertTrue(d.pid() != oldPid, "a new daemon process");

                // The new daemon lists the publisher again.
                long deadline = System.nanoTime() + 20_000_000_000L;
                int senders = 0;
                while (senders == 0 && System.nanoTime() < deadline) {
                    try (Client probe = d.connect()) {
                        senders = probe.senders(tag).size();
                    } catch (TagwireException e) {
                        // not re-registered yet
                    }
                    if (senders == 0) {
                        TestDaemon.sleep(50);
                    }
                }
                assertEquals(1, senders, "send access was not re-registered after the restart");

                // A subscriber that joins after the restart gets what the old publisher sends.
                try (Client fresh = d.connect(); Subscriber newcomer = fresh.subscribe(tag)) {
                    boolean delivered = false;
                    while (!delivered && System.nanoTime() < deadline) {
                        try {
                            pub.send("after");
                            Message m = newcomer.receive(Duration.ofMillis(200));
                            delivered = m.text().equals("after") && m.sender().pid() == ProcessHandle.current().pid();
                        } catch (TagwireException e) {
                            TestDaemon.sleep(50);
                        }
                    }
                    assertTrue(delivered, "the old publisher does not reach a new subscriber after the restart");
                }
                Message m = sub.receive(Duration.ofSeconds(2));
                assertEquals("after", m.text(), "the old subscriber hears the old publisher again");
                assertEquals(ProcessHandle.current().pid(), m.sender().pid());
            }
        }
    }
}
