// The Java side of tests/secure/interop.rs: the official client with AclClientRPCHook.
// Compiled by the test with javac against the distribution's jars (4.9.7 or 5.3.3).
//
//   produce NAMESRV TOPIC GROUP AK SK COUNT          prints "SENT <msgId>" per message
//   consume NAMESRV TOPIC GROUP AK SK COUNT SECONDS  prints "GOT <msgId>" per message
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class AclInterop {
    public static void main(String[] args) {
        int status = 0;
        try {
            run(args);
        } catch (Throwable e) {
            // Without this the client's threads would keep the JVM alive.
            e.printStackTrace();
            status = 1;
        }
        System.out.flush();
        System.exit(status);
    }

    static void run(String[] args) throws Exception {
        String mode = args[0], namesrv = args[1], topic = args[2], group = args[3];
        AclClientRPCHook hook = new AclClientRPCHook(new SessionCredentials(args[4], args[5]));
        int count = Integer.parseInt(args[6]);
        if (mode.equals("produce")) {
            DefaultMQProducer producer = new DefaultMQProducer(group, hook);
            producer.setNamesrvAddr(namesrv);
            // A loaded machine: the first route lookup may eat the default 3 s.
            producer.setSendMsgTimeout(10000);
            producer.start();
            for (int i = 0; i < count; i++) {
                Message m = new Message(topic, ("from java " + i).getBytes("UTF-8"));
                for (int attempt = 1; ; attempt++) {
                    try {
                        SendResult r = producer.send(m);
                        System.out.println("SENT " + r.getMsgId());
                        break;
                    } catch (Exception e) {
                        // Only acknowledged sends are counted; a failed one is tried again.
                        if (attempt == 3) {
                            throw e;
                        }
                    }
                }
            }
            producer.shutdown();
        } else {
            CountDownLatch done = new CountDownLatch(count);
            DefaultMQPushConsumer consumer =
                new DefaultMQPushConsumer(group, hook, new AllocateMessageQueueAveragely());
            consumer.setNamesrvAddr(namesrv);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    synchronized (System.out) {
                        System.out.println("GOT " + m.getMsgId());
                    }
                    done.countDown();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            done.await(Long.parseLong(args[7]), TimeUnit.SECONDS);
            // Late duplicates would show in this second.
            Thread.sleep(1000);
            consumer.shutdown();
        }
    }
}
