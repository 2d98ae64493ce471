package dev.tagwire;

import java.nio.charset.StandardCharsets;
import java.time.Instant;

/**
 * A received (or pulled) message.
 *
 * @param payload   its bytes
 * @param seq       the publisher's sequence number
 * @param sender    who sent it: process id and node
 * @param timestamp when it was sent (the publisher's clock)
 */
public record Message(byte[] payload, long seq, Sender sender, Instant timestamp, Instance instance) {
    /** A message without a key ({@link Instance#NONE}). */
    public Message(byte[] payload, long seq, Sender sender, Instant timestamp) {
        this(payload, seq, sender, timestamp, Instance.NONE);
    }

    /** The payload decoded as UTF-8. */
    public String text() {
        return new String(payload, StandardCharsets.UTF_8);
    }
}
