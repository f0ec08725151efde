// The official Java client on the other end of the Python exchange test
// (python/tests/pytest_suite.rs): it sends messages a Python consumer reads, or reads what
// a Python producer sent. Compiled and run by the test against the distribution's jars.
//
//   PythonExchange produce <namesrv> <topic> <count>
//       sends "java <i>" with tag "FromJava", key "jk<i>" and property origin=java;
//       prints "SENT <msgId>" per message
//   PythonExchange consume <namesrv> <topic> <group> <count>
//       prints "GOT <msgId> <tags> <keys> <origin> <body>" per distinct message and exits 0
//       at <count>
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

public class PythonExchange {
    public static void main(String[] args) throws Exception {
        String namesrv = args[1], topic = args[2];
        if (args[0].equals("produce")) {
            DefaultMQProducer p = new DefaultMQProducer("py_exchange_java_" + System.nanoTime());
            p.setNamesrvAddr(namesrv);
            p.start();
            int count = Integer.parseInt(args[3]);
            for (int i = 0; i < count; i++) {
                Message m = new Message(topic, "FromJava", "jk" + i,
                        ("java " + i).getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("origin", "java");
                SendResult r = p.send(m);
                System.out.println("SENT " + r.getMsgId());
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
                        System.out.println("GOT " + m.getMsgId() + " " + m.getTags() + " " + m.getKeys()
                                + " " + m.getUserProperty("origin") + " "
                                + new String(m.getBody(), StandardCharsets.UTF_8));
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
