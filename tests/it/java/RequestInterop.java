// The official Java client on the other end of the request-reply interop test
// (tests/it/request_reply.rs).
//
//   RequestInterop respond <namesrv> <topic> <group> <count>
//       answers <count> requests with "java:" + body (MessageUtil.createReplyMessage), then exits
//   RequestInterop request <namesrv> <topic> <count>
//       sends <count> requests "java request <i>", prints "REPLY <body>" per reply
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class RequestInterop {
    public static void main(String[] args) throws Exception {
        String namesrv = args[1], topic = args[2];
        DefaultMQProducer p = new DefaultMQProducer("request_java_" + System.nanoTime());
        p.setNamesrvAddr(namesrv);
        p.start();
        if (args[0].equals("respond")) {
            int count = Integer.parseInt(args[4]);
            CountDownLatch done = new CountDownLatch(count);
            DefaultMQPushConsumer c = new DefaultMQPushConsumer(args[3]);
            c.setNamesrvAddr(namesrv);
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.subscribe(topic, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    try {
                        String body = new String(m.getBody(), StandardCharsets.UTF_8);
                        Message reply = MessageUtil.createReplyMessage(m,
                            ("java:" + body).getBytes(StandardCharsets.UTF_8));
                        p.send(reply);
                        System.out.println("ANSWERED " + body);
                        done.countDown();
                    } catch (Exception e) {
                        e.printStackTrace();
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            System.out.println("READY");
            boolean all = done.await(150, TimeUnit.SECONDS);
            c.shutdown();
            p.shutdown();
            System.exit(all ? 0 : 1);
        } else {
            int count = Integer.parseInt(args[3]);
            int status = 0;
            try {
                for (int i = 0; i < count; i++) {
                    Message m = new Message(topic, ("java request " + i).getBytes(StandardCharsets.UTF_8));
                    Message reply = p.request(m, 30000);
                    System.out.println("REPLY " + new String(reply.getBody(), StandardCharsets.UTF_8));
                }
            } catch (Exception e) {
                e.printStackTrace(System.out);
                status = 1;
            }
            p.shutdown();
            System.exit(status);
        }
    }
}
