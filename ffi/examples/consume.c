/*
 * Consumes a topic from its first offset with a push consumer until EXPECT messages
 * arrived, printing "msg <msg id>" for each, then frees the consumer.
 *
 *   NAMESRV_ADDR=127.0.0.1:9876 ./consume TOPIC GROUP EXPECT [orderly] [slow] [tags=EXPR]
 *
 * "tags=TagA || TagB" subscribes with a tag expression (default "*").
 * With "slow", every listener call sleeps 300 ms and the consumer is freed as soon as
 * one call is in flight: rmq_push_consumer_free must wait for it, and no call may start
 * after it returned.
 * A consume hook counts the messages carrying a "traceparent" property (printed as
 * "traced=N"), and the consumer's stats are printed as "stats <json>" before the free.
 */
#include <pthread.h>
#include <time.h>

#include "common.h"

struct state {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int received;
  int in_flight;
  int slow;
  int freed; /* set after rmq_push_consumer_free returned */
  int calls_after_free;
  int traced;       /* messages with a traceparent, seen by the consume hook's before */
  int hook_success; /* messages the hook's after saw acknowledged */
};

/* The consume hook, around every listener call on the consume thread. */
static void before_consume(void *userdata, const rmq_message_ext *const *msgs, size_t count,
                           const rmq_message_queue *queue) {
  struct state *s = userdata;
  (void)queue;
  for (size_t i = 0; i < count; i++) {
    const char *tp;
    size_t tp_len;
    CHECK(rmq_message_ext_property(msgs[i], STR("traceparent"), &tp, &tp_len));
    if (tp != NULL && tp_len == 55) __atomic_fetch_add(&s->traced, 1, __ATOMIC_RELAXED);
  }
}

static void after_consume(void *userdata, const rmq_message_ext *const *msgs, size_t count,
                          const rmq_message_queue *queue, rmq_consume_hook_status status) {
  struct state *s = userdata;
  (void)msgs;
  (void)queue;
  if (status == RMQ_CONSUME_HOOK_SUCCESS)
    __atomic_fetch_add(&s->hook_success, (int)count, __ATOMIC_RELAXED);
}

/* Runs on the library's consume threads, several at once. */
static int32_t on_messages(void *userdata, const rmq_message_ext *const *msgs, size_t count,
                           rmq_consume_context *ctx) {
  struct state *s = userdata;
  pthread_mutex_lock(&s->lock);
  if (s->freed) s->calls_after_free++;
  s->in_flight++;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  if (s->slow) {
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  const rmq_message_queue *queue;
  int32_t qid = -1;
  CHECK(rmq_consume_context_queue(ctx, &queue));
  CHECK(rmq_message_queue_id(queue, &qid));
  /* An orderly call's context takes a suspend time, a concurrent one's a delay level
     (0: the broker's choice, as by default). */
  rmq_result suspend = rmq_consume_context_set_suspend_ms(ctx, 100);
  rmq_result delay = rmq_consume_context_set_delay_level(ctx, 0);
  if ((suspend == RMQ_OK) == (delay == RMQ_OK)) {
    fprintf(stderr, "a context took both or neither setting\n");
    exit(1);
  }
  pthread_mutex_lock(&s->lock);
  for (size_t i = 0; i < count; i++) {
    const char *id, *body;
    size_t id_len, body_len;
    int64_t offset;
    uint32_t times;
    if (rmq_message_ext_msg_id(msgs[i], &id, &id_len) != RMQ_OK ||
        rmq_message_ext_body(msgs[i], (const uint8_t **)&body, &body_len) != RMQ_OK ||
        rmq_message_ext_queue_offset(msgs[i], &offset) != RMQ_OK ||
        rmq_message_ext_reconsume_times(msgs[i], &times) != RMQ_OK) {
      fprintf(stderr, "accessor failed\n");
      exit(1);
    }
    printf("msg %.*s queue=%d offset=%lld times=%u body=%.*s\n", (int)id_len, id, qid,
           (long long)offset, times, (int)body_len, body);
    s->received++;
  }
  fflush(stdout);
  s->in_flight--;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  return RMQ_CONSUME_SUCCESS;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s TOPIC GROUP EXPECT [orderly] [slow] [tags=EXPR]\n", argv[0]);
    return 2;
  }
  const char *topic = argv[1], *group = argv[2];
  int expect = atoi(argv[3]);
  int orderly = 0;
  const char *tags = "*";
  static struct state s = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 4; i < argc; i++) {
    if (strcmp(argv[i], "orderly") == 0) orderly = 1;
    if (strcmp(argv[i], "slow") == 0) s.slow = 1;
    if (strncmp(argv[i], "tags=", 5) == 0) tags = argv[i] + 5;
  }

  rmq_push_consumer_builder *b;
  CHECK(rmq_push_consumer_builder_new(STR(group), &b));
  rmq_client_options *options = client_options(namesrv_from_env());
  CHECK(rmq_push_consumer_builder_client_options(b, options));
  rmq_client_options_free(options);
  CHECK(rmq_push_consumer_builder_subscribe(b, STR(topic), STR(tags)));
  CHECK(rmq_push_consumer_builder_consume_from(b, RMQ_CONSUME_FROM_FIRST_OFFSET, 0));
  CHECK(rmq_push_consumer_builder_consume_threads(b, 2, 4));
  /* Java's defaults, spelled out: queues allocated here (0 would follow a 5.x broker's
     assignment, and pop when the group is switched to POP), and the POP settings. */
  CHECK(rmq_push_consumer_builder_client_rebalance(b, 1));
  CHECK(rmq_push_consumer_builder_pop_options(b, 60000, 32, 96));
  if (orderly)
    CHECK(rmq_push_consumer_builder_orderly_listener(b, on_messages, &s));
  else
    CHECK(rmq_push_consumer_builder_listener(b, on_messages, &s));
  CHECK(rmq_push_consumer_builder_consume_hook(b, before_consume, after_consume, &s));
  rmq_push_consumer *c;
  CHECK(rmq_push_consumer_builder_start(b, &c));

  /* Wait for the messages (or, when slow, for one call in flight), 120 s at most. */
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 120;
  pthread_mutex_lock(&s.lock);
  while (s.slow ? s.in_flight == 0 : s.received < expect) {
    if (pthread_cond_timedwait(&s.changed, &s.lock, &deadline) != 0) break;
  }
  int in_flight_at_free = s.in_flight;
  pthread_mutex_unlock(&s.lock);

  if (!s.slow) {
    /* The queues it holds (it received messages, so at least one), then a pause of its
       pulls and their resumption. */
    rmq_queue_list *held;
    size_t n_held = 0;
    CHECK(rmq_push_consumer_assigned_queues(c, &held));
    CHECK(rmq_queue_list_len(held, &n_held));
    rmq_queue_list_free(held);
    CHECK(rmq_push_consumer_suspend(c));
    CHECK(rmq_push_consumer_resume(c));
    printf("assigned_queues=%zu\n", n_held);
    /* The stats count a listener call once it returned: let the calls in flight end. */
    pthread_mutex_lock(&s.lock);
    while (s.in_flight > 0) pthread_cond_wait(&s.changed, &s.lock);
    pthread_mutex_unlock(&s.lock);
    struct timespec settle = {0, 300 * 1000 * 1000};
    nanosleep(&settle, NULL);
    PRINT_STATS(rmq_push_consumer_stats_json, c);
  }

  rmq_push_consumer_free(c);
  pthread_mutex_lock(&s.lock);
  int in_flight_after = s.in_flight;
  s.freed = 1;
  pthread_mutex_unlock(&s.lock);
  /* Give a stray callback the chance to show up. */
  struct timespec ts = {1, 0};
  nanosleep(&ts, NULL);
  pthread_mutex_lock(&s.lock);
  printf("summary received=%d in_flight_at_free=%d in_flight_after_free=%d calls_after_free=%d\n",
         s.received, in_flight_at_free, in_flight_after, s.calls_after_free);
  printf("traced=%d hook_success=%d\n", __atomic_load_n(&s.traced, __ATOMIC_RELAXED),
         __atomic_load_n(&s.hook_success, __ATOMIC_RELAXED));
  int ok = s.calls_after_free == 0 && in_flight_after == 0 && (s.slow || s.received >= expect);
  pthread_mutex_unlock(&s.lock);
  return ok ? 0 : 1;
}
