package dev.tagwire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** A Java program and a Rust program (the tagwire CLI) on one tag, both ways. */
class CrossLanguageTest {
    private static final int N = 200;

    @Test
    void aJavaSubscriberReceivesARustPublishersMessagesWithItsPid() throws Exception {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("from-rust");
            c.createTag(tag);
            try (Subscriber sub = c.subscribe(tag, new SubscribeOptions().lossless())) {
                Process rust = Processes.start(List.of(TestDaemon.binary().toString(), "pub", tag,
                        "--count", Integer.toString(N), "--rate", "0", "--size", "64",
                        "--wait-receivers", "1", "--socket", d.socket().toString()));
                for (int i = 1; i <= N; i++) {
                    Message m = sub.receive(Duration.ofSeconds(20));
                    assertEquals(rust.pid(), m.sender().pid(), "the Rust publisher's pid");
                    assertTrue(m.sender().pid() != ProcessHandle.current().pid());
                    assertEquals(i, m.seq());
                    assertEquals(64, m.payload().length);
                    assertTrue(m.text().startsWith("tagwire #" + i + " from " + rust.pid() + "@"), m.text());
                }
                Processes.finish(rust, 30);
                assertEquals(0, sub.lost());
            }
        }
    }

    @Test
    void aRustSubscriberReceivesAJavaPublishersMessagesWithItsPid() throws Exception {
        TestDaemon d = TestDaemon.shared();
        try (Client c = d.connect()) {
            String tag = TestDaemon.uniqueTag("to-rust");
            c.createTag(tag);
            Process rust = Processes.start(List.of(TestDaemon.binary().toString(), "sub", tag,
                    "--count", Integer.toString(N), "--lossless", "--socket", d.socket().toString()));
            try (Publisher pub = c.publisher(tag)) {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (c.receivers(tag).isEmpty()) {
                    assertTrue(System.nanoTime() < deadline, "the Rust subscriber did not subscribe");
                    TestDaemon.sleep(10);
                }
                assertEquals(rust.pid(), c.receivers(tag).get(0).who().pid(), "the Rust subscriber's pid");
                pub.setSendTimeout(Duration.ofSeconds(10));
                for (int i = 0; i < N; i++) {
                    pub.send("java " + i);
                }
                String out = Processes.finish(rust, 30);
                String from = "from=" + ProcessHandle.current().pid() + "@";
                long lines = out.lines().filter(l -> l.contains(from)).count();
                assertEquals(N, lines, "every line names the Java publisher's pid:\n" + out);
                assertTrue(out.contains("\"java " + (N - 1) + "\""), out);
            }
        }
    }
}
