/*
 * Consumes a topic by POP (RocketMQ 5.x) with a simple consumer until EXPECT messages
 * arrived, printing "msg <msg id>" for each and acking it. First it waits up to 10 s for
 * a message without taking one (NOTIFICATION) and prints "has_messages=1" when there is
 * one. The first message's invisible time is changed to 5 s first (its receipt must
 * change: "receipt_changed=1"), then it is acked with the new receipt; the other
 * messages of each receive are acked together (BATCH_ACK_MESSAGE). Afterwards it receives for 12 s more (new
 * messages are printed as "msg" too) and prints "back_after_ack=N", the messages that
 * came a second time: acked messages must not come back.
 *
 *   NAMESRV_ADDR=127.0.0.1:9876 ./simple TOPIC GROUP EXPECT
 *
 * On a 4.x broker the wait fails with RMQ_UNSUPPORTED: the program prints
 * "unsupported response_code=3" and exits with 0.
 */
#include <time.h>

#include "common.h"

/* The ids seen so far (a small program: a linear search is enough). */
static char **seen;
static size_t n_seen, cap_seen;

/* Whether `id` was seen before; remembers it. */
static int seen_before(const char *id, size_t len) {
  for (size_t i = 0; i < n_seen; i++)
    if (strlen(seen[i]) == len && memcmp(seen[i], id, len) == 0) return 1;
  if (n_seen == cap_seen) {
    cap_seen = cap_seen ? 2 * cap_seen : 64;
    seen = realloc(seen, cap_seen * sizeof *seen);
    if (seen == NULL) exit(3);
  }
  seen[n_seen] = calloc(len + 1, 1);
  if (seen[n_seen] == NULL) exit(3);
  memcpy(seen[n_seen++], id, len);
  return 0;
}

/* A 4.x broker: prints the response code and ends the program's run with 0. */
static int unsupported(rmq_simple_consumer *c) {
  bool present = false;
  int32_t code = 0;
  CHECK(rmq_last_response_code(&present, &code));
  printf("unsupported response_code=%d\n", present ? code : -1);
  rmq_simple_consumer_free(c);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s TOPIC GROUP EXPECT\n", argv[0]);
    return 2;
  }
  const char *topic = argv[1], *group = argv[2];
  size_t expect = (size_t)atoi(argv[3]);

  rmq_simple_consumer_builder *b;
  CHECK(rmq_simple_consumer_builder_new(STR(group), &b));
  rmq_client_options *options = client_options(namesrv_from_env());
  CHECK(rmq_simple_consumer_builder_client_options(b, options));
  rmq_client_options_free(options);
  CHECK(rmq_simple_consumer_builder_subscribe(b, STR(topic), STR("*")));
  CHECK(rmq_simple_consumer_builder_consume_from(b, RMQ_CONSUME_FROM_FIRST_OFFSET));
  CHECK(rmq_simple_consumer_builder_await_duration(b, 1000));
  rmq_simple_consumer *c;
  CHECK(rmq_simple_consumer_builder_start(b, &c));

  /* Bad arguments are refused before anything is sent. */
  rmq_received_list *none = NULL;
  if (rmq_simple_consumer_receive(c, 0, 10000, &none) != RMQ_INVALID_ARGUMENT ||
      rmq_simple_consumer_receive(c, 1, 1000, &none) != RMQ_INVALID_ARGUMENT) {
    fprintf(stderr, "bad receive arguments were not RMQ_INVALID_ARGUMENT\n");
    return 1;
  }

  bool has = false;
  rmq_result w = rmq_simple_consumer_wait_for_messages(c, 10000, &has);
  if (w == RMQ_UNSUPPORTED) return unsupported(c);
  if (w != RMQ_OK) die("rmq_simple_consumer_wait_for_messages", w);
  printf("has_messages=%d\n", has ? 1 : 0);
  CHECK(rmq_simple_consumer_ack_batch(c, NULL, 0));

  size_t received = 0, back = 0;
  int changed = 0;
  time_t give_up = time(NULL) + 120, quiet_until = 0;
  for (;;) {
    time_t now = time(NULL);
    if (received < expect && now >= give_up) break;
    if (received >= expect) {
      if (quiet_until == 0) quiet_until = now + 12;
      if (now >= quiet_until) break;
    }
    rmq_received_list *list;
    rmq_result r = rmq_simple_consumer_receive(c, 32, 5000, &list);
    if (r == RMQ_UNSUPPORTED) return unsupported(c);
    if (r != RMQ_OK) die("rmq_simple_consumer_receive", r);
    size_t n, k = 0;
    CHECK(rmq_received_list_len(list, &n));
    const rmq_received_message **batch = calloc(n ? n : 1, sizeof *batch);
    if (batch == NULL) exit(3);
    for (size_t i = 0; i < n; i++) {
      const rmq_received_message *m;
      const rmq_message_ext *ext;
      const char *id;
      size_t id_len;
      CHECK(rmq_received_list_get(list, i, &m));
      CHECK(rmq_received_message_message(m, &ext));
      CHECK(rmq_message_ext_msg_id(ext, &id, &id_len));
      if (seen_before(id, id_len)) {
        printf("again %.*s\n", (int)id_len, id);
        back++;
      } else {
        printf("msg %.*s\n", (int)id_len, id);
        received++;
      }
      if (!changed) {
        char before[256], after[256];
        size_t nb = 0, na = 0;
        CHECK(rmq_received_message_receipt_handle(m, before, sizeof before, &nb));
        CHECK(rmq_simple_consumer_change_invisible_duration(c, m, 5000));
        CHECK(rmq_received_message_receipt_handle(m, after, sizeof after, &na));
        changed = 1;
        printf("receipt_changed=%d\n", nb != na || memcmp(before, after, nb) != 0);
        CHECK(rmq_simple_consumer_ack(c, m));
      } else {
        batch[k++] = m;
      }
    }
    CHECK(rmq_simple_consumer_ack_batch(c, batch, k));
    free(batch);
    if (rmq_received_list_get(list, n, &(const rmq_received_message *){NULL}) !=
        RMQ_OUT_OF_RANGE) {
      fprintf(stderr, "an index past the end was not RMQ_OUT_OF_RANGE\n");
      return 1;
    }
    rmq_received_list_free(list);
  }
  printf("summary received=%zu back_after_ack=%zu\n", received, back);
  CHECK(rmq_simple_consumer_shutdown(c));
  rmq_simple_consumer_free(c);
  for (size_t i = 0; i < n_seen; i++) free(seen[i]);
  free(seen);
  return received >= expect ? 0 : 1;
}
