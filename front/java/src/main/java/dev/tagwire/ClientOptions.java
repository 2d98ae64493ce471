package dev.tagwire;

import java.nio.file.Path;
import java.time.Duration;

/**
 * How to reach the daemon, chainable:
 * {@code ClientOptions.defaults().socket(path).timeout(Duration.ofSeconds(5))}.
 * Unset fields keep the library's defaults: socket {@code $TAGWIRE_SOCKET},
 * else the per-user path; 1 s request timeout; autostart only with
 * {@code TAGWIRE_AUTOSTART=1}; the program's name.
 */
public final class ClientOptions {
    private String socket;
    private Duration timeout = Duration.ofSeconds(1);
    private Boolean autostart;
    private String name;

    /** The defaults. */
    public ClientOptions() {}

    /** The defaults (same as {@code new ClientOptions()}). */
    public static ClientOptions defaults() {
        return new ClientOptions();
    }

    /** The daemon's socket. */
    public ClientOptions socket(Path socket) {
        this.socket = socket.toString();
        return this;
    }

    /** The daemon's socket. */
    public ClientOptions socket(String socket) {
        this.socket = socket;
        return this;
    }

    /** How long a request may wait for the daemon (default 1 s). */
    public ClientOptions timeout(Duration timeout) {
        if (timeout.isNegative()) {
            throw new IllegalArgumentException("a timeout is not negative: " + timeout);
        }
        this.timeout = timeout;
        return this;
    }

    /** Start a background daemon when none answers. */
    public ClientOptions autostart(boolean autostart) {
        this.autostart = autostart;
        return this;
    }

    /** A label for the daemon's logs (default: the program's name). */
    public ClientOptions name(String name) {
        this.name = name;
        return this;
    }

    String socket() {
        return socket;
    }

    Duration timeout() {
        return timeout;
    }

    Boolean autostart() {
        return autostart;
    }

    String name() {
        return name;
    }
}
