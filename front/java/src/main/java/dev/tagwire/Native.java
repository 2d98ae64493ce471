package dev.tagwire;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.GroupLayout;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The C ABI of libtagwire_c (front/ffi/include/tagwire.h): the library, its
 * struct layouts and one downcall handle per function. Every call is a plain
 * downcall from the calling Java thread; the binding registers no upcall, so
 * no native thread ever enters the JVM.
 */
final class Native {
    private Native() {}

    // ----------------------------------------------------------- layouts ---

    /** {@code tw_node_addr}: 16 bytes. */
    static final MemoryLayout NODE_ADDR = MemoryLayout.sequenceLayout(16, JAVA_BYTE);

    /** {@code tw_sender}: pid, node (20 bytes, align 4). */
    static final GroupLayout SENDER = MemoryLayout.structLayout(
            JAVA_INT.withName("pid"), NODE_ADDR.withName("node"));

    /** {@code tw_client_options}. */
    static final GroupLayout CLIENT_OPTIONS = MemoryLayout.structLayout(
            ADDRESS.withName("socket"),
            JAVA_LONG.withName("timeout_ms"),
            JAVA_BOOLEAN.withName("autostart"),
            MemoryLayout.paddingLayout(7),
            ADDRESS.withName("name"));

    /** {@code tw_tag_params}. */
    static final GroupLayout TAG_PARAMS = MemoryLayout.structLayout(
            JAVA_INT.withName("slots"),
            JAVA_INT.withName("slot_payload"),
            JAVA_INT.withName("history_depth"),
            MemoryLayout.paddingLayout(4),
            JAVA_LONG.withName("history_max_bytes"));

    /** {@code tw_member}: who (20), pad, since_unix_ns. */
    static final GroupLayout MEMBER = MemoryLayout.structLayout(
            SENDER.withName("who"), MemoryLayout.paddingLayout(4), JAVA_LONG.withName("since_unix_ns"));

    /** {@code tw_subscribe_options}. */
    static final GroupLayout SUBSCRIBE_OPTIONS = MemoryLayout.structLayout(
            JAVA_INT.withName("depth"),
            JAVA_INT.withName("reliability"),
            JAVA_INT.withName("carrier"),
            JAVA_INT.withName("every"),
            JAVA_INT.withName("proxy"),
            NODE_ADDR.withName("proxy_node"),
            JAVA_INT.withName("delay_bound_us"),
            JAVA_BOOLEAN.withName("lossless"),
            MemoryLayout.paddingLayout(7),
            JAVA_LONG.withName("busy_poll_ns"),
            JAVA_BOOLEAN.withName("exclusive"),
            MemoryLayout.paddingLayout(7),
            JAVA_LONG.withName("deadline_ns"),
            JAVA_LONG.withName("min_separation_ns"),
            JAVA_INT.withName("priority"),
            JAVA_INT.withName("sched"));

    /** {@code tw_history_query}. */
    static final GroupLayout HISTORY_QUERY = MemoryLayout.structLayout(
            JAVA_INT.withName("kind"), MemoryLayout.paddingLayout(4),
            JAVA_LONG.withName("a"), JAVA_LONG.withName("b"));

    /** {@code tw_message_info}. */
    static final GroupLayout MESSAGE_INFO = MemoryLayout.structLayout(
            JAVA_LONG.withName("len"),
            JAVA_LONG.withName("seq"),
            SENDER.withName("sender"),
            MemoryLayout.paddingLayout(4),
            JAVA_LONG.withName("timestamp_ns"),
            JAVA_LONG.withName("lost"),
            MemoryLayout.sequenceLayout(16, JAVA_BYTE).withName("key"),
            JAVA_BOOLEAN.withName("has_key"),
            JAVA_BYTE.withName("state"),
            JAVA_BOOLEAN.withName("has_strength"),
            MemoryLayout.paddingLayout(1),
            JAVA_INT.withName("strength"));

    /** {@code tw_tag_info}. */
    static final GroupLayout TAG_INFO = MemoryLayout.structLayout(
            ADDRESS.withName("name"),
            JAVA_INT.withName("domain"),
            MemoryLayout.paddingLayout(4),
            ADDRESS.withName("senders"),
            JAVA_LONG.withName("sender_count"),
            ADDRESS.withName("receivers"),
            JAVA_LONG.withName("receiver_count"));

    /** {@code tw_node_info}. */
    static final GroupLayout NODE_INFO = MemoryLayout.structLayout(
            NODE_ADDR.withName("node"),
            ADDRESS.withName("name"),
            JAVA_INT.withName("state"),
            MemoryLayout.paddingLayout(4),
            JAVA_LONG.withName("last_heard_ms"),
            ADDRESS.withName("source"));

    /** {@code tw_message_view}. */
    static final GroupLayout MESSAGE_VIEW = MemoryLayout.structLayout(
            ADDRESS.withName("payload"),
            JAVA_LONG.withName("len"),
            JAVA_LONG.withName("seq"),
            SENDER.withName("sender"),
            MemoryLayout.paddingLayout(4),
            JAVA_LONG.withName("timestamp_ns"));

    // Offsets used on the hot path (checked against the C compiler's by the tests).
    static final long INFO_LEN = 0, INFO_SEQ = 8, INFO_PID = 16, INFO_NODE = 20, INFO_TS = 40, INFO_LOST = 48;
    static final long INFO_KEY = 56, INFO_HAS_KEY = 72, INFO_STATE = 73, INFO_HAS_STRENGTH = 74, INFO_STRENGTH = 76;

    // ----------------------------------------------------------- loading ---

    /** Where the library was loaded from (or why it was not). */
    static String libraryPath() {
        return Lib.PATH;
    }

    /** The loaded library, or an {@link UnsatisfiedLinkError} saying how to point at it. */
    private static final class Lib {
        static final SymbolLookup LOOKUP;
        static final String PATH;
        static final String FAILURE;

        static {
            SymbolLookup lookup = null;
            String path = null;
            String failure = null;
            try {
                Object[] found = locate();
                lookup = (SymbolLookup) found[0];
                path = (String) found[1];
            } catch (RuntimeException | UnsatisfiedLinkError e) {
                failure = e.getMessage();
            }
            LOOKUP = lookup;
            PATH = path;
            FAILURE = failure;
        }

        static SymbolLookup lookup() {
            if (LOOKUP == null) {
                throw new UnsatisfiedLinkError(FAILURE);
            }
            return LOOKUP;
        }
    }

    private static Object[] locate() {
        List<String> tried = new ArrayList<>();
        String explicit = System.getProperty("tagwire.library");
        String source = "system property tagwire.library";
        if (explicit == null || explicit.isEmpty()) {
            explicit = System.getenv("TAGWIRE_LIBRARY");
            source = "TAGWIRE_LIBRARY";
        }
        if (explicit != null && !explicit.isEmpty()) {
            Path p = Path.of(explicit).toAbsolutePath();
            if (!Files.isRegularFile(p)) {
                throw new UnsatisfiedLinkError(source + " names " + p + ", which does not exist; build it with "
                        + "`cargo build --release -p tagwire-ffi` (target/release/libtagwire_c.so)");
            }
            return new Object[] {SymbolLookup.libraryLookup(p, Arena.global()), p.toString()};
        }
        try {
            System.loadLibrary("tagwire_c");
            return new Object[] {SymbolLookup.loaderLookup(), "tagwire_c (java.library.path)"};
        } catch (UnsatisfiedLinkError e) {
            tried.add("java.library.path (" + System.getProperty("java.library.path") + ")");
        }
        for (Path start : startingPoints()) {
            for (Path d = start; d != null; d = d.getParent()) {
                for (String profile : new String[] {"release", "debug"}) {
                    Path p = d.resolve("target").resolve(profile).resolve("libtagwire_c.so");
                    if (Files.isRegularFile(p) && Files.isRegularFile(d.resolve("Cargo.toml"))) {
                        return new Object[] {SymbolLookup.libraryLookup(p, Arena.global()), p.toString()};
                    }
                }
            }
            tried.add("target/{release,debug}/libtagwire_c.so above " + start);
        }
        throw new UnsatisfiedLinkError("libtagwire_c.so not found (tried " + String.join("; ", tried)
                + "). Build it with `cargo build --release -p tagwire-ffi` in the tagwire workspace, then point at it "
                + "with -Dtagwire.library=/path/to/libtagwire_c.so or TAGWIRE_LIBRARY=/path/to/libtagwire_c.so, "
                + "or put its directory on java.library.path");
    }

    /** The working directory and the directory of this class's jar or classes. */
    private static List<Path> startingPoints() {
        List<Path> out = new ArrayList<>();
        out.add(Path.of("").toAbsolutePath());
        try {
            var cs = Native.class.getProtectionDomain().getCodeSource();
            if (cs != null) {
                out.add(Path.of(cs.getLocation().toURI()).toAbsolutePath());
            }
        } catch (Exception ignored) {
            // no code source: the working directory is enough
        }
        return out;
    }

    private static MethodHandle fn(String name, FunctionDescriptor d, Linker.Option... options) {
        MemorySegment sym = Lib.lookup().find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError(name + " is missing from " + Lib.PATH
                        + ": an older libtagwire_c? Rebuild it (`cargo build --release -p tagwire-ffi`)"));
        return Linker.nativeLinker().downcallHandle(sym, d, options);
    }

    private static FunctionDescriptor status(MemoryLayout... args) {
        return FunctionDescriptor.of(JAVA_INT, args);
    }

    // Short calls that never block may skip the thread-state transition.
    private static final Linker.Option CRITICAL = Linker.Option.critical(false);

    // ----------------------------------------------------------- handles ---
    // Holders so that loading happens on first use, and a missing library
    // fails with its UnsatisfiedLinkError there.

    static final class H {
        private H() {}

        static final MethodHandle version = fn("tw_version", FunctionDescriptor.of(ADDRESS));
        static final MethodHandle client_connect_with = fn("tw_client_connect_with", status(ADDRESS, ADDRESS));
        static final MethodHandle client_free = fn("tw_client_free", FunctionDescriptor.ofVoid(ADDRESS));
        static final MethodHandle client_me = fn("tw_client_me", status(ADDRESS, ADDRESS));
        static final MethodHandle ping = fn("tw_ping", status(ADDRESS));
        static final MethodHandle create_tag_with =
                fn("tw_create_tag_with", status(ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS));
        static final MethodHandle destroy_tag = fn("tw_destroy_tag", status(ADDRESS, ADDRESS));
        static final MethodHandle set_history =
                fn("tw_set_history", status(ADDRESS, ADDRESS, JAVA_INT, JAVA_LONG));
        static final MethodHandle set_channel_qos =
                fn("tw_set_channel_qos", status(ADDRESS, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS));
        static final MethodHandle set_channel_sched =
                fn("tw_set_channel_sched", status(ADDRESS, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS));
        static final MethodHandle change_channels = fn(
                "tw_change_channels", status(ADDRESS, ADDRESS, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS));
        static final MethodHandle change_publishers = fn(
                "tw_change_publishers", status(ADDRESS, ADDRESS, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS));
        static final MethodHandle change_pacing = fn(
                "tw_change_pacing", status(ADDRESS, ADDRESS, ADDRESS, JAVA_INT, JAVA_LONG, ADDRESS));
        static final MethodHandle senders =
                fn("tw_senders", status(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS));
        static final MethodHandle receivers =
                fn("tw_receivers", status(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS));
        static final MethodHandle publisher_new = fn("tw_publisher_new", status(ADDRESS, ADDRESS, ADDRESS));
        static final MethodHandle publisher_new_with =
                fn("tw_publisher_new_with", status(ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        static final MethodHandle publisher_free = fn("tw_publisher_free", FunctionDescriptor.ofVoid(ADDRESS));
        static final MethodHandle publisher_send =
                fn("tw_publisher_send", status(ADDRESS, ADDRESS, JAVA_LONG, ADDRESS));
        static final MethodHandle publisher_send_keyed = fn("tw_publisher_send_keyed",
                status(ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS));
        static final MethodHandle publisher_dispose =
                fn("tw_publisher_dispose", status(ADDRESS, ADDRESS, JAVA_LONG, ADDRESS));
        static final MethodHandle publisher_unregister =
                fn("tw_publisher_unregister", status(ADDRESS, ADDRESS, JAVA_LONG, ADDRESS));
        static final MethodHandle publisher_offer_deadline =
                fn("tw_publisher_offer_deadline", status(ADDRESS, JAVA_LONG));
        static final MethodHandle publisher_missed_deadline =
                fn("tw_publisher_missed_deadline", status(ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        static final MethodHandle publisher_set_strength =
                fn("tw_publisher_set_strength", status(ADDRESS, JAVA_BOOLEAN, JAVA_INT));
        static final MethodHandle publisher_set_send_timeout =
                fn("tw_publisher_set_send_timeout", status(ADDRESS, JAVA_LONG));
        static final MethodHandle publisher_last_seq =
                fn("tw_publisher_last_seq", FunctionDescriptor.of(JAVA_LONG, ADDRESS), CRITICAL);
        static final MethodHandle publisher_max_fast_message =
                fn("tw_publisher_max_fast_message", FunctionDescriptor.of(JAVA_LONG, ADDRESS), CRITICAL);
        static final MethodHandle subscribe = fn("tw_subscribe", status(ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        static final MethodHandle subscribe_with_history =
                fn("tw_subscribe_with_history", status(ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        static final MethodHandle subscriber_free = fn("tw_subscriber_free", FunctionDescriptor.ofVoid(ADDRESS));
        static final MethodHandle subscriber_receive =
                fn("tw_subscriber_receive", status(ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS));
        static final MethodHandle subscriber_available =
                fn("tw_subscriber_available", FunctionDescriptor.of(JAVA_BOOLEAN, ADDRESS), CRITICAL);
        static final MethodHandle subscriber_purge =
                fn("tw_subscriber_purge", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        static final MethodHandle subscriber_lost =
                fn("tw_subscriber_lost", FunctionDescriptor.of(JAVA_LONG, ADDRESS), CRITICAL);
        static final MethodHandle subscriber_received =
                fn("tw_subscriber_received", FunctionDescriptor.of(JAVA_LONG, ADDRESS), CRITICAL);
        static final MethodHandle last_error = fn("tw_last_error", FunctionDescriptor.of(ADDRESS));
        static final MethodHandle status_name = fn("tw_status_name", FunctionDescriptor.of(ADDRESS, JAVA_INT));
        static final MethodHandle tags = fn("tw_tags", status(ADDRESS, ADDRESS));
        static final MethodHandle tag_list_len = fn("tw_tag_list_len", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        static final MethodHandle tag_list_get = fn("tw_tag_list_get", status(ADDRESS, JAVA_LONG, ADDRESS));
        static final MethodHandle tag_list_free = fn("tw_tag_list_free", FunctionDescriptor.ofVoid(ADDRESS));
        static final MethodHandle nodes = fn("tw_nodes", status(ADDRESS, ADDRESS));
        static final MethodHandle node_list_len = fn("tw_node_list_len", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        static final MethodHandle node_list_get = fn("tw_node_list_get", status(ADDRESS, JAVA_LONG, ADDRESS));
        static final MethodHandle node_list_free = fn("tw_node_list_free", FunctionDescriptor.ofVoid(ADDRESS));
        static final MethodHandle pull = fn("tw_pull", status(ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        static final MethodHandle message_list_len =
                fn("tw_message_list_len", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        static final MethodHandle message_list_get =
                fn("tw_message_list_get", status(ADDRESS, JAVA_LONG, ADDRESS));
        static final MethodHandle message_list_free =
                fn("tw_message_list_free", FunctionDescriptor.ofVoid(ADDRESS));
        static final MethodHandle client_options_default =
                fn("tw_client_options_default", FunctionDescriptor.of(CLIENT_OPTIONS));
        static final MethodHandle subscribe_options_default =
                fn("tw_subscribe_options_default", FunctionDescriptor.of(SUBSCRIBE_OPTIONS));
        static final MethodHandle node_addr_format =
                fn("tw_node_addr_format", FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG));
        static final MethodHandle node_addr_parse = fn("tw_node_addr_parse", status(ADDRESS, ADDRESS));
    }

    // ------------------------------------------------------------ memory ---

    private static final MethodHandle MALLOC = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("malloc").orElseThrow(),
            FunctionDescriptor.of(ADDRESS, JAVA_LONG));
    private static final MethodHandle FREE = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("free").orElseThrow(),
            FunctionDescriptor.ofVoid(ADDRESS));

    /**
     * {@code size} zeroed bytes from the C heap, as a segment of the global
     * scope: passing it to a downcall costs no session acquire (a shared
     * arena's costs two atomic operations per call). The owner frees it
     * with {@link #free} once no call can use it (the handles' guard).
     */
    static MemorySegment malloc(long size) {
        try {
            MemorySegment p = (MemorySegment) MALLOC.invokeExact(Math.max(1, size));
            if (p.equals(MemorySegment.NULL)) {
                throw new OutOfMemoryError("malloc(" + size + ") failed");
            }
            return p.reinterpret(size).fill((byte) 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Frees what {@link #malloc} returned (NULL is fine). */
    static void free(MemorySegment p) {
        try {
            FREE.invokeExact(p);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ----------------------------------------------------------- helpers ---

    /** Rethrows what a handle invocation threw (only errors and runtime exceptions are possible). */
    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException("unexpected checked exception from a downcall", t);
    }

    /**
     * The exception for a failed call: its kind from the status and its text
     * from {@code tw_last_error()}, read at once on the calling thread (the
     * message is thread-local in the library).
     */
    static TagwireException failure(int status) {
        return TagwireException.of(status, lastError(), 0, 0);
    }

    /** As {@link #failure(int)}, with the lost count and needed size a receive reported. */
    static TagwireException failure(int status, long lost, long needed) {
        return TagwireException.of(status, lastError(), lost, needed);
    }

    static void check(int status) {
        if (status != 0) {
            throw failure(status);
        }
    }

    static String lastError() {
        try {
            MemorySegment p = (MemorySegment) H.last_error.invokeExact();
            return cString(p);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The text of a NUL-terminated C string (empty for NULL). */
    static String cString(MemorySegment p) {
        if (p.equals(MemorySegment.NULL)) {
            return "";
        }
        return p.reinterpret(Integer.MAX_VALUE).getString(0);
    }

    static String statusName(int status) {
        try {
            return cString((MemorySegment) H.status_name.invokeExact(status));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static String version() {
        try {
            return cString((MemorySegment) H.version.invokeExact());
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The ABI's timeout: nanoseconds, negative for ever, 0 polls. */
    static long timeoutNs(java.time.Duration timeout) {
        if (timeout == null) {
            return -1;
        }
        if (timeout.isNegative()) {
            return 0;
        }
        long s = timeout.getSeconds();
        if (s >= 9_000_000_000L) {
            return -1; // beyond 285 years: for ever
        }
        return s * 1_000_000_000L + timeout.getNano();
    }
}
