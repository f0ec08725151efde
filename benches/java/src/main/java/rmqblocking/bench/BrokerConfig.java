package rmqblocking.bench;

import java.nio.charset.StandardCharsets;

import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;

/**
 * Changes settings of a running broker (UPDATE_BROKER_CONFIG, what `mqadmin
 * updateBrokerConfig` sends; rocketmq-tools is left off the benchmark's classpath so that the
 * clients measured load only what they need).
 *
 * Usage: BrokerConfig BROKER_ADDR KEY=VALUE... Exit status 1 if the broker refuses.
 */
public final class BrokerConfig {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: BrokerConfig BROKER_ADDR KEY=VALUE...");
            System.exit(2);
        }
        StringBuilder properties = new StringBuilder();
        for (int i = 1; i < args.length; i++) {
            properties.append(args[i]).append('\n');
        }
        NettyRemotingClient client = new NettyRemotingClient(new NettyClientConfig());
        client.start();
        int code;
        String remark;
        try {
            RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.UPDATE_BROKER_CONFIG, null);
            request.setBody(properties.toString().getBytes(StandardCharsets.UTF_8));
            RemotingCommand response = client.invokeSync(args[0], request, 10_000);
            code = response.getCode();
            remark = response.getRemark();
        } finally {
            client.shutdown();
        }
        if (code != ResponseCode.SUCCESS) {
            System.err.println("broker " + args[0] + " refused the update: code " + code + " " + remark);
            System.exit(1);
        }
        System.exit(0);
    }

    private BrokerConfig() {
    }
}
