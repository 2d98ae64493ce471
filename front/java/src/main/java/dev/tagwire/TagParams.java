package dev.tagwire;

/**
 * The ring shape and history of a new tag; zero fields take the daemon's
 * defaults.
 *
 * @param slots           ring slots: the deepest queue a subscriber may ask for
 * @param slotPayload     bytes one slot holds: the largest message on the fast path
 * @param historyDepth    messages of history this node's daemon keeps from the start (0: none)
 * @param historyMaxBytes bytes of history kept at most (0: the daemon's default)
 */
public record TagParams(int slots, int slotPayload, int historyDepth, long historyMaxBytes) {
    /** All defaults. */
    public static final TagParams DEFAULT = new TagParams(0, 0, 0, 0);

    /** The defaults with a history of the last {@code depth} messages kept from the start. */
    public static TagParams keeping(int depth) {
        return new TagParams(0, 0, depth, 0);
    }

    /** These parameters with another ring shape. */
    public TagParams withRing(int slots, int slotPayload) {
        return new TagParams(slots, slotPayload, historyDepth, historyMaxBytes);
    }
}
