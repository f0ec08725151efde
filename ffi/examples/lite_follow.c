/*
 * Follows a topic the way a program that manages its own queues does: creates TOPIC with
 * 4 queues, sends 4 messages as one async batch, starts a lite pull consumer of GROUP
 * without subscriptions and subscribes it while running, polls the 4 messages, shows
 * the group's connections and the topic's stats as the admin tool does, commits offset
 * 1 of every held queue, reads the earliest store times, unsubscribes, and lists the
 * topic's readable queues. One "key value" line per step; "summary ok=1" at the end.
 *
 *   NAMESRV_ADDR=127.0.0.1:9876 ./lite_follow TOPIC GROUP
 */
#include <stdatomic.h>
#include <time.h>

#include "common.h"

static atomic_int batch_done; /* 1: sent, 2: failed */

static void on_batch(void *userdata, rmq_result result, const rmq_send_result *r) {
  (void)userdata;
  (void)r;
  atomic_store(&batch_done, result == RMQ_OK ? 1 : 2);
}

/* Calls `json_fn` once to learn the size, then prints "<label> <json>". */
#define PRINT_JSON(label, json_fn, admin, name)                                  \
  do {                                                                           \
    size_t need_ = 0, got_ = 0;                                                  \
    char small_[2];                                                              \
    rmq_result r0_ = json_fn((admin), STR(name), small_, sizeof small_, &need_); \
    if (r0_ != RMQ_BUFFER_TOO_SMALL) die(#json_fn " (small buffer)", r0_);      \
    char *buf_ = malloc(need_ + 1);                                              \
    CHECK(json_fn((admin), STR(name), buf_, need_ + 1, &got_));                  \
    printf("%s %.*s\n", (label), (int)got_, buf_);                               \
    free(buf_);                                                                  \
  } while (0)

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s TOPIC GROUP\n", argv[0]);
    return 2;
  }
  const char *topic = argv[1], *group = argv[2];
  rmq_client_options *options = client_options(namesrv_from_env());
  rmq_admin *admin;
  CHECK(rmq_admin_new(options, &admin));
  CHECK(rmq_admin_create_topic(admin, STR(topic), 4));

  /* Four messages in one async batch. */
  rmq_producer_builder *pb;
  CHECK(rmq_producer_builder_new(STR("c_follow_producer"), &pb));
  CHECK(rmq_producer_builder_client_options(pb, options));
  rmq_producer *p;
  CHECK(rmq_producer_builder_start(pb, &p));
  rmq_message *msgs[4];
  for (int i = 0; i < 4; i++) {
    char body[16];
    int n = snprintf(body, sizeof body, "m%d", i);
    CHECK(rmq_message_new(STR(topic), (const uint8_t *)body, (size_t)n, &msgs[i]));
  }
  CHECK(rmq_producer_send_batch_async(p, (const rmq_message *const *)msgs, 4, on_batch, NULL));
  for (int i = 0; i < 3000 && atomic_load(&batch_done) == 0; i++) sleep_ms(10);
  printf("batch_async %s\n", atomic_load(&batch_done) == 1 ? "ok" : "failed");
  for (int i = 0; i < 4; i++) rmq_message_free(msgs[i]);

  /* A consumer without subscriptions, subscribed while running. */
  rmq_lite_pull_consumer_builder *b;
  CHECK(rmq_lite_pull_consumer_builder_new(STR(group), &b));
  CHECK(rmq_lite_pull_consumer_builder_client_options(b, options));
  CHECK(rmq_lite_pull_consumer_builder_consume_from(b, RMQ_CONSUME_FROM_FIRST_OFFSET, 0));
  CHECK(rmq_lite_pull_consumer_builder_auto_commit(b, false));
  rmq_lite_pull_consumer *c;
  CHECK(rmq_lite_pull_consumer_builder_start(b, &c));
  CHECK(rmq_lite_pull_consumer_subscribe(c, STR(topic), STR("*")));
  size_t received = 0;
  time_t give_up = time(NULL) + 60;
  while (received < 4 && time(NULL) < give_up) {
    rmq_message_list *list;
    CHECK(rmq_lite_pull_consumer_poll(c, 500, &list));
    size_t n;
    CHECK(rmq_message_list_len(list, &n));
    received += n;
    rmq_message_list_free(list);
  }
  printf("subscribed received=%zu\n", received);

  PRINT_JSON("connections", rmq_admin_consumer_connections_json, admin, group);
  PRINT_JSON("topic_stats", rmq_admin_topic_stats_json, admin, topic);

  /* Offset 1 of every held queue, written through; then the earliest store times. */
  rmq_queue_list *held;
  size_t nq = 0;
  CHECK(rmq_lite_pull_consumer_assignment(c, &held));
  CHECK(rmq_queue_list_len(held, &nq));
  const rmq_message_queue **qs = calloc(nq ? nq : 1, sizeof *qs);
  int64_t *offsets = calloc(nq ? nq : 1, sizeof *offsets);
  for (size_t i = 0; i < nq; i++) {
    CHECK(rmq_queue_list_get(held, i, &qs[i]));
    offsets[i] = 1;
  }
  CHECK(rmq_lite_pull_consumer_commit_offsets(c, qs, offsets, nq, true));
  int64_t committed_sum = 0;
  size_t with_messages = 0;
  int64_t *read = calloc(nq ? nq : 1, sizeof *read); /* -1: not found */
  for (size_t i = 0; i < nq; i++) {
    bool found;
    int64_t offset, stored_ms;
    CHECK(rmq_lite_pull_consumer_committed(c, qs[i], &found, &offset));
    read[i] = found ? offset : -1;
    if (found) committed_sum += offset;
    CHECK(rmq_admin_earliest_msg_store_time(admin, qs[i], &found, &stored_ms));
    if (found && stored_ms > 0) with_messages++;
  }
  printf("held=%zu committed_sum=%lld earliest_found=%zu\n", nq, (long long)committed_sum,
         with_messages);
  if (committed_sum != (int64_t)nq) {
    /* Seen in CI about once in three runs: say which queue read what, and 1 s later. */
    sleep_ms(1000);
    for (size_t i = 0; i < nq; i++) {
      bool found;
      int64_t offset;
      int32_t queue_id = -1;
      CHECK(rmq_lite_pull_consumer_committed(c, qs[i], &found, &offset));
      CHECK(rmq_message_queue_id(qs[i], &queue_id));
      printf("queue=%d committed=%lld one_second_later=%lld\n", queue_id,
             (long long)read[i], found ? (long long)offset : -1LL);
    }
  }
  free(read);
  offsets[0] = -1;
  printf("negative_commit=%s\n",
         rmq_result_name(rmq_lite_pull_consumer_commit_offsets(c, qs, offsets, 1, true)));
  free(offsets);
  free(qs);
  rmq_queue_list_free(held);

  CHECK(rmq_lite_pull_consumer_unsubscribe(c, STR(topic)));
  CHECK(rmq_lite_pull_consumer_assignment(c, &held));
  CHECK(rmq_queue_list_len(held, &nq));
  rmq_queue_list_free(held);
  printf("after_unsubscribe assignment=%zu\n", nq);

  rmq_queue_list *readable;
  size_t nr = 0;
  CHECK(rmq_lite_pull_consumer_fetch_message_queues(c, STR(topic), &readable));
  CHECK(rmq_queue_list_len(readable, &nr));
  rmq_queue_list_free(readable);
  printf("fetched=%zu\n", nr);

  rmq_lite_pull_consumer_free(c);
  rmq_producer_free(p);
  rmq_admin_free(admin);
  rmq_client_options_free(options);
  printf("summary ok=%d\n", received == 4 && nr == 4);
  return received == 4 && nr == 4 ? 0 : 1;
}
