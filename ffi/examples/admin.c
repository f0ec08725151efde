/*
 * The admin client from C: creates TOPIC (4 queues), sends three messages with the key
 * "ck" and reads them with a push consumer of GROUP, then asks the admin about it all:
 * the topic list, the cluster (JSON), each queue's min/max offset and the offset of time
 * 0, the total, the group's consume stats, a reset of its offsets to the earliest, each
 * message by its offset id and by its unique key, the messages by key; last it deletes
 * the topic. Prints one "name=value" line per check, then a summary.
 *
 *   NAMESRV_ADDR=127.0.0.1:9876 ./admin TOPIC GROUP
 */
#include <pthread.h>
#include <time.h>

#include "common.h"

#define SENT 3

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int consumed;

static int32_t on_message(void *userdata, const rmq_message_ext *const *msgs, size_t count,
                          rmq_consume_context *ctx) {
  (void)userdata;
  (void)msgs;
  (void)ctx;
  pthread_mutex_lock(&lock);
  consumed += (int)count;
  pthread_mutex_unlock(&lock);
  return RMQ_CONSUME_SUCCESS;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Whether the list holds `s`. */
static int list_has(const rmq_string_list *list, const char *s) {
  size_t n;
  CHECK(rmq_string_list_len(list, &n));
  for (size_t i = 0; i < n; i++) {
    const char *item;
    size_t len;
    CHECK(rmq_string_list_get(list, i, &item, &len));
    if (len == strlen(s) && memcmp(item, s, len) == 0) return 1;
  }
  return 0;
}

static int topic_listed(const rmq_admin *a, const char *topic) {
  rmq_string_list *topics;
  CHECK(rmq_admin_topic_list(a, &topics));
  int has = list_has(topics, topic);
  rmq_string_list_free(topics);
  return has;
}

/* The message's body equals `body`. */
static int body_is(const rmq_message_ext *m, const char *body) {
  const uint8_t *b;
  size_t len;
  CHECK(rmq_message_ext_body(m, &b, &len));
  return len == strlen(body) && memcmp(b, body, len) == 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s TOPIC GROUP\n", argv[0]);
    return 2;
  }
  const char *topic = argv[1], *group = argv[2];
  rmq_client_options *options = client_options(namesrv_from_env());
  rmq_admin *a;
  CHECK(rmq_admin_new(options, &a));
  CHECK(rmq_admin_create_topic(a, STR(topic), 4));

  /* Three messages with the key "ck"; their ids and offset ids. */
  rmq_producer_builder *pb;
  char pgroup[200];
  snprintf(pgroup, sizeof pgroup, "%s_p", group);
  CHECK(rmq_producer_builder_new(STR(pgroup), &pb));
  CHECK(rmq_producer_builder_client_options(pb, options));
  rmq_producer *p;
  CHECK(rmq_producer_builder_start(pb, &p));
  char ids[SENT][64], offset_ids[SENT][64], bodies[SENT][32];
  for (int i = 0; i < SENT; i++) {
    snprintf(bodies[i], sizeof bodies[i], "admin %d", i);
    rmq_message *m;
    CHECK(rmq_message_new(STR(topic), (const uint8_t *)bodies[i], strlen(bodies[i]), &m));
    CHECK(rmq_message_set_keys(m, STR("ck")));
    rmq_send_result *r;
    CHECK(rmq_producer_send(p, m, &r));
    const char *s;
    size_t len;
    CHECK(rmq_send_result_msg_id(r, &s, &len));
    snprintf(ids[i], sizeof ids[i], "%.*s", (int)len, s);
    CHECK(rmq_send_result_offset_msg_id(r, &s, &len));
    snprintf(offset_ids[i], sizeof offset_ids[i], "%.*s", (int)len, s);
    rmq_send_result_free(r);
    rmq_message_free(m);
  }
  rmq_producer_free(p);

  /* Consume them; freeing the consumer commits its offsets. The listener counts a
   * message before it returns, so the loop below can see the last count while that
   * listener is still running: shutdown waits for it (by default it would not, as in Java,
   * and that message would stay uncommitted). */
  rmq_push_consumer_builder *cb;
  CHECK(rmq_push_consumer_builder_new(STR(group), &cb));
  CHECK(rmq_push_consumer_builder_client_options(cb, options));
  CHECK(rmq_push_consumer_builder_await_termination_ms(cb, 10000));
  rmq_client_options_free(options);
  CHECK(rmq_push_consumer_builder_subscribe(cb, STR(topic), STR("*")));
  CHECK(rmq_push_consumer_builder_consume_from(cb, RMQ_CONSUME_FROM_FIRST_OFFSET, 0));
  CHECK(rmq_push_consumer_builder_listener(cb, on_message, NULL));
  rmq_push_consumer *c;
  CHECK(rmq_push_consumer_builder_start(cb, &c));
  for (int waited = 0; waited < 120000; waited += 100) {
    pthread_mutex_lock(&lock);
    int n = consumed;
    pthread_mutex_unlock(&lock);
    if (n >= SENT) break;
    sleep_ms(100);
  }
  rmq_push_consumer_free(c);
  printf("consumed=%d\n", consumed);

  printf("topic_listed=%d\n", topic_listed(a, topic));

  /* The cluster as JSON: ask for the size first. */
  size_t need = 0;
  char small[1];
  rmq_result res = rmq_admin_cluster_info_json(a, small, sizeof small, &need);
  if (res != RMQ_BUFFER_TOO_SMALL) die("rmq_admin_cluster_info_json (size)", res);
  char *json = malloc(need + 1);
  size_t written;
  CHECK(rmq_admin_cluster_info_json(a, json, need + 1, &written));
  printf("cluster_json=%d\n", written == need && strstr(json, "\"brokerAddrTable\"") != NULL &&
                                  strstr(json, "\"clusterAddrTable\"") != NULL);
  free(json);

  /* Offsets per queue: the messages stored, from time 0 on. */
  rmq_queue_list *queues;
  CHECK(rmq_admin_topic_queues(a, STR(topic), &queues));
  size_t nq;
  CHECK(rmq_queue_list_len(queues, &nq));
  int64_t sum = 0, at_zero_is_min = 1;
  for (size_t i = 0; i < nq; i++) {
    const rmq_message_queue *q;
    CHECK(rmq_queue_list_get(queues, i, &q));
    int64_t min, max, found;
    CHECK(rmq_admin_min_offset(a, q, &min));
    CHECK(rmq_admin_max_offset(a, q, &max));
    CHECK(rmq_admin_search_offset(a, q, 0, &found));
    sum += max - min;
    if (found != min) at_zero_is_min = 0;
  }
  rmq_queue_list_free(queues);
  int64_t total;
  CHECK(rmq_admin_total_max_offset(a, STR(topic), &total));
  printf("queues=%zu stored=%lld total_max_offset=%lld offset_at_0_is_min=%lld\n", nq,
         (long long)sum, (long long)total, (long long)at_zero_is_min);

  /* The group's progress: nothing left behind once its offsets reached the broker. */
  uint64_t diff = 1;
  int64_t committed = 0;
  size_t stats_queues = 0;
  for (int tries = 0; tries < 100 && (diff != 0 || committed != SENT); tries++) {
    if (tries > 0) sleep_ms(200);
    rmq_consume_stats *st;
    res = rmq_admin_consume_stats(a, STR(group), STR(topic), &st);
    if (res != RMQ_OK) continue;
    CHECK(rmq_consume_stats_total_diff(st, &diff));
    CHECK(rmq_consume_stats_queue_count(st, &stats_queues));
    committed = 0;
    for (size_t i = 0; i < stats_queues; i++) {
      const rmq_message_queue *q;
      int64_t broker_offset, consumer_offset, last_ms;
      CHECK(rmq_consume_stats_queue_at(st, i, &q, &broker_offset, &consumer_offset, &last_ms));
      committed += consumer_offset;
    }
    const rmq_message_queue *q;
    int64_t b, o, t;
    if (rmq_consume_stats_queue_at(st, stats_queues, &q, &b, &o, &t) != RMQ_OUT_OF_RANGE)
      die("rmq_consume_stats_queue_at past the end", RMQ_OTHER);
    rmq_consume_stats_free(st);
  }
  printf("consume_stats queues=%zu total_diff=%llu committed=%lld\n", stats_queues,
         (unsigned long long)diff, (long long)committed);

  /* Back to the beginning: with no consumer online the offsets are written directly, and
     the group is behind by every message again. */
  size_t reset_queues = 0;
  CHECK(rmq_admin_reset_offset(a, STR(group), STR(topic), RMQ_RESET_EARLIEST, 0, &reset_queues));
  uint64_t diff_after_reset = 0;
  for (int tries = 0; tries < 50 && diff_after_reset != SENT; tries++) {
    if (tries > 0) sleep_ms(200);
    rmq_consume_stats *st;
    CHECK(rmq_admin_consume_stats(a, STR(group), STR(topic), &st));
    CHECK(rmq_consume_stats_total_diff(st, &diff_after_reset));
    rmq_consume_stats_free(st);
  }
  printf("reset_queues=%zu diff_after_reset=%llu\n", reset_queues,
         (unsigned long long)diff_after_reset);

  /* Each message by its offset id, and by its unique key (the index may lag). */
  int viewed = 0, by_unique_key = 0;
  for (int i = 0; i < SENT; i++) {
    rmq_message_ext *m;
    CHECK(rmq_admin_view_message(a, STR(offset_ids[i]), &m));
    viewed += body_is(m, bodies[i]);
    rmq_message_ext_free(m);
    for (int tries = 0; tries < 50; tries++) {
      CHECK(rmq_admin_query_message_by_unique_key(a, STR(topic), STR(ids[i]), &m));
      if (m != NULL) {
        by_unique_key += body_is(m, bodies[i]);
        rmq_message_ext_free(m);
        break;
      }
      sleep_ms(200);
    }
  }
  printf("viewed=%d by_unique_key=%d\n", viewed, by_unique_key);

  /* The messages by key. */
  size_t by_key = 0;
  for (int tries = 0; tries < 50 && by_key < SENT; tries++) {
    if (tries > 0) sleep_ms(200);
    rmq_message_list *found;
    CHECK(rmq_admin_query_messages_by_key(a, STR(topic), STR("ck"), 64, 0, UINT64_MAX, &found));
    CHECK(rmq_message_list_len(found, &by_key));
    rmq_message_list_free(found);
  }
  rmq_message_list *none;
  CHECK(rmq_admin_query_messages_by_key(a, STR(topic), STR("no-such-key"), 64, 0, UINT64_MAX,
                                        &none));
  size_t by_other_key;
  CHECK(rmq_message_list_len(none, &by_other_key));
  rmq_message_list_free(none);
  printf("by_key=%zu by_other_key=%zu\n", by_key, by_other_key);

  /* Delete the topic: its brokers, and gone from the list. */
  rmq_string_list *brokers;
  CHECK(rmq_admin_delete_topic(a, STR(topic), &brokers));
  size_t nb;
  CHECK(rmq_string_list_len(brokers, &nb));
  rmq_string_list_free(brokers);
  int listed_after = topic_listed(a, topic);
  printf("deleted_on=%zu listed_after_delete=%d\n", nb, listed_after);

  rmq_admin_free(a);
  int ok = consumed >= SENT && sum == SENT && total == SENT && at_zero_is_min && diff == 0 &&
           committed == SENT && reset_queues == 4 && diff_after_reset == SENT && viewed == SENT && by_unique_key == SENT && by_key == SENT &&
           by_other_key == 0 && nb >= 1 && !listed_after;
  printf("summary ok=%d\n", ok);
  return ok ? 0 : 1;
}
