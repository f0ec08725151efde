/*
 * Request-reply from C: a responder (a traced push consumer that answers every request
 * with "re:" + its body, sending the reply with rmq_create_reply_message) and a traced
 * requester in one program. The first delivery of the first request is sent back with
 * delay level 1 (rmq_push_consumer_send_message_back) and answered when it comes again.
 * Then as many requests again with rmq_producer_request_async, their replies collected
 * by the callback on a library thread. Prints "reply <body>" per request, "async reply
 * <body>" per async one (in request order), then a summary.
 *
 *   NAMESRV_ADDR=127.0.0.1:9876 ./request TOPIC COUNT
 */
#include <pthread.h>
#include <time.h>

#include "common.h"

struct responder {
  rmq_producer *replier;
  rmq_push_consumer *consumer; /* set before the first request is sent */
  pthread_mutex_t lock;
  int answered;
  int sent_back;
};

static int32_t on_request(void *userdata, const rmq_message_ext *const *msgs, size_t count,
                          rmq_consume_context *ctx) {
  (void)ctx;
  struct responder *r = userdata;
  for (size_t i = 0; i < count; i++) {
    const uint8_t *body;
    size_t len;
    uint32_t times;
    CHECK(rmq_message_ext_body(msgs[i], &body, &len));
    CHECK(rmq_message_ext_reconsume_times(msgs[i], &times));
    pthread_mutex_lock(&r->lock);
    int first = r->sent_back == 0 && times == 0 && len >= 9 && memcmp(body, "request 0", 9) == 0;
    if (first) r->sent_back = 1;
    pthread_mutex_unlock(&r->lock);
    if (first) {
      CHECK(rmq_push_consumer_send_message_back(r->consumer, msgs[i], 1));
      continue;
    }
    uint8_t answer[256];
    if (len > sizeof answer - 3) len = sizeof answer - 3;
    memcpy(answer, "re:", 3);
    memcpy(answer + 3, body, len);
    rmq_message *reply;
    CHECK(rmq_create_reply_message(msgs[i], answer, len + 3, &reply));
    rmq_result sent = rmq_producer_send(r->replier, reply, NULL);
    rmq_message_free(reply);
    if (sent != RMQ_OK) return RMQ_CONSUME_LATER;
    pthread_mutex_lock(&r->lock);
    r->answered++;
    pthread_mutex_unlock(&r->lock);
  }
  return RMQ_CONSUME_SUCCESS;
}

/* What the async requests' callbacks fill in, under `lock`; `main` waits on `done`. */
struct pending {
  pthread_mutex_t lock;
  pthread_cond_t done;
  int finished;
  int failed;
  char replies[16][64];
};

static void on_reply(void *userdata, rmq_result result, const rmq_message_ext *reply) {
  struct pending *p = userdata;
  pthread_mutex_lock(&p->lock);
  if (result == RMQ_OK) {
    const uint8_t *body;
    size_t len;
    CHECK(rmq_message_ext_body(reply, &body, &len));
    /* "re:async N": keep it at index N. */
    int i = len > 9 ? atoi((const char *)body + 9) : -1;
    if (i >= 0 && i < 16) snprintf(p->replies[i], sizeof p->replies[i], "%.*s", (int)len, (const char *)body);
  } else {
    char text[256];
    size_t n;
    rmq_last_error(text, sizeof text, &n);
    fprintf(stderr, "async request failed: %s: %s\n", rmq_result_name(result), text);
    p->failed++;
  }
  p->finished++;
  pthread_cond_signal(&p->done);
  pthread_mutex_unlock(&p->lock);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s TOPIC COUNT\n", argv[0]);
    return 2;
  }
  const char *topic = argv[1];
  int count = atoi(argv[2]);
  const char *namesrv = namesrv_from_env();
  char group[128];
  snprintf(group, sizeof group, "c_rr_%ld", (long)time(NULL));
  static struct responder r = {NULL, NULL, PTHREAD_MUTEX_INITIALIZER, 0, 0};

  rmq_client_options *options = client_options(namesrv);
  rmq_producer_builder *pb;
  CHECK(rmq_producer_builder_new(STR(group), &pb));
  CHECK(rmq_producer_builder_client_options(pb, options));
  CHECK(rmq_producer_builder_trace(pb, NULL, 0));
  rmq_producer *p;
  CHECK(rmq_producer_builder_start(pb, &p));
  r.replier = p;

  rmq_push_consumer_builder *cb;
  char cgroup[140];
  snprintf(cgroup, sizeof cgroup, "%s_responder", group);
  CHECK(rmq_push_consumer_builder_new(STR(cgroup), &cb));
  CHECK(rmq_push_consumer_builder_client_options(cb, options));
  rmq_client_options_free(options);
  CHECK(rmq_push_consumer_builder_subscribe(cb, STR(topic), STR("*")));
  CHECK(rmq_push_consumer_builder_consume_from(cb, RMQ_CONSUME_FROM_FIRST_OFFSET, 0));
  CHECK(rmq_push_consumer_builder_trace(cb, NULL, 0));
  CHECK(rmq_push_consumer_builder_listener(cb, on_request, &r));
  CHECK(rmq_push_consumer_builder_start(cb, &r.consumer));

  int replies = 0;
  for (int i = 0; i < count; i++) {
    char body[64];
    snprintf(body, sizeof body, "request %d", i);
    rmq_message *m;
    CHECK(rmq_message_new(STR(topic), (const uint8_t *)body, strlen(body), &m));
    rmq_message_ext *reply;
    rmq_result res = rmq_producer_request(p, m, 60000, &reply);
    rmq_message_free(m);
    if (res != RMQ_OK) die("rmq_producer_request", res);
    const uint8_t *rb;
    size_t rlen;
    CHECK(rmq_message_ext_body(reply, &rb, &rlen));
    printf("reply %.*s\n", (int)rlen, (const char *)rb);
    replies++;
    rmq_message_ext_free(reply);
  }
  fflush(stdout);

  static struct pending pend = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, {{0}}};
  int async_count = count < 16 ? count : 16;
  for (int i = 0; i < async_count; i++) {
    char body[64];
    snprintf(body, sizeof body, "async %d", i);
    rmq_message *m;
    CHECK(rmq_message_new(STR(topic), (const uint8_t *)body, strlen(body), &m));
    CHECK(rmq_producer_request_async(p, m, 60000, on_reply, &pend));
    rmq_message_free(m);
  }
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 90;
  pthread_mutex_lock(&pend.lock);
  while (pend.finished < async_count) {
    if (pthread_cond_timedwait(&pend.done, &pend.lock, &until) != 0) break;
  }
  int async_replies = 0;
  for (int i = 0; i < async_count; i++) {
    if (pend.replies[i][0] != '\0') {
      printf("async reply %s\n", pend.replies[i]);
      async_replies++;
    }
  }
  pthread_mutex_unlock(&pend.lock);
  fflush(stdout);

  rmq_push_consumer_free(r.consumer);
  rmq_producer_free(p);
  pthread_mutex_lock(&r.lock);
  printf("summary replies=%d async_replies=%d answered=%d sent_back=%d\n", replies, async_replies,
         r.answered, r.sent_back);
  int ok = replies == count && async_replies == async_count && r.sent_back == 1;
  pthread_mutex_unlock(&r.lock);
  return ok ? 0 : 1;
}
