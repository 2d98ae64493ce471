package dev.tagwire;

/**
 * The packet class of the datagrams that bring a subscription its messages from other nodes: the
 * DSCP they carry, and the band of the sending host's {@code pfifo_fast} queue it puts them in
 * ({@link SubscribeOptions#priority}; a DSCP of one's own: {@link SubscribeOptions#dscp}).
 */
public enum Priority {
    /** Behind everything else: AF11 (band 2). */
    LOW(1),
    /** The default class (band 1). */
    NORMAL(0),
    /** Ahead of normal traffic: AF42 (band 0). */
    HIGH(2),
    /** Ahead of normal traffic, for the few channels that must not wait: VOICE-ADMIT (band 0). */
    CRITICAL(3);

    /** The library's {@code TW_PRIORITY_*} code. */
    final int code;

    Priority(int code) {
        this.code = code;
    }
}
