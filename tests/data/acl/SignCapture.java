// Captures requests signed by the real Java AclClientRPCHook, for the signer's unit test
// (src/remoting/acl.rs). Run once per RocketMQ version with the distribution's jars:
//
//   javac -cp "target/rocketmq-testkit/dist/5.3.3/lib/*" -d /tmp/sign tests/data/acl/SignCapture.java
//   java -cp "/tmp/sign:target/rocketmq-testkit/dist/5.3.3/lib/*" SignCapture tests/data/acl/5.3.3
//
// Each case is written as whole frames (length prefix included), once with a JSON header
// and once with the ROCKETMQ binary header: <out>/<case>.json.bin and <case>.rocketmq.bin.
// Header classes moved package between 4.9 and 5.x, so they are found by name.

import java.io.FileOutputStream;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.SerializeType;

public class SignCapture {
    static Object header(String simpleName, String sub) throws Exception {
        String[] packages = {
            "org.apache.rocketmq.remoting.protocol.header." + sub,
            "org.apache.rocketmq.common.protocol.header." + sub,
        };
        for (String p : packages) {
            String name = p.endsWith(".") ? p + simpleName : p + "." + simpleName;
            name = name.replace("..", ".");
            try {
                return Class.forName(name).getDeclaredConstructor().newInstance();
            } catch (ClassNotFoundException e) {
                // try the next package
            }
        }
        throw new ClassNotFoundException(simpleName);
    }

    static void set(Object o, String field, Object value) throws Exception {
        Field f = o.getClass().getDeclaredField(field);
        f.setAccessible(true);
        f.set(o, value);
    }

    static void write(String out, String name, int code, Object header, byte[] body,
        SessionCredentials credentials) throws Exception {
        for (SerializeType type : new SerializeType[] {SerializeType.JSON, SerializeType.ROCKETMQ}) {
            RemotingCommand cmd = RemotingCommand.createRequestCommand(code, (CommandCustomHeader) header);
            cmd.setOpaque(7);
            cmd.setBody(body);
            cmd.setSerializeTypeCurrentRPC(type);
            new AclClientRPCHook(credentials).doBeforeRequest("127.0.0.1:9876", cmd);
            ByteBuffer frame = cmd.encode();
            byte[] bytes = new byte[frame.remaining()];
            frame.get(bytes);
            String suffix = type == SerializeType.JSON ? "json" : "rocketmq";
            try (FileOutputStream f = new FileOutputStream(out + "/" + name + "." + suffix + ".bin")) {
                f.write(bytes);
            }
            System.out.println(name + "." + suffix + " Signature=" + cmd.getExtFields().get("Signature"));
        }
    }

    public static void main(String[] args) throws Exception {
        String out = args[0];
        Files.createDirectories(Paths.get(out));

        // A name-server request with a custom header, signed without a security token.
        Object route = header("GetRouteInfoRequestHeader", "namesrv");
        set(route, "topic", "AclSignTopic");
        set(route, "acceptStandardJsonOnly", Boolean.TRUE);
        write(out, "route", 105, route, null,
            new SessionCredentials("RocketMQ_ak", "12345678_secret"));

        // A send: one-letter fields of every type, properties with their separators and
        // non-ASCII text, a non-ASCII body, and a security token.
        Object send = header("SendMessageRequestHeaderV2", "");
        set(send, "a", "acl_sign_group");
        set(send, "b", "AclSignTopic");
        set(send, "c", "TBW102");
        set(send, "d", 4);
        set(send, "e", 3);
        set(send, "f", 0);
        set(send, "g", 1700000000123L);
        set(send, "h", 0);
        set(send, "i", "UNIQ_KEY\u0001ABC123\u0002KEYS\u0001schl\u00fcssel \u952e\u0002");
        set(send, "j", 0);
        set(send, "k", false);
        set(send, "l", 16);
        set(send, "m", false);
        write(out, "send", 310, send, "hello ACL \u2014 \u00fcn\u00efc\u00f6d\u00e9".getBytes(StandardCharsets.UTF_8),
            new SessionCredentials("RocketMQ_ak", "12345678_secret", "token-1"));

        // No header, only a body (a heartbeat).
        write(out, "heartbeat", 34, null,
            "{\"clientID\":\"127.0.0.1@1\",\"consumerDataSet\":[],\"producerDataSet\":[]}".getBytes(StandardCharsets.UTF_8),
            new SessionCredentials("admin_ak", "another secret"));
    }
}
