package dev.tagwire.examples;

import dev.tagwire.Client;
import dev.tagwire.ClientOptions;
import dev.tagwire.Domain;
import dev.tagwire.Publisher;
import java.time.Duration;

/**
 * A simple publisher: the ORTE paper's Figure 3 on tagwire. It sends
 * "Hello World (n)" on a tag, once per period.
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp tagwire.jar dev.tagwire.examples.SimplePublisher \
 *     [--socket S] [--tag /example/hello] [--count N] [--period-ms 1000] [--wait-receivers K]
 * </pre>
 */
public final class SimplePublisher {
    private SimplePublisher() {}

    public static void main(String[] args) throws InterruptedException {
        String socket = null;
        String tag = "/example/hello";
        long count = Long.MAX_VALUE;
        long periodMs = 1000;
        int waitReceivers = 0;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--socket" -> socket = args[i + 1];
                case "--tag" -> tag = args[i + 1];
                case "--count" -> count = Long.parseLong(args[i + 1]);
                case "--period-ms" -> periodMs = Long.parseLong(args[i + 1]);
                case "--wait-receivers" -> waitReceivers = Integer.parseInt(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        ClientOptions o = ClientOptions.defaults().name("SimplePublisher");
        if (socket != null) {
            o.socket(socket);
        }
        try (Client tw = Client.connect(o)) {
            tw.createTag(tag, Domain.GLOBAL);
            try (Publisher pub = tw.publisher(tag)) {
                while (tw.receivers(tag).size() < waitReceivers) {
                    Thread.sleep(10);
                }
                for (long n = 1; n <= count; n++) {
                    long seq = pub.send("Hello World (" + n + ")");
                    System.out.println("sent seq " + seq + ": Hello World (" + n + ")");
                    if (n < count) {
                        Thread.sleep(Duration.ofMillis(periodMs));
                    }
                }
            }
        }
    }
}
