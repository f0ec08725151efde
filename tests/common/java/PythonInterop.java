// The official Java client on the other end of the tests that exchange messages with Python:
// the PyPI rocketmq-client-python 2.0.0 on librocketmq (compat/tests/python_client.rs) and
// this project's Python package (python/tests/pytest_suite.rs). It produces for a Python
// push consumer, or consumes what a Python producer sent. Compiled and run by the tests
// against the distribution's jars (tests/common/java.rs).
//
//   PythonInterop produce <namesrv> <topic> <count> [<tag> <key prefix> <body prefix>]
//       sends <count> messages: tag <tag> (TagJava), keys <key prefix><i> (key-<i>), body
//       <body prefix><i> (java-<i>), user property origin=java; prints
//       "SENT <msgId> <body>" per message
//   PythonInterop consume <namesrv> <topic> <group> <count>
//       from the first offset; prints "GOT <msgId> <tags> <keys> <origin> <body>" per
//       distinct message (the body last: it may hold spaces), exits 0 at <count>, 1 after
//       120 s
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class PythonInterop {
    public static void main(String[] args) throws Exception {
        String namesrv = args[1], topic = args[2];
        if (args[0].equals("produce")) {
            int count = Integer.parseInt(args[3]);
            boolean custom = args.length > 6;
            String tag = custom ? args[4] : "TagJava";
            String keyPrefix = custom ? args[5] : "key-";
            String bodyPrefix = custom ? args[6] : "java-";
            DefaultMQProducer p = new DefaultMQProducer("py_interop_java_" + System.nanoTime());
            p.setNamesrvAddr(namesrv);
            p.start();
            for (int i = 0; i < count; i++) {
                String body = bodyPrefix + i;
                Message m = new Message(topic, tag, keyPrefix + i,
                        body.getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("origin", "java");
                SendResult r = p.send(m);
                System.out.println("SENT " + r.getMsgId() + " " + body);
            }
            p.shutdown();
        } else {
            int count = Integer.parseInt(args[4]);
            Set<String> seen = ConcurrentHashMap.newKeySet();
            CountDownLatch all = new CountDownLatch(count);
            DefaultMQPushConsumer c = new DefaultMQPushConsumer(args[3]);
            c.setNamesrvAddr(namesrv);
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.subscribe(topic, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (seen.add(m.getMsgId())) {
                        System.out.println("GOT " + m.getMsgId() + " " + m.getTags() + " "
                                + m.getKeys() + " " + m.getUserProperty("origin") + " "
                                + new String(m.getBody(), StandardCharsets.UTF_8));
                        all.countDown();
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            boolean ok = all.await(120, TimeUnit.SECONDS);
            c.shutdown();
            System.exit(ok ? 0 : 1);
        }
    }
}
