package dev.tagwire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The examples (ORTE Figures 3 and 4) and the perf runner, run as programs. */
class ProgramsTest {
    @Test
    void theSimpleSubscriberPrintsWhatTheSimplePublisherSends() throws Exception {
        TestDaemon d = TestDaemon.shared();
        String tag = TestDaemon.uniqueTag("examples");
        String sock = d.socket().toString();
        Process sub = Processes.start(Processes.java("dev.tagwire.examples.SimpleSubscriber",
                "--socket", sock, "--tag", tag, "--count", "3", "--timeout-ms", "30000"));
        BufferedReader r = new BufferedReader(new InputStreamReader(sub.getInputStream(), StandardCharsets.UTF_8));
        String first = r.readLine();
        assertEquals("subscribed to " + tag, first);
        Process pub = Processes.start(Processes.java("dev.tagwire.examples.SimplePublisher",
                "--socket", sock, "--tag", tag, "--count", "3", "--period-ms", "50", "--wait-receivers", "1"));
        String published = Processes.finish(pub, 60);
        assertEquals(3, published.lines().filter(l -> l.startsWith("sent seq ")).count(), published);
        List<String> got = new ArrayList<>();
        for (String l; (l = r.readLine()) != null; ) {
            got.add(l);
        }
        Processes.finish(sub, 30);
        assertEquals(3, got.size(), String.join("\n", got));
        for (int i = 0; i < 3; i++) {
            assertEquals("received seq " + (i + 1) + " from " + pub.pid() + "@", got.get(i).substring(0,
                    got.get(i).indexOf('@') + 1));
            assertTrue(got.get(i).endsWith(": Hello World (" + (i + 1) + ")"), got.get(i));
        }
    }

    @Test
    void theRunnerPlaysPingPongAndTheTable2Roles() throws Exception {
        TestDaemon d = TestDaemon.shared();
        String sock = d.socket().toString();
        String data = TestDaemon.uniqueTag("runner-data"), ack = TestDaemon.uniqueTag("runner-ack");
        String runner = "dev.tagwire.bench.LangRunner";
        Process pong = Processes.start(Processes.java(runner, "pong", "--socket", sock, "--data", data, "--ack", ack));
        String ping = Processes.finish(Processes.start(Processes.java(runner, "ping", "--socket", sock,
                "--data", data, "--ack", ack, "--size", "256", "--rounds", "50", "--warmup", "5")), 60);
        Processes.finish(pong, 30); // STOP ends it
        Matcher m = Pattern.compile("^\\{\"lang\":\"java\",\"size\":256,\"samples_ns\":\\[(\\d+(,\\d+)*)]}$",
                Pattern.MULTILINE).matcher(ping);
        assertTrue(m.find(), ping);
        assertEquals(50, m.group(1).split(",").length);

        String ints = TestDaemon.uniqueTag("runner-ints");
        Process sub = Processes.start(Processes.java(runner, "sub-ints", "--socket", sock, "--data", ints,
                "--count", "5000"));
        String pubOut = Processes.finish(Processes.start(Processes.java(runner, "pub-ints", "--socket", sock,
                "--data", ints, "--count", "5000")), 60);
        String subOut = Processes.finish(sub, 60);
        Matcher p = Pattern.compile("\\{\"lang\":\"java\",\"start_ns\":(\\d+),\"end_ns\":(\\d+)}").matcher(pubOut);
        Matcher s = Pattern.compile(
                "\\{\"lang\":\"java\",\"first_ns\":(\\d+),\"last_ns\":(\\d+),\"received\":5000,\"lost\":0}")
                .matcher(subOut);
        assertTrue(p.find(), pubOut);
        assertTrue(s.find(), subOut);
        long start = Long.parseLong(p.group(1)), end = Long.parseLong(p.group(2));
        long first = Long.parseLong(s.group(1)), last = Long.parseLong(s.group(2));
        assertTrue(start <= end && first <= last, pubOut + subOut);
        assertTrue(first >= start && last >= first, "one monotonic clock: " + pubOut + subOut);
    }
}
