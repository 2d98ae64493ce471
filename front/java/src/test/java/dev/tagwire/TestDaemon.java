package dev.tagwire;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A tagwire daemon for the tests: {@code tagwire daemon --socket DIR/tagwired.sock}
 * in a fresh temporary directory. The binary comes from the system property
 * {@code tagwire.bin} or {@code TAGWIRE_BIN}, else {@code <repo>/target/{release,debug}/tagwire};
 * the library as the binding finds it (tagwire.library / TAGWIRE_LIBRARY / ...).
 * Without either the tests are skipped, saying why.
 */
final class TestDaemon implements AutoCloseable {
    private static TestDaemon shared;
    private static final AtomicInteger TAGS = new AtomicInteger();

    private final Path dir;
    private final Path socket;
    private Process process;

    private TestDaemon() throws IOException {
        dir = Files.createTempDirectory("tagwire-java-test-");
        socket = dir.resolve("tagwired.sock");
        start();
    }

    /** The daemon the tests share (started once; skips the test when it cannot run). */
    static synchronized TestDaemon shared() {
        assumeTagwire();
        if (shared == null) {
            try {
                shared = new TestDaemon();
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
            Runtime.getRuntime().addShutdownHook(new Thread(shared::close));
        }
        return shared;
    }

    /** A daemon of one's own (for a restart). */
    static TestDaemon fresh() throws IOException {
        assumeTagwire();
        return new TestDaemon();
    }

    /** Skips the calling test, saying why, when the binary or the library is missing. */
    static void assumeTagwire() {
        String why = null;
        if (binary() == null) {
            why = "no tagwire binary: build it with `cargo build -p tagwire-cli` or set TAGWIRE_BIN";
        } else {
            try {
                Client.version();
            } catch (UnsatisfiedLinkError e) {
                why = e.getMessage();
            }
        }
        if (why != null) {
            System.out.println("skipped: " + why);
        }
        assumeTrue(why == null, why);
    }

    /** The workspace root (the directory with Cargo.toml above front/java). */
    static Path repo() {
        for (Path d = Path.of("").toAbsolutePath(); d != null; d = d.getParent()) {
            if (Files.isRegularFile(d.resolve("Cargo.toml")) && Files.isDirectory(d.resolve("front/java"))) {
                return d;
            }
        }
        return null;
    }

    /** The tagwire binary, or null. */
    static Path binary() {
        String explicit = System.getProperty("tagwire.bin");
        if (explicit == null || explicit.isEmpty()) {
            explicit = System.getenv("TAGWIRE_BIN");
        }
        if (explicit != null && !explicit.isEmpty()) {
            Path p = Path.of(explicit);
            return Files.isExecutable(p) ? p : null;
        }
        Path root = repo();
        if (root == null) {
            return null;
        }
        for (String profile : new String[] {"release", "debug"}) {
            Path p = root.resolve("target").resolve(profile).resolve("tagwire");
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        return null;
    }

    Path socket() {
        return socket;
    }

    long pid() {
        return process.pid();
    }

    /** Client options for this daemon. */
    ClientOptions options() {
        return ClientOptions.defaults().socket(socket).autostart(false).timeout(Duration.ofSeconds(5)).name("java-test");
    }

    Client connect() {
        return Client.connect(options());
    }

    /** A tag name no other test uses. */
    static String uniqueTag(String what) {
        return "/java-test/" + ProcessHandle.current().pid() + "/" + what + "-" + TAGS.incrementAndGet();
    }

    void start() throws IOException {
        ProcessBuilder pb = new ProcessBuilder(binary().toString(), "daemon", "--socket", socket.toString());
        pb.redirectErrorStream(true);
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("tagwired.log").toFile()));
        process = pb.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        for (;;) {
            try (Client c = connect()) {
                c.ping();
                return;
            } catch (TagwireException e) {
                if (!process.isAlive()) {
                    throw new IllegalStateException("the test daemon exited: " + log());
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the test daemon did not come up: " + e.getMessage());
                }
                sleep(20);
            }
        }
    }

    /** Stops the daemon with SIGTERM (as a kill would) and waits for it. */
    void stop() {
        if (process != null && process.isAlive()) {
            process.destroy();
            try {
                if (!process.waitFor(10, TimeUnit.SECONDS)) {
                    process.destroyForcibly().waitFor();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    void restart() throws IOException {
        stop();
        start();
    }

    String log() {
        try {
            return Files.readString(dir.resolve("tagwired.log"));
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    @Override
    public void close() {
        stop();
        try (var files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // a temporary directory left behind
        }
    }
}
