package dev.tagwire;

/**
 * How a publisher's node paces the tag's reliable streams to other nodes ({@link
 * PublishOptions#pacing}, {@link Client#changePacing}): as its daemon is set, not at all,
 * adaptively from each stream's send-window occupancy (NAPA: the path's rate without filling a
 * bottleneck's queue), or at a fixed rate. Publishers of one tag on one node that ask differently
 * share the lowest fixed rate, else adaptive, else off.
 */
public final class Pacing {
    /** As the sending daemon is set ({@code tagwire daemon --pacing}); the default. */
    public static final Pacing DAEMON = new Pacing(0, 0, "daemon");
    /** Not paced: the reliable window alone. */
    public static final Pacing OFF = new Pacing(1, 0, "off");
    /** Paced from each stream's send-window occupancy. */
    public static final Pacing ADAPTIVE = new Pacing(2, 0, "adaptive");

    /** The library's {@code TW_PACING_*} code. */
    final int code;
    /** Bytes per second with {@code TW_PACING_FIXED}, else 0. */
    final long rate;
    private final String text;

    private Pacing(int code, long rate, String text) {
        this.code = code;
        this.rate = rate;
        this.text = text;
    }

    /** Released at {@code bytesPerSecond} (> 0) on the wire, whatever the acknowledgements say. */
    public static Pacing fixed(long bytesPerSecond) {
        if (bytesPerSecond <= 0) {
            throw new IllegalArgumentException("a fixed pace is above 0 bytes per second: " + bytesPerSecond);
        }
        return new Pacing(3, bytesPerSecond, "fixed:" + bytesPerSecond);
    }

    /** As tagwire writes it: {@code daemon}, {@code off}, {@code adaptive}, {@code fixed:RATE}. */
    @Override
    public String toString() {
        return text;
    }
}
