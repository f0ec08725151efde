package rmqblocking.bench;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
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
 * window makes it comparable with `rmq bench produce --mode async --inflight`).
 *
 * Options: -n namesrv (or NAMESRV_ADDR) -t topic -w threads -s size -q count -y true|false
 * -i inflight. Output: the Producer's "[Complete] ..." line with p50/p99/max appended, then a
 * JSON line. Exit status 1 unless every message was acknowledged with SEND_OK.
 */
public final class Bench {
    public static void main(String[] args) throws Exception {
        System.setProperty("rocketmq.serialize.type", "ROCKETMQ");
        String namesrv = System.getenv("NAMESRV_ADDR");
        String topic = "BenchmarkTest";
        int threads = 64;
        int size = 128;
        long quantity = 0;
        boolean async = false;
        int inflight = 1024;
        for (int i = 0; i + 1 < args.length; i += 2) {
            String v = args[i + 1];
            switch (args[i]) {
                case "-n": namesrv = v; break;
                case "-t": topic = v; break;
                case "-w": threads = Integer.parseInt(v); break;
                case "-s": size = Integer.parseInt(v); break;
                case "-q": quantity = Long.parseLong(v); break;
                case "-y": async = Boolean.parseBoolean(v); break;
                case "-i": inflight = Integer.parseInt(v); break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (quantity <= 0 || namesrv == null) {
            System.err.println("usage: Bench -n namesrv -q count [-t topic] [-w threads] [-s size] [-y true] [-i inflight]");
            System.exit(2);
        }
        if (async) {
            threads = 1;
        }
        System.out.printf("topic: %s threadCount: %d messageSize: %d messageQuantity: %d asyncEnable: %s clientVersion: %s%n",
            topic, threads, size, quantity, async, MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));

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

        // Latency of every acknowledged send, in nanoseconds; slot = completion order.
        long[] rt = new long[(int) quantity];
        AtomicInteger acked = new AtomicInteger();
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
                                rt[acked.getAndIncrement()] = t;
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
                    for (long n = 0; n < mine; n++) {
                        long t0 = System.nanoTime();
                        try {
                            SendResult r = producer.send(new Message(theTopic, body));
                            long t = System.nanoTime() - t0;
                            if (r.getSendStatus() == SendStatus.SEND_OK) {
                                rt[acked.getAndIncrement()] = t;
                            } else {
                                responseFailed.incrementAndGet();
                            }
                        } catch (MQBrokerException e) {
                            responseFailed.incrementAndGet();
                        } catch (Exception e) {
                            sendFailed.incrementAndGet();
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
        long[] lat = Arrays.copyOf(rt, n);
        Arrays.sort(lat);
        double sum = 0;
        for (long l : lat) {
            sum += l;
        }
        double avg = n == 0 ? 0 : sum / n / 1e6;
        double p50 = pct(lat, 0.50);
        double p99 = pct(lat, 0.99);
        double max = n == 0 ? 0 : lat[n - 1] / 1e6;
        double tps = n / (elapsedMs / 1000.0);
        System.out.println(String.format(Locale.ROOT,
            "[Complete] Send Total: %d Send TPS: %d Max RT(ms): %d Average RT(ms): %7.3f Send Failed: %d Response Failed: %d | p50(ms): %.3f p99(ms): %.3f max(ms): %.3f elapsed(ms): %.0f",
            n, Math.round(tps), Math.round(max), avg, sendFailed.get(), responseFailed.get(), p50, p99, max, elapsedMs));
        System.out.println(String.format(Locale.ROOT,
            "{\"client\":\"java\",\"clientVersion\":\"%s\",\"mode\":\"%s\",\"threads\":%d,\"size\":%d,\"messages\":%d,\"failures\":%d,\"elapsedMs\":%.3f,\"tps\":%.1f,\"latencyMs\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f}}",
            MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION), async ? "async" : "sync", threads, size, n,
            sendFailed.get() + responseFailed.get(), elapsedMs, tps, p50, p99, max));
        System.exit(n == quantity ? 0 : 1);
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
