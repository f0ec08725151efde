// The official Java 5.x push consumer in POP mode on the other end of the POP interop test
// (tests/it/pop.rs): with client rebalance off it asks the broker for its assignment
// (QUERY_ASSIGNMENT) and, after `mqadmin setConsumeMode -m POP`, consumes by POP and acks.
// Compiled and run by the test against the distribution's jars.
//
//   PopInterop <namesrv> <topic> <group> <seconds>
//       prints "STARTED", then "GOT <body>" per message consumed; exits 0 after <seconds>
import java.nio.charset.StandardCharsets;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

public class PopInterop {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], group = args[2];
        long seconds = Long.parseLong(args[3]);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setClientRebalance(false);
        c.setPopBatchNums(4);
        c.setConsumeMessageBatchMaxSize(1);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                synchronized (System.out) {
                    System.out.println("GOT " + new String(m.getBody(), StandardCharsets.UTF_8));
                    System.out.flush();
                }
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        synchronized (System.out) {
            System.out.println("STARTED");
            System.out.flush();
        }
        Thread.sleep(seconds * 1000);
        c.shutdown();
        System.exit(0);
    }
}
