package dev.tagwire.bench;

import dev.tagwire.Client;
import dev.tagwire.ClientOptions;
import dev.tagwire.MessageInfo;
import dev.tagwire.Publisher;
import dev.tagwire.SubscribeOptions;
import dev.tagwire.Subscriber;
import dev.tagwire.TagwireException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * The Java side of {@code tagwire perf rtt --lang java} and {@code tagwire perf
 * table2}: the runner protocol of proof/perf/src/lang.rs, as the C++
 * (front/ffi/cpp/examples/lang_runner.cpp) and Rust runners speak it.
 *
 * <pre>
 * LangRunner pong     --socket S --data D --ack A
 *     echo every message on D back on A, until a message "\xffSTOP"
 * LangRunner ping     --socket S --data D --ack A --size N --rounds R --warmup W
 *     R timed round trips after W untimed ones; one JSON line
 *     {"lang":"java","size":N,"samples_ns":[...]}
 * LangRunner sub-ints --socket S --data D --count N [--warmup W]
 *     a lossless subscriber: N 4-byte little-endian integers 0..N-1; one JSON line
 *     {"lang":"java","first_ns":..,"last_ns":..,"received":N,"lost":0} (CLOCK_MONOTONIC)
 * LangRunner pub-ints --socket S --data D --count N [--warmup W]
 *     once the tag has a receiver, sends 0..N-1 flat out; one JSON line
 *     {"lang":"java","start_ns":..,"end_ns":..}
 * </pre>
 *
 * With {@code --warmup W}, sub-ints and pub-ints first send W integers to
 * themselves through a private tag, untimed (and before subscribing to D,
 * or looking for D's receiver), then wait until the JIT has been idle for
 * 100 ms, so that the timed part runs compiled code and shares its CPU with
 * no compilation.
 *
 * Run as {@code java --enable-native-access=ALL-UNNAMED -cp tagwire.jar
 * dev.tagwire.bench.LangRunner ROLE ...}. Receives go into native buffers
 * preallocated once; the timed loops allocate nothing.
 */
public final class LangRunner {
    private LangRunner() {}

    private static final byte[] STOP = {(byte) 0xff, 'S', 'T', 'O', 'P'};
    private static final ValueLayout.OfInt LE_INT =
            ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final Duration PONG_WAIT = Duration.ofSeconds(60);
    private static final Duration PING_WAIT = Duration.ofSeconds(10);

    public static void main(String[] argv) {
        if (argv.length < 1) {
            System.err.println("usage: LangRunner ping|pong|sub-ints|pub-ints --socket S --data D "
                    + "[--ack A --size N --rounds R --warmup W --count N]");
            System.exit(2);
        }
        String role = argv[0];
        Map<String, String> a = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            if (argv[i].startsWith("--")) {
                a.put(argv[i].substring(2), argv[i + 1]);
            }
        }
        try {
            switch (role) {
                case "ping" -> ping(a);
                case "pong" -> pong(a);
                case "sub-ints" -> subInts(a);
                case "pub-ints" -> pubInts(a);
                default -> {
                    System.err.println("unknown role " + role);
                    System.exit(2);
                }
            }
        } catch (RuntimeException | InterruptedException e) {
            System.err.println("LangRunner " + role + ": " + e);
            System.exit(1);
        }
        System.exit(0);
    }

    private static Client connect(Map<String, String> a) {
        ClientOptions o = ClientOptions.defaults().timeout(Duration.ofSeconds(5)).autostart(false)
                .name("tagwire-lang-java");
        String socket = a.get("socket");
        if (socket != null && !socket.isEmpty()) {
            o.socket(socket);
        }
        return Client.connect(o);
    }

    private static long num(Map<String, String> a, String k, long d) {
        String v = a.get(k);
        return v == null ? d : Long.parseLong(v);
    }

    private static void pong(Map<String, String> a) {
        try (Client c = connect(a); Arena arena = Arena.ofConfined()) {
            String data = a.get("data"), ack = a.get("ack");
            c.createTag(data);
            c.createTag(ack);
            try (Subscriber sub = c.subscribe(data); Publisher pub = c.publisher(ack)) {
                MemorySegment buf = arena.allocate(1 << 20, 16);
                MemorySegment stop = arena.allocate(STOP.length);
                MemorySegment.copy(STOP, 0, stop, ValueLayout.JAVA_BYTE, 0, STOP.length);
                for (;;) {
                    MessageInfo i;
                    try {
                        i = sub.receiveInto(buf, PONG_WAIT);
                    } catch (TagwireException.Overflowed e) {
                        continue;
                    }
                    int len = i.length();
                    if (len == STOP.length && MemorySegment.mismatch(buf, 0, len, stop, 0, len) == -1) {
                        return;
                    }
                    pub.send(buf, 0, len);
                }
            }
        }
    }

    private static void ping(Map<String, String> a) throws InterruptedException {
        try (Client c = connect(a); Arena arena = Arena.ofConfined()) {
            String data = a.get("data"), ack = a.get("ack");
            c.createTag(data);
            c.createTag(ack);
            try (Subscriber sub = c.subscribe(ack, new SubscribeOptions().depth(256));
                    Publisher pub = c.publisher(data)) {
                long deadline = System.nanoTime() + 20_000_000_000L;
                while (c.senders(ack).isEmpty()) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("no pong came up");
                    }
                    Thread.sleep(5);
                }
                int size = (int) num(a, "size", 256);
                int rounds = (int) num(a, "rounds", 1000), warmup = (int) num(a, "warmup", 100);
                MemorySegment payload = arena.allocate(size, 16).fill((byte) 0x5a);
                MemorySegment buf = arena.allocate(size + 64, 16);
                long[] samples = new long[rounds];
                for (int r = 0; r < warmup + rounds; r++) {
                    long t = roundTrip(pub, sub, payload, buf);
                    if (r >= warmup) {
                        samples[r - warmup] = t;
                    }
                }
                MemorySegment stop = arena.allocate(STOP.length);
                MemorySegment.copy(STOP, 0, stop, ValueLayout.JAVA_BYTE, 0, STOP.length);
                pub.send(stop);
                StringBuilder out = new StringBuilder(rounds * 8 + 64);
                out.append("{\"lang\":\"java\",\"size\":").append(size).append(",\"samples_ns\":[");
                for (int i = 0; i < samples.length; i++) {
                    out.append(i == 0 ? "" : ",").append(samples[i]);
                }
                System.out.println(out.append("]}"));
                System.out.flush();
            }
        }
    }

    /** One timed round trip (its own method, so the JIT compiles it early). */
    private static long roundTrip(Publisher pub, Subscriber sub, MemorySegment payload, MemorySegment buf) {
        long t0 = System.nanoTime();
        pub.send(payload);
        sub.receiveInto(buf, PING_WAIT);
        return System.nanoTime() - t0;
    }

    /**
     * Sends {@code n} integers to itself through a private tag, untimed, in
     * chunks through the very methods the timed part calls ({@link #sendRange},
     * {@link #receiveRange}), so that the JIT has compiled them, loops
     * included, when the timing starts.
     */
    private static void warmUp(Client c, String data, long n, Arena arena) {
        if (n <= 0) {
            return;
        }
        String tag = data + "/warmup-" + ProcessHandle.current().pid();
        c.createTag(tag, dev.tagwire.Domain.LOCAL);
        try (Subscriber sub = c.subscribe(tag, new SubscribeOptions().lossless()); Publisher pub = c.publisher(tag)) {
            MemorySegment out = arena.allocate(4, 16), in = arena.allocate(64, 16);
            long[] times = new long[2];
            for (long i = 0; i < n; i += WARMUP_CHUNK) {
                long k = Math.min(WARMUP_CHUNK, n - i);
                sendRange(pub, out, i, k);
                receiveRange(sub, in, i, k, times);
            }
        } finally {
            c.destroyTag(tag);
        }
        awaitQuietJit();
    }

    /**
     * Waits (at most 5 s) until the JIT has compiled nothing for 100 ms: the
     * warm-up queued compilations that would otherwise share the runner's CPU
     * with the timed part.
     */
    private static void awaitQuietJit() {
        var jit = java.lang.management.ManagementFactory.getCompilationMXBean();
        if (jit == null || !jit.isCompilationTimeMonitoringSupported()) {
            sleep(500);
            return;
        }
        long deadline = System.nanoTime() + 5_000_000_000L;
        long last = -1;
        int quiet = 0;
        while (quiet < 2 && System.nanoTime() < deadline) {
            sleep(50);
            long t = jit.getTotalCompilationTime();
            quiet = t == last ? quiet + 1 : 0;
            last = t;
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Messages per warm-up call: few, so that the methods are called (and compiled) often. */
    private static final long WARMUP_CHUNK = 8;

    /** Sends the integers {@code from .. from+n-1}. */
    private static void sendRange(Publisher pub, MemorySegment buf, long from, long n) {
        for (long i = from; i < from + n; i++) {
            buf.set(LE_INT, 0, (int) i);
            pub.send(buf);
        }
    }

    /** Receives the integers {@code from .. from+n-1}; {@code times} gets the first and last receive times. */
    private static void receiveRange(Subscriber sub, MemorySegment buf, long from, long n, long[] times) {
        for (long i = from; i < from + n; i++) {
            MessageInfo info = sub.receiveInto(buf, PONG_WAIT);
            long now = System.nanoTime();
            int v = buf.get(LE_INT, 0);
            if (info.length() != 4 || v != (int) i) {
                throw new IllegalStateException("message " + i + " is " + info.length() + " bytes, value " + v);
            }
            if (i == from) {
                times[0] = now;
            }
            times[1] = now;
        }
    }

    private static void subInts(Map<String, String> a) {
        try (Client c = connect(a); Arena arena = Arena.ofConfined()) {
            String data = a.get("data");
            long count = num(a, "count", 10000);
            c.createTag(data);
            warmUp(c, data, num(a, "warmup", 0), arena);
            try (Subscriber sub = c.subscribe(data, new SubscribeOptions().lossless())) {
                MemorySegment buf = arena.allocate(64, 16);
                long[] times = new long[2];
                receiveRange(sub, buf, 0, count, times);
                System.out.println("{\"lang\":\"java\",\"first_ns\":" + times[0] + ",\"last_ns\":" + times[1]
                        + ",\"received\":" + count + ",\"lost\":" + sub.lost() + "}");
                System.out.flush();
            }
        }
    }

    private static void pubInts(Map<String, String> a) throws InterruptedException {
        try (Client c = connect(a); Arena arena = Arena.ofConfined()) {
            String data = a.get("data");
            long count = num(a, "count", 10000);
            c.createTag(data);
            warmUp(c, data, num(a, "warmup", 0), arena);
            try (Publisher pub = c.publisher(data)) {
                pub.setSendTimeout(Duration.ofSeconds(60));
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (c.receivers(data).isEmpty()) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("no receiver came up");
                    }
                    Thread.sleep(1);
                }
                MemorySegment buf = arena.allocate(4, 16);
                long start = System.nanoTime();
                sendRange(pub, buf, 0, count);
                long end = System.nanoTime();
                System.out.println("{\"lang\":\"java\",\"start_ns\":" + start + ",\"end_ns\":" + end + "}");
                System.out.flush();
            }
        }
    }
}
