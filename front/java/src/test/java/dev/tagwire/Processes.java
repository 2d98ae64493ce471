package dev.tagwire;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Child processes for the tests: Java programs on this classpath, and the tagwire CLI. */
final class Processes {
    private Processes() {}

    /** A `java` command running {@code mainClass} from this build's classes, with the same library. */
    static List<String> java(String mainClass, String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        String lib = System.getProperty("tagwire.library");
        if (lib != null && !lib.isEmpty()) {
            cmd.add("-Dtagwire.library=" + lib);
        }
        cmd.add("-cp");
        cmd.add(classes());
        cmd.add(mainClass);
        cmd.addAll(List.of(args));
        return cmd;
    }

    /** The directory (or jar) holding the main classes. */
    static String classes() {
        try {
            return Path.of(Client.class.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static Process start(List<String> cmd) throws IOException {
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    /** Waits for the process (at most {@code seconds}) and returns its stdout; fails on a non-zero exit. */
    static String finish(Process p, int seconds) throws IOException, InterruptedException {
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("the process did not end: " + p.info().commandLine().orElse("?"));
        }
        String text = new String(out, StandardCharsets.UTF_8);
        if (p.exitValue() != 0) {
            throw new AssertionError("exit " + p.exitValue() + ": " + p.info().commandLine().orElse("?") + "\n" + text);
        }
        return text;
    }
}
