package rmqblocking.bench;

import java.lang.management.ManagementFactory;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
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
 * With -W N the same producer and threads (or window) first send N messages, split like -q,
 * and wait for all of them (the threads meet at a barrier; async waits for every callback);
 * TPS, latency and the measured CPU count only the -q messages after that, as
 * `rmq bench produce --warmup N` does. CPU is the process's user+sys time as the OS counts it
 * (getProcessCpuTime, i.e. times(2)), read at the start and end of the measured phase.
 *
 * With -A true the producer gathers the threads' single sends into batches (5.x
 * DefaultMQProducer.setAutoBatch, with its default batchMaxDelayMs and batchMaxBytes), as
 * `rmq bench produce --auto-batch` does; a client without it (4.9) exits 3 printing
 * {"unsupported": ...}.
 *
 * Options: -n namesrv (or NAMESRV_ADDR) -t topic -w threads -s size -q count -W warmup
 * -y true|false -i inflight -b batch -o true|false -A true|false. Output: the Producer's "[Complete] ..." line
 * with p50/p99/max appended, then a JSON line whose firstAckEpochUs is the wall clock (µs since
 * the epoch) of the first acknowledgement (of the warm-up, if any). Exit status 1 unless every
 * message, warm-up included, was acknowledged with SEND_OK.
 */
public final class Bench {
    /** The wall clock of the first acknowledgement of the run, µs since the epoch (0: none yet). */
    private static final AtomicLong FIRST_ACK_US = new AtomicLong();
    private static final com.sun.management.OperatingSystemMXBean OS =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    public static void main(String[] args) throws Exception {
        System.setProperty("rocketmq.serialize.type", "ROCKETMQ");
        Map<String, String> o = options(args, "-n", "-t", "-w", "-s", "-q", "-W", "-y", "-o", "-i", "-b", "-A");
        String namesrv = o.getOrDefault("-n", System.getenv("NAMESRV_ADDR"));
        String topic = o.getOrDefault("-t", "BenchmarkTest");
        int threads = Integer.parseInt(o.getOrDefault("-w", "64"));
        int size = Integer.parseInt(o.getOrDefault("-s", "128"));
        long quantity = Long.parseLong(o.getOrDefault("-q", "0"));
        long warmup = Long.parseLong(o.getOrDefault("-W", "0"));
        boolean async = Boolean.parseBoolean(o.get("-y"));
        boolean oneway = Boolean.parseBoolean(o.get("-o"));
        int inflight = Integer.parseInt(o.getOrDefault("-i", "1024"));
        int batch = Integer.parseInt(o.getOrDefault("-b", "1"));
        boolean autoBatch = Boolean.parseBoolean(o.get("-A"));
        if (quantity <= 0 || warmup < 0 || namesrv == null || batch < 1 || ((async || oneway) && batch > 1) || (async && oneway)) {
            System.err.println("usage: Bench -n namesrv -q count [-W warmup] [-t topic] [-w threads] [-s size] [-y true] [-i inflight] [-b batch (sync only)] [-o true (oneway)]");
            System.exit(2);
        }
        if (async) {
            threads = 1;
        }
        System.out.printf("topic: %s threadCount: %d messageSize: %d messageQuantity: %d warmup: %d asyncEnable: %s onewayEnable: %s batchSize: %d autoBatch: %s clientVersion: %s%n",
            topic, threads, size, quantity, warmup, async, oneway, batch, autoBatch, MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));

        DefaultMQProducer producer = new DefaultMQProducer("benchmark_producer");
        producer.setInstanceName(Long.toString(System.currentTimeMillis()));
        producer.setNamesrvAddr(namesrv);
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        if (autoBatch) {
            // By reflection: the class compiles against 4.9 too, which has no auto-batching.
            try {
                DefaultMQProducer.class.getMethod("setAutoBatch", boolean.class).invoke(producer, true);
            } catch (NoSuchMethodException e) {
                System.out.println("{\"unsupported\": \"auto-batching (setAutoBatch) is a 5.x client feature\"}");
                System.exit(3);
            }
        }
        producer.start();

        byte[] body = new byte[size];
        String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        for (int i = 0; i < size; i++) {
            body[i] = (byte) alphabet.charAt(ThreadLocalRandom.current().nextInt(alphabet.length()));
        }
        Phase warm = new Phase(warmup);
        Phase measured = new Phase(quantity);
        // Where the measured phase began: [nanoTime, process CPU ns, warm-up ns]. Written by
        // the main thread or the barrier action, read after the workers are joined.
        long[] mark = new long[3];
        long begin = System.nanoTime();
        if (warmup == 0) {
            markNow(mark, begin);
        }

        if (async) {
            Semaphore window = new Semaphore(inflight);
            if (warmup > 0) {
                sendAsync(producer, topic, body, warmup, window, warm);
                markNow(mark, begin);
            }
            sendAsync(producer, topic, body, quantity, window, measured);
        } else {
            // The last worker to finish its warm-up share takes the readings before any
            // worker goes on.
            CyclicBarrier gate = new CyclicBarrier(threads, () -> markNow(mark, begin));
            Thread[] workers = new Thread[threads];
            for (int w = 0; w < threads; w++) {
                long mine = quantity / threads + (w == 0 ? quantity % threads : 0);
                long mineWarm = warmup / threads + (w == 0 ? warmup % threads : 0);
                SyncSender sender = new SyncSender(producer, topic, body, batch, oneway);
                workers[w] = new Thread(() -> {
                    if (warmup > 0) {
                        sender.send(mineWarm, warm);
                        try {
                            gate.await();
                        } catch (Exception e) {
                            throw new IllegalStateException("warm-up barrier", e);
                        }
                    }
                    sender.send(mine, measured);
                }, "bench-" + w);
                workers[w].start();
            }
            for (Thread t : workers) {
                t.join();
            }
        }
        long end = System.nanoTime();
        long cpuEnd = OS.getProcessCpuTime();
        producer.shutdown();

        double elapsedMs = (end - mark[0]) / 1e6;
        int n = measured.acked.get();
        int c = measured.calls.get();
        long[] lat = Arrays.copyOf(measured.rt, c);
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
        boolean cpuKnown = cpuEnd >= 0 && mark[1] >= 0;
        double measuredCpuS = (cpuEnd - mark[1]) / 1e9;
        String warmJson = warmup == 0 ? "" : String.format(Locale.ROOT,
            "\"warmup\":{\"messages\":%d,\"failures\":%d,\"elapsedMs\":%.1f},",
            warm.acked.get(), warm.failures(), mark[2] / 1e6);
        System.out.println(String.format(Locale.ROOT,
            "[Complete] Send Total: %d Send TPS: %d Max RT(ms): %d Average RT(ms): %7.3f Send Failed: %d Response Failed: %d | p50(ms): %.3f p99(ms): %.3f max(ms): %.3f elapsed(ms): %.0f warm-up: %d acked, %d failed",
            n, Math.round(tps), Math.round(max), avg, measured.sendFailed.get(), measured.responseFailed.get(), p50, p99, max, elapsedMs,
            warm.acked.get(), warm.failures()));
        System.out.println(String.format(Locale.ROOT,
            "{\"client\":\"java\",\"clientVersion\":\"%s\",\"mode\":\"%s\",\"threads\":%d,\"size\":%d,\"batch\":%d,%s\"messages\":%d,\"failures\":%d,\"elapsedMs\":%.3f,\"tps\":%.1f,\"latencyMs\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f,\"calls\":%d},\"measuredCpuSeconds\":%s,\"cpuUsPerMsg\":%s,\"cpuSeconds\":%s,\"firstAckEpochUs\":%s}",
            MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION), async ? "async" : oneway ? "oneway" : "sync", threads, size, batch, warmJson, n,
            measured.failures(), elapsedMs, tps, p50, p99, max, c,
            cpuKnown ? String.format(Locale.ROOT, "{\"total\":%.2f}", measuredCpuS) : "null",
            cpuKnown && n > 0 ? String.format(Locale.ROOT, "%.1f", measuredCpuS * 1e6 / n) : "null",
            cpuEnd >= 0 ? String.format(Locale.ROOT, "{\"total\":%.2f}", cpuEnd / 1e9) : "null",
            FIRST_ACK_US.get() == 0 ? "null" : Long.toString(FIRST_ACK_US.get())));
        System.exit(n == quantity && warm.acked.get() == warmup ? 0 : 1);
    }

    /** Notes where the measured phase begins: now, the process CPU so far, the warm-up's length. */
    private static void markNow(long[] mark, long begin) {
        mark[0] = System.nanoTime();
        mark[1] = OS.getProcessCpuTime();
        mark[2] = mark[0] - begin;
    }

    /** One phase's results (the warm-up's or the measured one's). */
    private static final class Phase {
        /** Latency of every acknowledged send call, in nanoseconds; slot = completion order. */
        final long[] rt;
        final AtomicInteger calls = new AtomicInteger();
        final AtomicInteger acked = new AtomicInteger();
        final AtomicLong sendFailed = new AtomicLong();
        final AtomicLong responseFailed = new AtomicLong();

        Phase(long quantity) {
            rt = new long[(int) quantity];
        }

        void result(SendStatus status, int n, long nanos) {
            if (status == SendStatus.SEND_OK) {
                if (FIRST_ACK_US.get() == 0) {
                    FIRST_ACK_US.compareAndSet(0, epochMicros());
                }
                rt[calls.getAndIncrement()] = nanos;
                acked.addAndGet(n);
            } else {
                responseFailed.addAndGet(n);
            }
        }

        long failures() {
            return sendFailed.get() + responseFailed.get();
        }
    }

    /** `quantity` async sends, at most `window`'s permits outstanding; returns once every callback ran. */
    private static void sendAsync(DefaultMQProducer producer, String topic, byte[] body, long quantity,
                                  Semaphore window, Phase phase) throws InterruptedException {
        CountDownLatch done = new CountDownLatch((int) quantity);
        for (long n = 0; n < quantity; n++) {
            window.acquire();
            long t0 = System.nanoTime();
            try {
                producer.send(new Message(topic, body), new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        phase.result(r.getSendStatus(), 1, System.nanoTime() - t0);
                        window.release();
                        done.countDown();
                    }

                    @Override
                    public void onException(Throwable e) {
                        phase.sendFailed.incrementAndGet();
                        window.release();
                        done.countDown();
                    }
                });
            } catch (Exception e) {
                phase.sendFailed.incrementAndGet();
                window.release();
                done.countDown();
            }
        }
        if (!done.await(120, TimeUnit.SECONDS)) {
            System.err.println("async callbacks missing after 120 s: " + done.getCount());
        }
    }

    /** Sync (or oneway, or batch) sends, one call at a time on the calling thread. */
    private static final class SyncSender {
        private final DefaultMQProducer producer;
        private final String topic;
        private final byte[] body;
        private final int batchSize;
        private final boolean oneway;

        SyncSender(DefaultMQProducer producer, String topic, byte[] body, int batchSize, boolean oneway) {
            this.producer = producer;
            this.topic = topic;
            this.body = body;
            this.batchSize = batchSize;
            this.oneway = oneway;
        }

        void send(long quantity, Phase phase) {
            for (long left = quantity; left > 0; ) {
                int n = (int) Math.min(left, batchSize);
                left -= n;
                long t0 = System.nanoTime();
                try {
                    SendStatus status = SendStatus.SEND_OK;
                    if (oneway) {
                        producer.sendOneway(new Message(topic, body));
                    } else if (batchSize > 1) {
                        status = producer.send(messages(topic, body, n)).getSendStatus();
                    } else {
                        status = producer.send(new Message(topic, body)).getSendStatus();
                    }
                    phase.result(status, n, System.nanoTime() - t0);
                } catch (MQBrokerException e) {
                    phase.responseFailed.addAndGet(n);
                } catch (Exception e) {
                    phase.sendFailed.addAndGet(n);
                }
            }
        }
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
