// The official Java client on the other end of the trace-context interop tests
// (tests/it/hooks.rs): Java's own hooks carry a W3C `traceparent` user property.
//
//   TraceContextInterop consume <namesrv> <topic> <group> <count>
//       a push consumer whose ConsumeMessageHook prints "TRACEPARENT <msgId> <value>" for
//       each message it sees before the listener; exits after <count> messages
//   TraceContextInterop produce <namesrv> <topic> <count>
//       a producer whose SendMessageHook puts a fresh traceparent on every message before
//       it is encoded; prints "SENT <msgId> <traceparent>" per acknowledged send
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.hook.ConsumeMessageContext;
import org.apache.rocketmq.client.hook.ConsumeMessageHook;
import org.apache.rocketmq.client.hook.SendMessageContext;
import org.apache.rocketmq.client.hook.SendMessageHook;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class TraceContextInterop {
    static String hex(int bytes) {
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < bytes; i++) {
            s.append(String.format("%02x", ThreadLocalRandom.current().nextInt(256)));
        }
        return s.toString();
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[1], topic = args[2];
        if (args[0].equals("consume")) {
            int count = Integer.parseInt(args[4]);
            CountDownLatch done = new CountDownLatch(count);
            DefaultMQPushConsumer c = new DefaultMQPushConsumer(args[3]);
            c.setNamesrvAddr(namesrv);
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.subscribe(topic, "*");
            c.getDefaultMQPushConsumerImpl().registerConsumeMessageHook(new ConsumeMessageHook() {
                public String hookName() { return "traceparent-extract"; }
                public void consumeMessageBefore(ConsumeMessageContext ctx) {
                    for (MessageExt m : ctx.getMsgList()) {
                        System.out.println("TRACEPARENT " + m.getMsgId() + " " + m.getUserProperty("traceparent"));
                    }
                }
                public void consumeMessageAfter(ConsumeMessageContext ctx) { }
            });
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    done.countDown();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            boolean all = done.await(150, TimeUnit.SECONDS);
            c.shutdown();
            System.exit(all ? 0 : 1);
        } else {
            int count = Integer.parseInt(args[3]);
            DefaultMQProducer p = new DefaultMQProducer("tc_java_" + System.nanoTime());
            p.setNamesrvAddr(namesrv);
            p.getDefaultMQProducerImpl().registerSendMessageHook(new SendMessageHook() {
                public String hookName() { return "traceparent-inject"; }
                public void sendMessageBefore(SendMessageContext ctx) {
                    ctx.getMessage().putUserProperty("traceparent", "00-" + hex(16) + "-" + hex(8) + "-01");
                }
                public void sendMessageAfter(SendMessageContext ctx) { }
            });
            p.start();
            int status = 0;
            try {
                for (int i = 0; i < count; i++) {
                    Message m = new Message(topic, ("java " + i).getBytes());
                    SendResult r = p.send(m);
                    System.out.println("SENT " + r.getMsgId() + " " + m.getUserProperty("traceparent"));
                }
            } catch (Exception e) {
                e.printStackTrace();
                status = 1;
            }
            p.shutdown();
            System.exit(status);
        }
    }
}
