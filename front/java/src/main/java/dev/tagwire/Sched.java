package dev.tagwire;

/**
 * The scheduling of the threads that bring a subscription its messages from other nodes (the
 * sending nodes' forwarders, this node's inbound threads; {@link SubscribeOptions#sched}). A
 * real-time policy, or a nice value below 0, needs CAP_SYS_NICE or the matching resource limit;
 * without it the subscribe throws {@link TagwireException.NotPermitted}.
 */
public final class Sched {
    /** The library's {@code TW_SCHED_*} code: the policy in bits 8-15, the value in bits 0-7. */
    final int code;
    private final String text;

    private Sched(int code, String text) {
        this.code = code;
        this.text = text;
    }

    /** The time-sharing policy at nice value {@code nice} (-20..19; 0 is the default). */
    public static Sched other(int nice) {
        if (nice < -20 || nice > 19) {
            throw new IllegalArgumentException("a nice value is -20..19: " + nice);
        }
        return new Sched(nice & 0xff, nice == 0 ? "other" : "other:" + nice);
    }

    /** SCHED_FIFO at real-time priority {@code priority} (1..99). */
    public static Sched fifo(int priority) {
        return new Sched(0x100 | realTime(priority), "fifo:" + priority);
    }

    /** SCHED_RR at real-time priority {@code priority} (1..99). */
    public static Sched roundRobin(int priority) {
        return new Sched(0x200 | realTime(priority), "rr:" + priority);
    }

    private static int realTime(int priority) {
        if (priority < 1 || priority > 99) {
            throw new IllegalArgumentException("a real-time priority is 1..99: " + priority);
        }
        return priority;
    }

    /** As tagwire writes it: {@code other}, {@code other:N}, {@code fifo:P}, {@code rr:P}. */
    @Override
    public String toString() {
        return text;
    }
}
