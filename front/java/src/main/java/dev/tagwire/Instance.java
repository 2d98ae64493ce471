package dev.tagwire;

import java.util.Arrays;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * The instance a message is about ({@link Publisher#sendKeyed}): its
 * 16-byte key (a key of at most 16 bytes, zero padded; a longer one's MD5,
 * as a DDS key hash), its state, and the publisher's ownership strength.
 *
 * @param key the 16-byte key, or {@code null} for a message sent without one
 * @param state alive (data), disposed or unregistered (empty payload)
 * @param strength the publisher's ownership strength, if it set one
 */
public record Instance(byte[] key, State state, OptionalInt strength) {
    /** What a message sent without a key carries. */
    public static final Instance NONE = new Instance(null, State.ALIVE, OptionalInt.empty());

    /** The state of an instance. */
    public enum State {
        /** A sample of data. */
        ALIVE,
        /** The instance was disposed (deleted). */
        DISPOSED,
        /** Its publisher writes it no more. */
        UNREGISTERED,
        /** Both. */
        DISPOSED_UNREGISTERED;

        static State of(int code) {
            State[] all = values();
            return code >= 0 && code < all.length ? all[code] : ALIVE;
        }
    }

    /** The key, if the message had one. */
    public Optional<byte[]> keyBytes() {
        return Optional.ofNullable(key).map(byte[]::clone);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Instance i && Arrays.equals(key, i.key) && state == i.state && strength.equals(i.strength);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(key) * 31 + state.hashCode() * 7 + strength.hashCode();
    }

    @Override
    public String toString() {
        return "Instance[key=" + (key == null ? "none" : java.util.HexFormat.of().formatHex(key)) + ", state=" + state
                + ", strength=" + (strength.isPresent() ? strength.getAsInt() : "none") + "]";
    }
}
