package dev.tagwire;

/**
 * Called for each message of a {@link Client#subscribe(String, SubscribeOptions, MessageHandler)
 * callback subscription}, on the subscription's own Java thread.
 */
@FunctionalInterface
public interface MessageHandler {
    /** Handles one message (an exception goes to the subscription's error handler). */
    void onMessage(Message message) throws Exception;
}
