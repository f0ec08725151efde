// The official Java 5.x client on the other end of the timer interop tests
// (tests/it/timer.rs): it sends timer messages the Java way, or consumes and prints when
// each message arrived. Compiled and run by the test against the distribution's jars.
//
//   TimerInterop produce <namesrv> <topic> <dueSec>
//       sends "java-at" with setDeliverTimeMs(now + due) and "java-delay" with
//       setDelayTimeSec(due); prints "SENT <body> <msgId> <wall clock ms before the send>"
//   TimerInterop consume <namesrv> <topic> <group> <count>
//       prints "READY" once it holds a queue of the topic and the broker has its current
//       subscription, then
//       "GOT <body> <wall clock ms at arrival> <store timestamp>" per distinct message (the
//       store timestamp is when the broker's timer put it into the topic); exits 0 at <count>
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

public class TimerInterop {
    public static void main(String[] args) throws Exception {
        String namesrv = args[1], topic = args[2];
        if (args[0].equals("produce")) {
            long due = Long.parseLong(args[3]);
            DefaultMQProducer p = new DefaultMQProducer("timer_java_" + System.nanoTime());
            p.setNamesrvAddr(namesrv);
            p.start();
            Message at = new Message(topic, "java-at".getBytes(StandardCharsets.UTF_8));
            long sentAt = System.currentTimeMillis();
            at.setDeliverTimeMs(sentAt + due * 1000);
            SendResult r = p.send(at);
            System.out.println("SENT java-at " + r.getMsgId() + " " + sentAt);
            Message delay = new Message(topic, "java-delay".getBytes(StandardCharsets.UTF_8));
            delay.setDelayTimeSec(due);
            long sentDelay = System.currentTimeMillis();
            r = p.send(delay);
            System.out.println("SENT java-delay " + r.getMsgId() + " " + sentDelay);
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
                long now = System.currentTimeMillis();
                for (MessageExt m : msgs) {
                    if (seen.add(m.getMsgId())) {
                        System.out.println("GOT " + new String(m.getBody(), StandardCharsets.UTF_8) + " " + now
                                + " " + m.getStoreTimestamp());
                        done.countDown();
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            // Holding the queue before the message exists: its arrival is not delayed by
            // the first rebalance.
            long deadline = System.currentTimeMillis() + 60_000;
            while (c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet()
                    .stream().noneMatch(mq -> mq.getTopic().equals(topic))) {
                if (System.currentTimeMillis() > deadline) {
                    System.out.println("NO QUEUE");
                    System.exit(1);
                }
                Thread.sleep(50);
            }
            // The client's own heartbeat after its first rebalance can lose a race with the
            // one start() sent ("lock heartBeat, but failed"): the broker then keeps the old
            // subscription version, and refuses every pull as "not latest" until the next
            // rebalance 20 s later. This heartbeat carries the current version.
            while (!c.getDefaultMQPushConsumerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock()) {
                if (System.currentTimeMillis() > deadline) {
                    System.out.println("NO HEARTBEAT");
                    System.exit(1);
                }
                Thread.sleep(50);
            }
            System.out.println("READY");
            System.out.flush();
            boolean all = done.await(120, TimeUnit.SECONDS);
            c.shutdown();
            System.exit(all ? 0 : 1);
        }
    }
}
