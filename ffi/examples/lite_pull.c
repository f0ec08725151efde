/*
 * Polls a topic from its first offset with a lite pull consumer until EXPECT messages
 * arrived, printing "msg <msg id>" for each, commits, and frees the consumer.
 *
 *   NAMESRV_ADDR=127.0.0.1:9876 ./lite_pull TOPIC GROUP EXPECT [assign] [tag=TAG] [ns=NS]
 *
 * With "ns=NS" the client options carry the namespace NS: the consumer reads NS%TOPIC on
 * the wire and shows the messages' topic without the prefix ("topic=" on each line).
 * With "tag=TAG" only messages with that tag count toward EXPECT (subscribed: the broker
 * filters; assigned: every message is read and printed, and the others are not counted).
 * With "assign", the consumer takes the topic's queues itself (from the admin client's
 * route) instead of subscribing, seeks each to its beginning, pauses and resumes the
 * first, prints its assignment and the first queue's offset for the time 0 (the queue's
 * first offset), and prints the committed offsets at the end. The first message's
 * properties are listed once ("props ...").
 */
#include <time.h>

#include "common.h"

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s TOPIC GROUP EXPECT [assign] [tag=TAG] [ns=NS]\n", argv[0]);
    return 2;
  }
  const char *topic = argv[1], *group = argv[2];
  size_t expect = (size_t)atoi(argv[3]);
  int assign = 0;
  const char *tag = NULL, *ns = NULL;
  for (int i = 4; i < argc; i++) {
    if (strcmp(argv[i], "assign") == 0) assign = 1;
    if (strncmp(argv[i], "tag=", 4) == 0) tag = argv[i] + 4;
    if (strncmp(argv[i], "ns=", 3) == 0) ns = argv[i] + 3;
  }

  rmq_lite_pull_consumer_builder *b;
  CHECK(rmq_lite_pull_consumer_builder_new(STR(group), &b));
  rmq_client_options *options = client_options(namesrv_from_env());
  if (ns) CHECK(rmq_client_options_namespace(options, STR(ns)));
  CHECK(rmq_lite_pull_consumer_builder_client_options(b, options));
  if (!assign) CHECK(rmq_lite_pull_consumer_builder_subscribe(b, STR(topic), STR(tag ? tag : "*")));
  CHECK(rmq_lite_pull_consumer_builder_consume_from(b, RMQ_CONSUME_FROM_FIRST_OFFSET, 0));
  CHECK(rmq_lite_pull_consumer_builder_auto_commit(b, false));
  rmq_lite_pull_consumer *c;
  CHECK(rmq_lite_pull_consumer_builder_start(b, &c));

  rmq_admin *admin = NULL;
  rmq_queue_list *queues = NULL;
  size_t nq = 0;
  const rmq_message_queue **qs = NULL;
  if (assign) {
    CHECK(rmq_admin_new(options, &admin));
    CHECK(rmq_admin_topic_queues(admin, STR(topic), &queues));
    CHECK(rmq_queue_list_len(queues, &nq));
    qs = calloc(nq, sizeof *qs);
    for (size_t i = 0; i < nq; i++) CHECK(rmq_queue_list_get(queues, i, &qs[i]));
    CHECK(rmq_lite_pull_consumer_assign(c, qs, nq));
    for (size_t i = 0; i < nq; i++) CHECK(rmq_lite_pull_consumer_seek_to_begin(c, qs[i]));
    CHECK(rmq_lite_pull_consumer_pause(c, qs, 1));
    CHECK(rmq_lite_pull_consumer_resume(c, qs, 1));
    printf("assigned %zu queues\n", nq);
    rmq_queue_list *held;
    size_t n_held = 0;
    CHECK(rmq_lite_pull_consumer_assignment(c, &held));
    CHECK(rmq_queue_list_len(held, &n_held));
    rmq_queue_list_free(held);
    int64_t first;
    CHECK(rmq_lite_pull_consumer_offset_for_timestamp(c, qs[0], 0, &first));
    printf("assignment %zu queues offset_for_time_0=%lld\n", n_held, (long long)first);
  }

  size_t received = 0;
  int listed_props = 0;
  time_t give_up = time(NULL) + 120;
  while (received < expect && time(NULL) < give_up) {
    rmq_message_list *list;
    CHECK(rmq_lite_pull_consumer_poll(c, 1000, &list));
    size_t n;
    CHECK(rmq_message_list_len(list, &n));
    for (size_t i = 0; i < n; i++) {
      const rmq_message_ext *m;
      const char *id, *tags, *mtopic;
      size_t id_len, tags_len, mtopic_len;
      int64_t offset, stored;
      int32_t qid;
      CHECK(rmq_message_list_get(list, i, &m));
      CHECK(rmq_message_ext_msg_id(m, &id, &id_len));
      CHECK(rmq_message_ext_tags(m, &tags, &tags_len));
      CHECK(rmq_message_ext_topic(m, &mtopic, &mtopic_len));
      CHECK(rmq_message_ext_queue_id(m, &qid));
      CHECK(rmq_message_ext_queue_offset(m, &offset));
      CHECK(rmq_message_ext_store_timestamp_ms(m, &stored));
      printf("msg %.*s queue=%d offset=%lld tags=%.*s stored_ms=%lld topic=%.*s\n", (int)id_len,
             id, qid, (long long)offset, (int)tags_len, tags ? tags : "", (long long)stored,
             (int)mtopic_len, mtopic);
      if (tag == NULL || (tags != NULL && tags_len == strlen(tag) && memcmp(tags, tag, tags_len) == 0))
        received++;
      if (!listed_props) {
        /* Every property by index; the TAGS one must match the tags getter. */
        size_t np;
        int tags_match = 0;
        CHECK(rmq_message_ext_property_count(m, &np));
        for (size_t k = 0; k < np; k++) {
          const char *name, *value;
          size_t name_len, value_len;
          CHECK(rmq_message_ext_property_at(m, k, &name, &name_len, &value, &value_len));
          if (name_len == 4 && memcmp(name, "TAGS", 4) == 0 && value_len == tags_len &&
              memcmp(value, tags, tags_len) == 0)
            tags_match = 1;
        }
        const char *name, *value;
        size_t name_len, value_len;
        if (rmq_message_ext_property_at(m, np, &name, &name_len, &value, &value_len) !=
            RMQ_OUT_OF_RANGE) {
          fprintf(stderr, "a property index past the end was not RMQ_OUT_OF_RANGE\n");
          return 1;
        }
        printf("props count=%zu tags_match=%d\n", np, tags_match);
        listed_props = 1;
      }
    }
    if (rmq_message_list_get(list, n, &(const rmq_message_ext *){NULL}) != RMQ_OUT_OF_RANGE) {
      fprintf(stderr, "an index past the end was not RMQ_OUT_OF_RANGE\n");
      return 1;
    }
    rmq_message_list_free(list);
    CHECK(rmq_lite_pull_consumer_commit(c));
  }
  if (assign) {
    for (size_t i = 0; i < nq; i++) {
      bool found;
      int64_t offset;
      CHECK(rmq_lite_pull_consumer_committed(c, qs[i], &found, &offset));
      if (found) printf("committed queue=%zu offset=%lld\n", i, (long long)offset);
    }
    free(qs);
    rmq_queue_list_free(queues);
    rmq_admin_free(admin);
  }
  PRINT_STATS(rmq_lite_pull_consumer_stats_json, c);
  rmq_lite_pull_consumer_free(c);
  rmq_client_options_free(options);
  printf("summary received=%zu\n", received);
  return received >= expect ? 0 : 1;
}
