/*
 * Sends messages every way the producer can: sync, async with a callback, one way, to a
 * queue, with a selector, and as a batch. Prints "ack <msg id>" for every message the
 * broker acknowledged and a summary line. Acknowledged messages have the tag TagA, the
 * one-way message OneWay. A send hook adds a "traceparent" property to every message
 * and counts the outcomes; the producer's stats are printed as "stats <json>".
 *
 *   NAMESRV_ADDR=127.0.0.1:9876 ./produce TOPIC COUNT
 */
#include <pthread.h>

#include "common.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static int async_pending = 0;
static int async_failed = 0;

static void print_ack(const rmq_send_result *sr) {
  const char *id;
  size_t len;
  CHECK(rmq_send_result_msg_id(sr, &id, &len));
  /* A batch's id lists the ids of its messages, separated by commas. */
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || id[i] == ',') {
      printf("ack %.*s\n", (int)(i - start), id + start);
      start = i + 1;
    }
  }
}

/* Runs on a library callback thread. */
static void on_sent(void *userdata, rmq_result result, const rmq_send_result *sr) {
  (void)userdata;
  pthread_mutex_lock(&lock);
  if (result == RMQ_OK) {
    print_ack(sr);
  } else {
    char text[256];
    size_t n;
    rmq_last_error(text, sizeof text, &n);
    fprintf(stderr, "async send failed: %s: %s\n", rmq_result_name(result), text);
    async_failed++;
  }
  async_pending--;
  pthread_cond_signal(&done);
  pthread_mutex_unlock(&lock);
}

struct hook_counts {
  int before;
  int after_ok;
  int after_failed;
};

/* The send hook, before each message: a W3C traceparent, as a tracer would add. Runs on
   the sending thread. */
static void before_send(void *userdata, const rmq_message *msg, rmq_send_hook_context *ctx) {
  struct hook_counts *h = userdata;
  const char *topic;
  size_t topic_len;
  CHECK(rmq_message_topic(msg, &topic, &topic_len));
  int n = __atomic_add_fetch(&h->before, 1, __ATOMIC_RELAXED);
  char tp[64];
  snprintf(tp, sizeof tp, "00-%032x-%016x-01", n, n);
  CHECK(rmq_send_hook_context_put_property(ctx, STR("traceparent"), STR(tp)));
  /* Reserved names are refused, not a crash. */
  if (rmq_send_hook_context_put_property(ctx, STR("UNIQ_KEY"), STR("x")) != RMQ_INVALID_ARGUMENT) {
    fprintf(stderr, "a reserved property was accepted\n");
    exit(1);
  }
}

/* After each message: on the sending thread, or a callback thread for async sends. */
static void after_send(void *userdata, const rmq_message *msg, rmq_result result,
                       const rmq_send_result *sr) {
  struct hook_counts *h = userdata;
  const char *tp;
  size_t tp_len;
  CHECK(rmq_message_property(msg, STR("traceparent"), &tp, &tp_len));
  if (tp == NULL) {
    fprintf(stderr, "after_send: the message has no traceparent\n");
    exit(1);
  }
  (void)sr;
  __atomic_fetch_add(result == RMQ_OK ? &h->after_ok : &h->after_failed, 1, __ATOMIC_RELAXED);
}

/* Picks the queue by the number in userdata, as a hash selector would by key. */
static int64_t select_queue(void *userdata, const rmq_message_queue *const *queues, size_t count,
                            const rmq_message *msg) {
  (void)queues;
  (void)msg;
  return (int64_t)(*(size_t *)userdata % count);
}

static void on_log(void *userdata, int32_t level, const char *target, size_t target_len,
                   const char *message, size_t message_len) {
  (void)level;
  (void)target;
  (void)target_len;
  (void)message;
  (void)message_len;
  __atomic_fetch_add((int *)userdata, 1, __ATOMIC_RELAXED);
}

static rmq_message *new_message(const char *topic, int i) {
  char body[64];
  snprintf(body, sizeof body, "hello from C %d", i);
  rmq_message *m;
  CHECK(rmq_message_new(STR(topic), (const uint8_t *)body, strlen(body), &m));
  CHECK(rmq_message_set_tags(m, STR("TagA")));
  CHECK(rmq_message_set_keys(m, STR("key1 key2")));
  CHECK(rmq_message_put_property(m, STR("origin"), STR("c")));
  return m;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s TOPIC COUNT\n", argv[0]);
    return 2;
  }
  const char *topic = argv[1];
  int count = atoi(argv[2]);
  const char *namesrv = namesrv_from_env();
  static int log_records = 0;
  CHECK(rmq_set_log_callback(on_log, &log_records, 3));

  /* The topic, and its route as JSON (first with a buffer too small to show the size). */
  /* One set of client options for the admin and the producer; each copies it. */
  rmq_client_options *options = client_options(namesrv);
  rmq_admin *admin;
  CHECK(rmq_admin_new(options, &admin));
  CHECK(rmq_admin_create_topic(admin, STR(topic), 4));
  char small[8];
  size_t need = 0;
  rmq_result r = RMQ_NO_ROUTE;
  for (int tries = 0; tries < 100; tries++) {
    r = rmq_admin_topic_route_json(admin, STR(topic), small, sizeof small, &need);
    if (r == RMQ_BUFFER_TOO_SMALL) break;
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (r != RMQ_BUFFER_TOO_SMALL) die("rmq_admin_topic_route_json", r);
  char *json = malloc(need + 1);
  size_t written = 0;
  CHECK(rmq_admin_topic_route_json(admin, STR(topic), json, need + 1, &written));
  printf("route %zu bytes\n", written);
  free(json);
  rmq_admin_free(admin);

  rmq_producer_builder *b;
  CHECK(rmq_producer_builder_new(STR("c_example_producer"), &b));
  CHECK(rmq_producer_builder_client_options(b, options));
  rmq_client_options_free(options);
  CHECK(rmq_producer_builder_send_timeout_ms(b, 20000));
  CHECK(rmq_producer_builder_retries(b, 2));
  /* RMQ_EXAMPLE_AUTO_BATCH set: single sends gathered into batches (Java setAutoBatch);
     every send still gets its own result. */
  if (getenv("RMQ_EXAMPLE_AUTO_BATCH")) {
    CHECK(rmq_producer_builder_auto_batch(b, true));
    CHECK(rmq_producer_builder_batch_max_delay_ms(b, 20));
    CHECK(rmq_producer_builder_batch_max_bytes(b, 64 * 1024));
    CHECK(rmq_producer_builder_total_batch_max_bytes(b, 8 * 1024 * 1024));
    printf("auto batch on\n");
  }
  static struct hook_counts hooks = {0, 0, 0};
  CHECK(rmq_producer_builder_send_hook(b, before_send, after_send, &hooks));
  rmq_producer *p;
  CHECK(rmq_producer_builder_start(b, &p));

  /* NULL is an error code, never a crash. */
  if (rmq_producer_send(p, NULL, NULL) != RMQ_NULL_PARAMETER) {
    fprintf(stderr, "a NULL message was not RMQ_NULL_PARAMETER\n");
    return 1;
  }
  printf("null check ok\n");

  int acked = 0;
  for (int i = 0; i < count; i++) {
    rmq_message *m = new_message(topic, i);
    rmq_send_result *sr;
    CHECK(rmq_producer_send(p, m, &sr));
    print_ack(sr);
    acked++;
    rmq_send_result_free(sr);
    rmq_message_free(m);
  }

  for (int i = 0; i < count; i++) {
    rmq_message *m = new_message(topic, 100 + i);
    pthread_mutex_lock(&lock);
    async_pending++;
    pthread_mutex_unlock(&lock);
    CHECK(rmq_producer_send_async(p, m, on_sent, NULL));
    rmq_message_free(m); /* the library copied it */
  }
  /* One more async send, to the queue a selector picks. */
  size_t async_key = 2;
  rmq_message *am = new_message(topic, 150);
  pthread_mutex_lock(&lock);
  async_pending++;
  pthread_mutex_unlock(&lock);
  CHECK(rmq_producer_send_async_with_selector(p, am, select_queue, &async_key, on_sent, NULL));
  rmq_message_free(am);
  pthread_mutex_lock(&lock);
  while (async_pending > 0) pthread_cond_wait(&done, &lock);
  pthread_mutex_unlock(&lock);
  if (async_failed > 0) return 1;
  acked += count + 1;

  /* To a queue picked by a selector, and to the first queue of the topic. */
  rmq_message *m = new_message(topic, 200);
  size_t key = 7;
  rmq_send_result *sr;
  CHECK(rmq_producer_send_with_selector(p, m, select_queue, &key, &sr));
  print_ack(sr);
  int32_t qid;
  const rmq_message_queue *q;
  CHECK(rmq_send_result_queue(sr, &q));
  CHECK(rmq_message_queue_id(q, &qid));
  printf("selector queue %d\n", qid);
  rmq_send_result_free(sr);
  acked++;

  rmq_queue_list *queues;
  CHECK(rmq_producer_fetch_queues(p, STR(topic), &queues));
  const rmq_message_queue *first;
  CHECK(rmq_queue_list_get(queues, 0, &first));
  CHECK(rmq_producer_send_to_queue(p, m, first, &sr));
  print_ack(sr);
  rmq_send_result_free(sr);
  rmq_queue_list_free(queues);
  acked++;
  rmq_message_free(m);

  /* A batch of three. */
  rmq_message *batch[3];
  for (int i = 0; i < 3; i++) batch[i] = new_message(topic, 300 + i);
  CHECK(rmq_producer_send_batch(p, (const rmq_message *const *)batch, 3, &sr));
  print_ack(sr);
  rmq_send_result_free(sr);
  for (int i = 0; i < 3; i++) rmq_message_free(batch[i]);
  acked += 3;

  /* One way: no answer, so not counted as acknowledged; tagged apart so consumers can
     leave it out. */
  m = new_message(topic, 400);
  CHECK(rmq_message_set_tags(m, STR("OneWay")));
  CHECK(rmq_producer_send_oneway(p, m));
  rmq_message_free(m);

  PRINT_STATS(rmq_producer_stats_json, p);
  rmq_producer_free(p);
  /* rmq_producer_free waited for the hooks: the counts are final. */
  printf("hooks before=%d after_ok=%d after_failed=%d\n", hooks.before, hooks.after_ok,
         hooks.after_failed);
  CHECK(rmq_set_log_callback(NULL, NULL, 0));
  printf("summary acked=%d oneway=1 log_records=%d\n", acked, log_records);
  return 0;
}
