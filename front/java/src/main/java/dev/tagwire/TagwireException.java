package dev.tagwire;

/**
 * Every tagwire failure. {@link #kind()} says which error it is (one per
 * {@code tw_status} of the C ABI), {@link #getMessage()} what happened and what
 * to do: the library's {@code tw_last_error()}, read right after the failing
 * call on the same thread. Each kind has its own subclass, nested here, so
 * callers can catch the ones they handle:
 *
 * <pre>{@code
 * try {
 *     Message m = sub.receive(Duration.ofMillis(100));
 * } catch (TagwireException.ReceiveTimeout e) {
 *     // nothing within 100 ms
 * } catch (TagwireException.Overflowed e) {
 *     // e.lost() messages were dropped; receive again for the next one
 * }
 * }</pre>
 */
public class TagwireException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The kind of an error: the C ABI's {@code tw_status}. */
    public enum Kind {
        /** No daemon answers on the socket (start {@code tagwire daemon}, or autostart). */
        DAEMON_UNREACHABLE(1),
        /** The daemon did not answer a request in time. */
        DAEMON_TIMEOUT(2),
        /** No such tag. */
        UNKNOWN_TAG(3),
        /** The tag was destroyed while in use. */
        TAG_DESTROYED(4),
        /** Not a valid tag name. */
        INVALID_NAME(5),
        /** The caller holds no send access on the tag. */
        NO_SEND_ACCESS(6),
        /** The caller is not subscribed to the tag. */
        NOT_SUBSCRIBED(7),
        /** The message is larger than tagwire accepts. */
        TOO_LARGE(8),
        /** The subscriber fell behind; messages were dropped, oldest first. */
        OVERFLOWED(9),
        /** A send waited its whole send timeout for a full window; nothing was sent. */
        WINDOW_FULL(10),
        /** Every lossless gate of the tag's ring on this node is taken. */
        NO_LOSSLESS_ROOM(11),
        /** No message within the receive timeout. */
        TIMEOUT(12),
        /** Peer daemons did not confirm a table change in time. */
        PEERS_UNRESPONSIVE(13),
        /** A {@code proxyAuto} subscription cannot be placed. */
        NO_PLACEMENT(14),
        /** The daemon refused the request for another reason. */
        REFUSED(15),
        /** A local resource failed (shared memory, descriptors). */
        IO(16),
        /** The daemon sent something this library does not understand. */
        PROTOCOL(17),
        /** A null pointer, invalid UTF-8 or an unknown enum value was passed. */
        INVALID_ARGUMENT(18),
        /** The caller's buffer is too small; the message is kept for the next call. */
        BUFFER_TOO_SMALL(19),
        /** A bug in tagwire (a panic was caught at the boundary); please report it. */
        INTERNAL(20),
        /** A subscription's depth exceeds the tag's ring slots. */
        DEPTH_TOO_LARGE(21),
        /** The daemon's access policy does not grant this right on the tag. */
        DENIED(22),
        /** The socket's daemon runs as another user (neither root nor the caller's). */
        FOREIGN_DAEMON(23),
        /** A resource bound of the daemon was reached. */
        QUOTA(24),
        /** An instance got no sample for a deadline period (receive again). */
        DEADLINE_MISSED(25),
        /** The process may not ask for a thread policy (real-time, or a nice below 0). */
        NOT_PERMITTED(26);

        private final int code;

        Kind(int code) {
            this.code = code;
        }

        /** The {@code tw_status} value. */
        public int code() {
            return code;
        }

        /** The kind of a {@code tw_status} ({@link #INTERNAL} for unknown ones). */
        public static Kind of(int code) {
            for (Kind k : values()) {
                if (k.code == code) {
                    return k;
                }
            }
            return INTERNAL;
        }
    }

    private final Kind kind;

    /** A failure of kind {@code kind}; subclasses exist for every kind, see {@link #of}. */
    protected TagwireException(Kind kind, String message) {
        super(message == null || message.isEmpty() ? kind.name().toLowerCase().replace('_', ' ') : message);
        this.kind = kind;
    }

    /** Which error this is. */
    public Kind kind() {
        return kind;
    }

    /** The C ABI's name of the kind ("ERR_TIMEOUT", ...). */
    public String kindName() {
        return "ERR_" + kind.name();
    }

    /** The exception for a {@code tw_status} and its message. */
    static TagwireException of(int status, String message, long lost, long needed) {
        return switch (Kind.of(status)) {
            case DAEMON_UNREACHABLE -> new DaemonUnreachable(message);
            case DAEMON_TIMEOUT -> new DaemonTimeout(message);
            case UNKNOWN_TAG -> new UnknownTag(message);
            case TAG_DESTROYED -> new TagDestroyed(message);
            case INVALID_NAME -> new InvalidName(message);
            case NO_SEND_ACCESS -> new NoSendAccess(message);
            case NOT_SUBSCRIBED -> new NotSubscribed(message);
            case TOO_LARGE -> new TooLarge(message);
            case OVERFLOWED -> new Overflowed(message, lost);
            case WINDOW_FULL -> new WindowFull(message);
            case NO_LOSSLESS_ROOM -> new NoLosslessRoom(message);
            case TIMEOUT -> new ReceiveTimeout(message);
            case PEERS_UNRESPONSIVE -> new PeersUnresponsive(message);
            case NO_PLACEMENT -> new NoPlacement(message);
            case REFUSED -> new Refused(message);
            case IO -> new IoError(message);
            case PROTOCOL -> new ProtocolError(message);
            case INVALID_ARGUMENT -> new InvalidArgument(message);
            case BUFFER_TOO_SMALL -> new BufferTooSmall(message, needed);
            case DEPTH_TOO_LARGE -> new DepthTooLarge(message);
            case DENIED -> new Denied(message);
            case FOREIGN_DAEMON -> new ForeignDaemon(message);
            case QUOTA -> new Quota(message);
            case DEADLINE_MISSED -> new DeadlineMissed(message);
            case NOT_PERMITTED -> new NotPermitted(message);
            case INTERNAL -> new InternalError(status == Kind.INTERNAL.code() ? message
                    : "unknown tagwire status " + status + ": " + message);
        };
    }

    /** No daemon answers on the socket; the message says how to start one. */
    public static final class DaemonUnreachable extends TagwireException {
        private static final long serialVersionUID = 1L;

        DaemonUnreachable(String m) {
            super(Kind.DAEMON_UNREACHABLE, m);
        }
    }

    /** The daemon did not answer a request in time. */
    public static final class DaemonTimeout extends TagwireException {
        private static final long serialVersionUID = 1L;

        DaemonTimeout(String m) {
            super(Kind.DAEMON_TIMEOUT, m);
        }
    }

    /** No such tag. */
    public static final class UnknownTag extends TagwireException {
        private static final long serialVersionUID = 1L;

        UnknownTag(String m) {
            super(Kind.UNKNOWN_TAG, m);
        }
    }

    /** The tag was destroyed while in use. */
    public static final class TagDestroyed extends TagwireException {
        private static final long serialVersionUID = 1L;

        TagDestroyed(String m) {
            super(Kind.TAG_DESTROYED, m);
        }
    }

    /** Not a valid tag name. */
    public static final class InvalidName extends TagwireException {
        private static final long serialVersionUID = 1L;

        InvalidName(String m) {
            super(Kind.INVALID_NAME, m);
        }
    }

    /** The caller holds no send access on the tag. */
    public static final class NoSendAccess extends TagwireException {
        private static final long serialVersionUID = 1L;

        NoSendAccess(String m) {
            super(Kind.NO_SEND_ACCESS, m);
        }
    }

    /** The caller is not subscribed to the tag. */
    public static final class NotSubscribed extends TagwireException {
        private static final long serialVersionUID = 1L;

        NotSubscribed(String m) {
            super(Kind.NOT_SUBSCRIBED, m);
        }
    }

    /** The message is larger than tagwire accepts. */
    public static final class TooLarge extends TagwireException {
        private static final long serialVersionUID = 1L;

        TooLarge(String m) {
            super(Kind.TOO_LARGE, m);
        }
    }

    /**
     * The subscriber fell more than its depth behind: {@link #lost()} messages
     * were dropped, oldest first. The subscription stays valid: receive again
     * for the next one.
     */
    public static final class Overflowed extends TagwireException {
        private static final long serialVersionUID = 1L;
        private final long lost;

        Overflowed(String m, long lost) {
            super(Kind.OVERFLOWED, m);
            this.lost = lost;
        }

        /** How many messages were dropped. */
        public long lost() {
            return lost;
        }
    }

    /** A send waited its whole send timeout for a full window; nothing was sent. */
    public static final class WindowFull extends TagwireException {
        private static final long serialVersionUID = 1L;

        WindowFull(String m) {
            super(Kind.WINDOW_FULL, m);
        }
    }

    /** Every lossless gate of the tag's ring on this node is taken. */
    public static final class NoLosslessRoom extends TagwireException {
        private static final long serialVersionUID = 1L;

        NoLosslessRoom(String m) {
            super(Kind.NO_LOSSLESS_ROOM, m);
        }
    }

    /** No message within the receive timeout ({@code TW_ERR_TIMEOUT}). */
    public static final class ReceiveTimeout extends TagwireException {
        private static final long serialVersionUID = 1L;

        ReceiveTimeout(String m) {
            super(Kind.TIMEOUT, m);
        }
    }

    /** Peer daemons did not confirm a table change in time. */
    public static final class PeersUnresponsive extends TagwireException {
        private static final long serialVersionUID = 1L;

        PeersUnresponsive(String m) {
            super(Kind.PEERS_UNRESPONSIVE, m);
        }
    }

    /** A {@code proxyAuto} subscription cannot be placed; the message gives the solver's reason. */
    public static final class NoPlacement extends TagwireException {
        private static final long serialVersionUID = 1L;

        NoPlacement(String m) {
            super(Kind.NO_PLACEMENT, m);
        }
    }

    /** The daemon refused the request for another reason. */
    public static final class Refused extends TagwireException {
        private static final long serialVersionUID = 1L;

        Refused(String m) {
            super(Kind.REFUSED, m);
        }
    }

    /** A local resource failed (shared memory, descriptors). */
    public static final class IoError extends TagwireException {
        private static final long serialVersionUID = 1L;

        IoError(String m) {
            super(Kind.IO, m);
        }
    }

    /** The daemon sent something this library does not understand. */
    public static final class ProtocolError extends TagwireException {
        private static final long serialVersionUID = 1L;

        ProtocolError(String m) {
            super(Kind.PROTOCOL, m);
        }
    }

    /** An invalid argument reached the library (a NUL in a name, an unknown option value). */
    public static final class InvalidArgument extends TagwireException {
        private static final long serialVersionUID = 1L;

        InvalidArgument(String m) {
            super(Kind.INVALID_ARGUMENT, m);
        }
    }

    /**
     * The caller's buffer is too small for the next message: {@link #needed()}
     * bytes are. Nothing was lost: the message is kept for the next receive.
     */
    public static final class BufferTooSmall extends TagwireException {
        private static final long serialVersionUID = 1L;
        private final long needed;

        BufferTooSmall(String m, long needed) {
            super(Kind.BUFFER_TOO_SMALL, m);
            this.needed = needed;
        }

        /** The size of the message, bytes. */
        public long needed() {
            return needed;
        }
    }

    /**
     * A subscription asked to keep more unread messages than the tag's ring
     * has slots: ask for fewer, or create the tag with more
     * ({@link TagParams#withRing}).
     */
    public static final class DepthTooLarge extends TagwireException {
        private static final long serialVersionUID = 1L;

        DepthTooLarge(String m) {
            super(Kind.DEPTH_TOO_LARGE, m);
        }
    }

    /** The daemon's access policy does not grant this right on the tag; the message says which rule applies. */
    public static final class Denied extends TagwireException {
        private static final long serialVersionUID = 1L;

        Denied(String m) {
            super(Kind.DENIED, m);
        }
    }

    /** The socket's daemon runs as another user (neither root nor the caller's): refused. */
    public static final class ForeignDaemon extends TagwireException {
        private static final long serialVersionUID = 1L;

        ForeignDaemon(String m) {
            super(Kind.FOREIGN_DAEMON, m);
        }
    }

    /** A resource bound of the daemon was reached (connections, tags, ring bytes, history). */
    public static final class Quota extends TagwireException {
        private static final long serialVersionUID = 1L;

        Quota(String m) {
            super(Kind.QUOTA, m);
        }
    }

    /** An instance got no sample for a deadline period; the subscription stays valid. */
    public static final class DeadlineMissed extends TagwireException {
        private static final long serialVersionUID = 1L;

        DeadlineMissed(String m) {
            super(Kind.DEADLINE_MISSED, m);
        }
    }

    /**
     * The process may not ask for a thread policy (a real-time one, or a nice below 0):
     * the message says what would grant it (CAP_SYS_NICE, or the matching limit).
     */
    public static final class NotPermitted extends TagwireException {
        private static final long serialVersionUID = 1L;

        NotPermitted(String m) {
            super(Kind.NOT_PERMITTED, m);
        }
    }

    /** A bug in tagwire (a panic was caught at the boundary); please report it. */
    public static final class InternalError extends TagwireException {
        private static final long serialVersionUID = 1L;

        InternalError(String m) {
            super(Kind.INTERNAL, m);
        }
    }
}
