// The official Java client on the other end of the Python-client test
// (compat/tests/python_client.rs): it produces for the Python push consumer, or consumes what
// the Python producer sent. Compiled and run by the test against the distribution's jars.
//
//   PyInterop produce <namesrv> <topic> <count>
//       prints "SENT <msgId> <body>" per message (tag TagJava, keys key-<i>, origin=java)
//   PyInterop consume <namesrv> <topic> <group> <count>
//       prints "GOT <msgId> <tags> <keys> <body> <origin>" per distinct message, exits 0 at
//       <count>, 1 after 90 s
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

public class PyInterop {
    public static void main(String[] args) throws Exception {
        String namesrv = args[1], topic = args[2];
        if (args[0].equals("produce")) {
            DefaultMQProducer p = new DefaultMQProducer("py_interop_java_" + System.nanoTime());
            p.setNamesrvAddr(namesrv);
            p.start();
            int count = Integer.parseInt(args[3]);
            for (int i = 0; i < count; i++) {
                String body = "java-" + i;
                Message m = new Message(topic, "TagJava", "key-" + i,
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
                                + m.getKeys() + " " + new String(m.getBody(), StandardCharsets.UTF_8)
                                + " " + m.getUserProperty("origin"));
                        all.countDown();
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            boolean ok = all.await(90, TimeUnit.SECONDS);
            c.shutdown();
            System.exit(ok ? 0 : 1);
        }
    }
}
