package dev.tagwire.examples;

import dev.tagwire.Client;
import dev.tagwire.ClientOptions;
import dev.tagwire.Domain;
import dev.tagwire.SubscribeOptions;
import dev.tagwire.Subscription;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A simple subscriber: the ORTE paper's Figure 4 on tagwire. Its callback
 * prints each message with its sender; it runs on a Java thread that the
 * binding owns (no native thread calls into the JVM).
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp tagwire.jar dev.tagwire.examples.SimpleSubscriber \
 *     [--socket S] [--tag /example/hello] [--count N] [--timeout-ms T]
 * </pre>
 */
public final class SimpleSubscriber {
    private SimpleSubscriber() {}

    public static void main(String[] args) throws InterruptedException {
        String socket = null;
        String tag = "/example/hello";
        long count = Long.MAX_VALUE;
        long timeoutMs = Long.MAX_VALUE;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--socket" -> socket = args[i + 1];
                case "--tag" -> tag = args[i + 1];
                case "--count" -> count = Long.parseLong(args[i + 1]);
                case "--timeout-ms" -> timeoutMs = Long.parseLong(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        ClientOptions o = ClientOptions.defaults().name("SimpleSubscriber");
        if (socket != null) {
            o.socket(socket);
        }
        CountDownLatch done = new CountDownLatch(count > Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) count);
        try (Client tw = Client.connect(o)) {
            tw.createTag(tag, Domain.GLOBAL);
            // The callback (ORTE's recvCallBack).
            try (Subscription s = tw.subscribe(tag, new SubscribeOptions().depth(64), m -> {
                System.out.println("received seq " + m.seq() + " from " + m.sender() + ": " + m.text());
                System.out.flush();
                done.countDown();
            })) {
                System.out.println("subscribed to " + tag);
                System.out.flush();
                if (!done.await(timeoutMs, TimeUnit.MILLISECONDS)) {
                    System.err.println("timed out after " + s.received() + " messages");
                    System.exit(1);
                }
            }
        }
    }
}
