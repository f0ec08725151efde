package rmqblocking.bench;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The Java side of the consume workloads of benches/compare-java.sh, doing what
 * `rmq bench consume` does: drain a topic from its first offset with a new group and stop
 * after -q distinct messages, told apart by (broker, queue, offset); a delivery of an offset
 * seen before counts as a duplicate.
 *
 * -m push: DefaultMQPushConsumer with consumeThreadMin/Max -w (20, as the Java benchmark
 * Consumer), CONSUME_FROM_FIRST_OFFSET, a concurrently listener that counts. -m litepull:
 * DefaultLitePullConsumer (default options), subscribe, CONSUME_FROM_FIRST_OFFSET, a poll loop
 * on the main thread.
 *
 * Options: -n namesrv (or NAMESRV_ADDR) -t topic -g group -m push|litepull -w threads
 * -q count -T timeout seconds (from the consumer's start). Output: a human line, then a JSON
 * line: messages (distinct, at most -q), deliveries, duplicates, elapsedMs (consumer start to
 * the last counted message), tps, firstMessageEpochUs (wall clock of the first message, µs
 * since the epoch). Exit status 1 unless -q distinct messages arrived in time.
 */
public final class Consume {
    public static void main(String[] args) throws Exception {
        System.setProperty("rocketmq.serialize.type", "ROCKETMQ");
        Map<String, String> o = Bench.options(args, "-n", "-t", "-g", "-m", "-w", "-q", "-T");
        String namesrv = o.getOrDefault("-n", System.getenv("NAMESRV_ADDR"));
        String topic = o.getOrDefault("-t", "BenchmarkTest");
        String group = o.get("-g");
        String mode = o.getOrDefault("-m", "push");
        int threads = Integer.parseInt(o.getOrDefault("-w", "20"));
        long count = Long.parseLong(o.getOrDefault("-q", "0"));
        long timeoutSec = Long.parseLong(o.getOrDefault("-T", "60"));
        boolean push = mode.equals("push");
        if (count <= 0 || namesrv == null || group == null || !(push || mode.equals("litepull"))) {
            System.err.println("usage: Consume -n namesrv -g group -q count [-t topic] [-m push|litepull] [-w threads] [-T timeout-seconds]");
            System.exit(2);
        }
        if (!push) {
            threads = 1;
        }
        System.out.printf("topic: %s group: %s mode: %s threadCount: %d count: %d clientVersion: %s%n",
            topic, group, mode, threads, count, MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));

        Tally tally = new Tally(count);
        long begin = System.nanoTime();
        long deadline = begin + TimeUnit.SECONDS.toNanos(timeoutSec);
        if (push) {
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
            consumer.setNamesrvAddr(namesrv);
            consumer.setConsumeThreadMin(threads);
            consumer.setConsumeThreadMax(threads);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                tally.record(msgs);
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            tally.done.await(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            consumer.shutdown();
        } else {
            DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
            consumer.setNamesrvAddr(namesrv);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.subscribe(topic, "*");
            consumer.start();
            while (tally.done.getCount() > 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                // At most half a second per poll, so that the count is checked often.
                tally.record(consumer.poll(Math.max(1, Math.min(500, TimeUnit.NANOSECONDS.toMillis(left)))));
            }
            consumer.shutdown();
        }

        long messages;
        long deliveries;
        long duplicates;
        long lastNanos;
        long firstUs;
        synchronized (tally) {
            messages = Math.min(tally.distinct, count);
            deliveries = tally.deliveries;
            duplicates = tally.duplicates;
            lastNanos = tally.lastNanos;
            firstUs = tally.firstUs;
        }
        double elapsedMs = lastNanos == 0 ? timeoutSec * 1000.0 : (lastNanos - begin) / 1e6;
        double tps = messages / Math.max(elapsedMs / 1000.0, 1e-9);
        String modeName = push ? "concurrently" : "lite-pull";
        System.out.println(String.format(Locale.ROOT,
            "%d messages consumed (%d duplicates) in %.2f s: %.0f msg/s", messages, duplicates, elapsedMs / 1000.0, tps));
        System.out.println(String.format(Locale.ROOT,
            "{\"client\":\"java\",\"clientVersion\":\"%s\",\"mode\":\"%s\",\"topic\":\"%s\",\"group\":\"%s\",\"threads\":%d,\"messages\":%d,\"deliveries\":%d,\"duplicates\":%d,\"elapsedMs\":%.1f,\"tps\":%.1f,\"firstMessageEpochUs\":%s}",
            MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION), modeName, topic, group, threads, messages, deliveries,
            duplicates, elapsedMs, tps, firstUs == 0 ? "null" : Long.toString(firstUs)));
        System.exit(messages == count ? 0 : 1);
    }

    /** What the listener threads (or the poll loop) share with the main thread. */
    private static final class Tally {
        final long count;
        final CountDownLatch done = new CountDownLatch(1);
        final Map<String, Map<Integer, OffsetSet>> seen = new HashMap<>();
        long distinct;
        long deliveries;
        long duplicates;
        long firstUs;
        long lastNanos;

        Tally(long count) {
            this.count = count;
        }

        /** Messages beyond the count are acknowledged but not counted: the run is over. */
        synchronized void record(List<MessageExt> msgs) {
            for (MessageExt m : msgs) {
                deliveries++;
                OffsetSet queue = seen.computeIfAbsent(m.getBrokerName(), b -> new HashMap<>())
                    .computeIfAbsent(m.getQueueId(), q -> new OffsetSet());
                if (!queue.add(m.getQueueOffset())) {
                    duplicates++;
                    continue;
                }
                distinct++;
                if (distinct > count) {
                    continue;
                }
                if (firstUs == 0) {
                    firstUs = Bench.epochMicros();
                }
                lastNanos = System.nanoTime();
                if (distinct == count) {
                    done.countDown();
                }
            }
        }
    }

    /**
     * Offsets of one queue as a bitmap over the range seen so far (a queue's offsets are
     * dense: a million take 125 KiB), the same structure as `rmq bench consume` uses.
     */
    private static final class OffsetSet {
        private long base;
        private long[] words = new long[0];

        /** Adds the offset; false if it was there already. */
        boolean add(long offset) {
            long word = Math.floorDiv(offset, 64);
            if (words.length == 0) {
                base = word;
                words = new long[16];
            } else if (word < base) {
                // Consume threads finish out of order: an earlier offset may come later.
                int grow = Math.toIntExact(base - word);
                long[] w = new long[words.length + grow];
                System.arraycopy(words, 0, w, grow, words.length);
                words = w;
                base = word;
            }
            int i = Math.toIntExact(word - base);
            if (i >= words.length) {
                words = Arrays.copyOf(words, Math.max(i + 1, words.length * 2));
            }
            long bit = 1L << Math.floorMod(offset, 64);
            boolean fresh = (words[i] & bit) == 0;
            words[i] |= bit;
            return fresh;
        }
    }

    private Consume() {
    }
}
