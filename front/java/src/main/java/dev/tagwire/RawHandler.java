package dev.tagwire;

import java.lang.foreign.MemorySegment;

/**
 * Called for each message of a callback subscription with the payload in
 * place: {@code payload} is a view of the subscription thread's own receive
 * buffer and {@code info} its reused {@link MessageInfo}, both valid only
 * during the call (copy what you keep).
 */
@FunctionalInterface
public interface RawHandler {
    /** Handles one message (an exception goes to the subscription's error handler). */
    void onMessage(MemorySegment payload, MessageInfo info) throws Exception;
}
