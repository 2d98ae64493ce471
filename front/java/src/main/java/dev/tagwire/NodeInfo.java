package dev.tagwire;

import java.net.InetAddress;

/**
 * A node the daemon knows (this one first in {@link Client#nodes()}).
 *
 * @param node        its address
 * @param name        its name
 * @param state       connecting, up or dead
 * @param lastHeardMs milliseconds since last heard from ({@code -1}: never)
 * @param source      how it was found ("list", "beacon", ...)
 */
public record NodeInfo(InetAddress node, String name, State state, long lastHeardMs, String source) {
    /** A node's state. */
    public enum State {
        /** Known but not connected yet. */
        CONNECTING,
        /** Connected and heard from within the lease. */
        UP,
        /** Silent for longer than the lease. */
        DEAD
    }
}
