// The Java side of tests/transactions/interop.rs: the official client's transactional
// producer and a push consumer. Compiled by the test with javac against the
// distribution's jars (4.9.7 or 5.3.3).
//
//   produce NAMESRV TOPIC GROUP COUNT   even messages commit, odd ones roll back, in the
//                                       local transaction; prints "COMMIT <msgId>" or
//                                       "ROLLBACK <msgId>" per message
//   consume NAMESRV TOPIC GROUP COUNT SECONDS QUIET
//                                       prints "GOT <msgId>" per message until COUNT came
//                                       or SECONDS passed, then listens QUIET seconds more
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class TransactionInterop {
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
        int count = Integer.parseInt(args[4]);
        if (mode.equals("produce")) {
            // What each transaction decided, for the broker's checks too.
            Map<String, LocalTransactionState> decided = new ConcurrentHashMap<>();
            TransactionMQProducer producer = new TransactionMQProducer(group);
            producer.setNamesrvAddr(namesrv);
            producer.setSendMsgTimeout(10000);
            producer.setTransactionListener(new TransactionListener() {
                public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                    LocalTransactionState s = ((Integer) arg) % 2 == 0
                        ? LocalTransactionState.COMMIT_MESSAGE
                        : LocalTransactionState.ROLLBACK_MESSAGE;
                    decided.put(msg.getTransactionId(), s);
                    return s;
                }

                public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                    return decided.getOrDefault(msg.getTransactionId(), LocalTransactionState.UNKNOW);
                }
            });
            producer.start();
            for (int i = 0; i < count; i++) {
                Message m = new Message(topic, ("java transaction " + i).getBytes("UTF-8"));
                TransactionSendResult r = producer.sendMessageInTransaction(m, i);
                if (r.getSendStatus() != SendStatus.SEND_OK) {
                    throw new IllegalStateException("half message not stored: " + r);
                }
                String what = r.getLocalTransactionState() == LocalTransactionState.COMMIT_MESSAGE
                    ? "COMMIT " : "ROLLBACK ";
                System.out.println(what + r.getMsgId());
            }
            // END_TRANSACTION is oneway: let the last ones leave before the channels close.
            Thread.sleep(1000);
            producer.shutdown();
        } else {
            CountDownLatch done = new CountDownLatch(count);
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
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
            done.await(Long.parseLong(args[5]), TimeUnit.SECONDS);
            // Rolled-back messages that leaked, and duplicates, would show now.
            Thread.sleep(Long.parseLong(args[6]) * 1000);
            consumer.shutdown();
        }
    }
}
