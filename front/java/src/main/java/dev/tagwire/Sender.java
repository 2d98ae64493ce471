package dev.tagwire;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Arrays;

/**
 * Who sent a message, or who is on a tag: a process id and its node's
 * address. Printed as {@code pid@node}, as the Rust and C++ APIs print it.
 */
public final class Sender {
    private final long pid;
    private final byte[] node;

    Sender(long pid, byte[] node) {
        this.pid = pid;
        this.node = node;
    }

    /** Reads a {@code tw_sender} at {@code offset} of {@code s}. */
    static Sender read(MemorySegment s, long offset) {
        long pid = Integer.toUnsignedLong(s.get(ValueLayout.JAVA_INT, offset));
        byte[] node = new byte[16];
        MemorySegment.copy(s, ValueLayout.JAVA_BYTE, offset + 4, node, 0, 16);
        return new Sender(pid, node);
    }

    /** The process id (compare with {@code ProcessHandle.current().pid()}). */
    public long pid() {
        return pid;
    }

    /** The node's address: an {@code Inet4Address} for IPv4 nodes, else IPv6. */
    public InetAddress node() {
        try {
            return InetAddress.getByAddress(node.clone());
        } catch (UnknownHostException e) {
            throw new IllegalStateException("16 bytes are always an address", e);
        }
    }

    /** The node's 16 address bytes (IPv6, or IPv4-mapped {@code ::ffff:a.b.c.d}). */
    public byte[] nodeBytes() {
        return node.clone();
    }

    /** The node as the other APIs print it ("10.0.0.1", or an IPv6 address). */
    public String nodeString() {
        return formatNode(node);
    }

    static String formatNode(byte[] node) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment addr = a.allocate(16);
            MemorySegment.copy(node, 0, addr, ValueLayout.JAVA_BYTE, 0, 16);
            MemorySegment buf = a.allocate(64);
            long n = (long) Native.H.node_addr_format.invokeExact(addr, buf, 64L);
            return buf.getString(0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Sender s && s.pid == pid && Arrays.equals(s.node, node);
    }

    @Override
    public int hashCode() {
        return Long.hashCode(pid) * 31 + Arrays.hashCode(node);
    }

    /** {@code pid@node}. */
    @Override
    public String toString() {
        return pid + "@" + nodeString();
    }
}
