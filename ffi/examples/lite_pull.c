/*
 * Polls a topic from its first offset with a lite pull consumer until EXPECT messages
 * arrived, printing "msg <msg id>" for each, commits, and frees the consumer.
 *
 *   NAMESRV_ADDR=127.0.0.1:9876 ./lite_pull TOPIC GROUP EXPECT
 */
#include <time.h>

#include "common.h"

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s TOPIC GROUP EXPECT\n", argv[0]);
    return 2;
  }
  const char *topic = argv[1], *group = argv[2];
  size_t expect = (size_t)atoi(argv[3]);

  rmq_lite_pull_consumer_builder *b;
  CHECK(rmq_lite_pull_consumer_builder_new(STR(group), &b));
  CHECK(rmq_lite_pull_consumer_builder_namesrv(b, STR(namesrv_from_env())));
  CHECK(rmq_lite_pull_consumer_builder_subscribe(b, STR(topic), STR("*")));
  CHECK(rmq_lite_pull_consumer_builder_consume_from(b, RMQ_CONSUME_FROM_FIRST_OFFSET, 0));
  CHECK(rmq_lite_pull_consumer_builder_auto_commit(b, false));
  rmq_lite_pull_consumer *c;
  CHECK(rmq_lite_pull_consumer_builder_start(b, &c));

  size_t received = 0;
  time_t give_up = time(NULL) + 120;
  while (received < expect && time(NULL) < give_up) {
    rmq_message_list *list;
    CHECK(rmq_lite_pull_consumer_poll(c, 1000, &list));
    size_t n;
    CHECK(rmq_message_list_len(list, &n));
    for (size_t i = 0; i < n; i++) {
      const rmq_message_ext *m;
      const char *id, *tags;
      size_t id_len, tags_len;
      int64_t offset, stored;
      int32_t qid;
      CHECK(rmq_message_list_get(list, i, &m));
      CHECK(rmq_message_ext_msg_id(m, &id, &id_len));
      CHECK(rmq_message_ext_tags(m, &tags, &tags_len));
      CHECK(rmq_message_ext_queue_id(m, &qid));
      CHECK(rmq_message_ext_queue_offset(m, &offset));
      CHECK(rmq_message_ext_store_timestamp_ms(m, &stored));
      printf("msg %.*s queue=%d offset=%lld tags=%.*s stored_ms=%lld\n", (int)id_len, id, qid,
             (long long)offset, (int)tags_len, tags ? tags : "", (long long)stored);
      received++;
    }
    if (rmq_message_list_get(list, n, &(const rmq_message_ext *){NULL}) != RMQ_OUT_OF_RANGE) {
      fprintf(stderr, "an index past the end was not RMQ_OUT_OF_RANGE\n");
      return 1;
    }
    rmq_message_list_free(list);
    CHECK(rmq_lite_pull_consumer_commit(c));
  }
  rmq_lite_pull_consumer_free(c);
  printf("summary received=%zu\n", received);
  return received >= expect ? 0 : 1;
}
