package rmqblocking.bench;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.ThreadLocalRandom;

import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.message.Message;

/**
 * What org.apache.rocketmq.example.benchmark.Producer does (that artifact is not on Maven
 * Central for 5.3.3), with a fixed count and latency percentiles: one producer shared by all
 * threads, group benchmark_producer, instance name = current millis, ROCKETMQ binary headers,
 * no compression, a random alphanumeric body built once; -q split evenly across -w threads,
 * the remainder to thread 0. Async mode (-y true) uses one thread and at most -i sends
 * outstanding (the Java Producer instead sleeps while its callback queue holds > 10 000; the
 * window makes it comparable with `rmq bench produce --mode async --inflight`). With -b N
 * (sync only) each call sends a batch of N messages, as the Java BatchProducer does; counts
 * stay in messages and latency is per call. With -o true the threads call sendOneway, and a
 * call that returns counts as acknowledged (there is no acknowledgement).
 *
 * Options: -n namesrv (or NAMESRV_ADDR) -t topic -w threads -s size -q count -y true|false
 * -i inflight -b batch -o true|false. Output: the Producer's "[Complete] ..." line with p50/p99/max
 * appended, then a JSON line whose firstAckEpochUs is the wall clock (µs since the epoch) of
 * the first acknowledgement. Exit status 1 unless every message was acknowledged with SEND_OK.
 */
public final class Bench {
    public static void main(String[] args) throws Exception {
        System.setProperty("rocketmq.serialize.type", "ROCKETMQ");
        Map<String, String> o = options(args, "-n", "-t", "-w", "-s", "-q", "-y", "-o", "-i", "-b");
        String namesrv = o.getOrDefault("-n", System.getenv("NAMESRV_ADDR"));
        String topic = o.getOrDefault("-t", "BenchmarkTest");
        int threads = Integer.parseInt(o.getOrDefault("-w", "64"));
        int size = Integer.parseInt(o.getOrDefault("-s", "128"));
        long quantity = Long.parseLong(o.getOrDefault("-q", "0"));
        boolean async = Boolean.parseBoolean(o.get("-y"));
        boolean oneway = Boolean.parseBoolean(o.get("-o"));
        int inflight = Integer.parseInt(o.getOrDefault("-i", "1024"));
        int batch = Integer.parseInt(o.getOrDefault("-b", "1"));
        if (quantity <= 0 || namesrv == null || batch < 1 || ((async || oneway) && batch > 1) || (async && oneway)) {
            System.err.println("usage: Bench -n namesrv -q count [-t topic] [-w threads] [-s size] [-y true] [-i inflight] [-b batch (sync only)] [-o true (oneway)]");
            System.exit(2);
        }
        if (async) {
            threads = 1;
        }
        System.out.printf("topic: %s threadCount: %d messageSize: %d messageQuantity: %d asyncEnable: %s onewayEnable: %s batchSize: %d clientVersion: %s%n",
            topic, threads, size, quantity, async, oneway, batch, MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));

        DefaultMQProducer producer = new DefaultMQProducer("benchmark_producer");
        producer.setInstanceName(Long.toString(System.currentTimeMillis()));
        producer.setNamesrvAddr(namesrv);
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        producer.start();

        byte[] body = new byte[size];
        String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        for (int i = 0; i < size; i++) {
            body[i] = (byte) alphabet.charAt(ThreadLocalRandom.current().nextInt(alphabet.length()));
        }
        final String theTopic = topic;
        final int batchSize = batch;
        final boolean fireAndForget = oneway;

        // Latency of every acknowledged send call, in nanoseconds; slot = completion order.
        long[] rt = new long[(int) quantity];
        AtomicInteger calls = new AtomicInteger();
        AtomicInteger acked = new AtomicInteger();
        AtomicLong firstAckUs = new AtomicLong();
        AtomicLong sendFailed = new AtomicLong();
        AtomicLong responseFailed = new AtomicLong();

        long start = System.nanoTime();
        if (async) {
            Semaphore window = new Semaphore(inflight);
            CountDownLatch done = new CountDownLatch((int) quantity);
            for (long n = 0; n < quantity; n++) {
                window.acquire();
                long t0 = System.nanoTime();
                try {
                    producer.send(new Message(theTopic, body), new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            long t = System.nanoTime() - t0;
                            if (r.getSendStatus() == SendStatus.SEND_OK) {
                                if (firstAckUs.get() == 0) {
                                    firstAckUs.compareAndSet(0, epochMicros());
                                }
                                rt[calls.getAndIncrement()] = t;
                                acked.incrementAndGet();
                            } else {
                                responseFailed.incrementAndGet();
                            }
                            window.release();
                            done.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            sendFailed.incrementAndGet();
                            window.release();
                            done.countDown();
                        }
                    });
                } catch (Exception e) {
                    sendFailed.incrementAndGet();
                    window.release();
                    done.countDown();
                }
            }
            if (!done.await(120, TimeUnit.SECONDS)) {
                System.err.println("async callbacks missing after 120 s: " + done.getCount());
            }
        } else {
            Thread[] workers = new Thread[threads];
            for (int w = 0; w < threads; w++) {
                long mine = quantity / threads + (w == 0 ? quantity % threads : 0);
                workers[w] = new Thread(() -> {
                    for (long left = mine; left > 0; ) {
                        int n = (int) Math.min(left, batchSize);
                        left -= n;
                        long t0 = System.nanoTime();
                        try {
                            SendStatus status = SendStatus.SEND_OK;
                            if (fireAndForget) {
                                producer.sendOneway(new Message(theTopic, body));
                            } else if (batchSize > 1) {
                                status = producer.send(messages(theTopic, body, n)).getSendStatus();
                            } else {
                                status = producer.send(new Message(theTopic, body)).getSendStatus();
                            }
                            long t = System.nanoTime() - t0;
                            if (status == SendStatus.SEND_OK) {
                                if (firstAckUs.get() == 0) {
                                    firstAckUs.compareAndSet(0, epochMicros());
                                }
                                rt[calls.getAndIncrement()] = t;
                                acked.addAndGet(n);
                            } else {
                                responseFailed.addAndGet(n);
                            }
                        } catch (MQBrokerException e) {
                            responseFailed.addAndGet(n);
                        } catch (Exception e) {
                            sendFailed.addAndGet(n);
                        }
                    }
                }, "bench-" + w);
                workers[w].start();
            }
            for (Thread t : workers) {
                t.join();
            }
        }
        double elapsedMs = (System.nanoTime() - start) / 1e6;
        producer.shutdown();

        int n = acked.get();
        int c = calls.get();
        long[] lat = Arrays.copyOf(rt, c);
        Arrays.sort(lat);
        double sum = 0;
        for (long l : lat) {
            sum += l;
        }
        double avg = c == 0 ? 0 : sum / c / 1e6;
        double p50 = pct(lat, 0.50);
        double p99 = pct(lat, 0.99);
        double max = c == 0 ? 0 : lat[c - 1] / 1e6;
        double tps = n / (elapsedMs / 1000.0);
        System.out.println(String.format(Locale.ROOT,
            "[Complete] Send Total: %d Send TPS: %d Max RT(ms): %d Average RT(ms): %7.3f Send Failed: %d Response Failed: %d | p50(ms): %.3f p99(ms): %.3f max(ms): %.3f elapsed(ms): %.0f",
            n, Math.round(tps), Math.round(max), avg, sendFailed.get(), responseFailed.get(), p50, p99, max, elapsedMs));
        System.out.println(String.format(Locale.ROOT,
            "{\"client\":\"java\",\"clientVersion\":\"%s\",\"mode\":\"%s\",\"threads\":%d,\"size\":%d,\"batch\":%d,\"messages\":%d,\"failures\":%d,\"elapsedMs\":%.3f,\"tps\":%.1f,\"latencyMs\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f,\"calls\":%d},\"firstAckEpochUs\":%s}",
            MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION), async ? "async" : oneway ? "oneway" : "sync", threads, size, batchSize, n,
            sendFailed.get() + responseFailed.get(), elapsedMs, tps, p50, p99, max, c,
            firstAckUs.get() == 0 ? "null" : Long.toString(firstAckUs.get())));
        System.exit(n == quantity ? 0 : 1);
    }

    /** "-x value" pairs; an option not among `known` is an error. */
    static Map<String, String> options(String[] args, String... known) {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!Arrays.asList(known).contains(args[i]) || i + 1 == args.length) {
                throw new IllegalArgumentException("unknown option or missing value: " + args[i]);
            }
            options.put(args[i], args[i + 1]);
        }
        return options;
    }

    /** A batch of n messages sharing one body (Java BatchProducer builds one per call too). */
    private static List<Message> messages(String topic, byte[] body, int n) {
        List<Message> batch = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            batch.add(new Message(topic, body));
        }
        return batch;
    }

    /** The wall clock in microseconds since the epoch, as the harness subtracts it. */
    static long epochMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /** Nearest-rank percentile of sorted nanoseconds, in milliseconds. */
    private static double pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(i, sorted.length - 1))] / 1e6;
    }

    private Bench() {
    }
}
