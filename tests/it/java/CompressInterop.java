// The official Java 5.x client on the other end of the compression interop test
// (tests/it/compression.rs): it produces with a chosen compressType, or consumes and prints
// what it read. Compiled and run by the test against the distribution's jars.
//
//   CompressInterop produce <namesrv> <topic> <ZLIB|LZ4|ZSTD> <count> <size>
//       prints "SENT <msgId> <sha1 of body>" per message
//   CompressInterop consume <namesrv> <topic> <group> <count>
//       prints "GOT <msgId> <sysFlag> <sha1 of body>" per distinct message, exits 0 at <count>
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class CompressInterop {
    static String sha1(byte[] b) throws Exception {
        StringBuilder s = new StringBuilder();
        for (byte x : MessageDigest.getInstance("SHA-1").digest(b)) {
            s.append(String.format("%02x", x));
        }
        return s.toString();
    }

    /** A compressible body of `size` bytes that differs per message. */
    static byte[] body(int i, int size) {
        StringBuilder s = new StringBuilder();
        while (s.length() < size) {
            s.append("java message ").append(i).append(" of the compression interop test; ");
        }
        return s.substring(0, size).getBytes(StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[1], topic = args[2];
        if (args[0].equals("produce")) {
            DefaultMQProducer p = new DefaultMQProducer("compress_java_" + System.nanoTime());
            p.setNamesrvAddr(namesrv);
            p.setCompressType(CompressionType.valueOf(args[3]));
            p.setCompressMsgBodyOverHowmuch(1024);
            p.start();
            int count = Integer.parseInt(args[4]), size = Integer.parseInt(args[5]);
            for (int i = 0; i < count; i++) {
                byte[] b = body(i, size);
                SendResult r = p.send(new Message(topic, b));
                System.out.println("SENT " + r.getMsgId() + " " + sha1(b));
            }
            p.shutdown();
        } else {
            int count = Integer.parseInt(args[4]);
            Set<String> seen = ConcurrentHashMap.newKeySet();
            CountDownLatch done = new CountDownLatch(count);
            DefaultMQPushConsumer c = new DefaultMQPushConsumer(args[3]);
            c.setNamesrvAddr(namesrv);
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.subscribe(topic, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (seen.add(m.getMsgId())) {
                        try {
                            System.out.println("GOT " + m.getMsgId() + " " + m.getSysFlag() + " " + sha1(m.getBody()));
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                        done.countDown();
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            boolean all = done.await(120, TimeUnit.SECONDS);
            c.shutdown();
            System.exit(all ? 0 : 1);
        }
    }
}
