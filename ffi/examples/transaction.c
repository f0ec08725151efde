/*
 * Transactions from C: COUNT half messages, whose local transactions commit, roll back or
 * answer "unknown" in turn (by body); the broker then asks the check callback about the
 * unknown ones, which commits them. Prints "sent <msg id> <state>" per message and
 * "checked <msg id>" per check, then frees the producer once every unknown one was
 * checked (120 s at most).
 *
 *   NAMESRV_ADDR=127.0.0.1:9876 ./transaction TOPIC COUNT
 */
#include <pthread.h>
#include <time.h>

#include "common.h"

struct state {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int executed;
  int checked; /* distinct messages the broker asked about */
  char seen[64][64];
  int unknown;
  void *arg_seen;
};

static int starts_with(const uint8_t *body, size_t len, const char *prefix) {
  size_t n = strlen(prefix);
  return len >= n && memcmp(body, prefix, n) == 0;
}

/* Runs on the sending thread, during rmq_transaction_producer_send. */
static int32_t execute(void *userdata, const rmq_message *msg, void *arg) {
  struct state *s = userdata;
  const uint8_t *body;
  size_t len;
  CHECK(rmq_message_body(msg, &body, &len));
  pthread_mutex_lock(&s->lock);
  s->executed++;
  s->arg_seen = arg;
  pthread_mutex_unlock(&s->lock);
  if (starts_with(body, len, "commit")) return RMQ_TRANSACTION_COMMIT;
  if (starts_with(body, len, "rollback")) return RMQ_TRANSACTION_ROLLBACK;
  return RMQ_TRANSACTION_UNKNOWN;
}

/* Runs on the producer's check threads when the broker asks. */
static int32_t check(void *userdata, const rmq_message_ext *msg) {
  struct state *s = userdata;
  const char *id;
  size_t id_len;
  CHECK(rmq_message_ext_msg_id(msg, &id, &id_len));
  pthread_mutex_lock(&s->lock);
  int known = 0;
  for (int i = 0; i < s->checked; i++)
    if (strlen(s->seen[i]) == id_len && memcmp(s->seen[i], id, id_len) == 0) known = 1;
  if (!known && s->checked < 64 && id_len < 64) {
    memcpy(s->seen[s->checked], id, id_len);
    s->seen[s->checked][id_len] = '\0';
    s->checked++;
    printf("checked %.*s\n", (int)id_len, id);
    fflush(stdout);
  }
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  return RMQ_TRANSACTION_COMMIT;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s TOPIC COUNT\n", argv[0]);
    return 2;
  }
  const char *topic = argv[1];
  int count = atoi(argv[2]);
  static struct state s = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, {{0}}, 0, NULL};
  char group[128];
  snprintf(group, sizeof group, "c_tx_%ld", (long)time(NULL));

  rmq_transaction_producer_builder *b;
  CHECK(rmq_transaction_producer_builder_new(STR(group), execute, check, &s, &b));
  rmq_client_options *options = client_options(namesrv_from_env());
  CHECK(rmq_transaction_producer_builder_client_options(b, options));
  rmq_client_options_free(options);
  CHECK(rmq_transaction_producer_builder_check_pool(b, 1, 2, 100));
  rmq_transaction_producer *p;
  CHECK(rmq_transaction_producer_builder_start(b, &p));

  const char *kinds[] = {"commit", "rollback", "check"};
  for (int i = 0; i < count; i++) {
    char body[64];
    snprintf(body, sizeof body, "%s %d", kinds[i % 3], i);
    rmq_message *m;
    CHECK(rmq_message_new(STR(topic), (const uint8_t *)body, strlen(body), &m));
    rmq_transaction_state st;
    rmq_send_result *r;
    CHECK(rmq_transaction_producer_send(p, m, &s, &st, &r));
    const char *id;
    size_t id_len;
    CHECK(rmq_send_result_msg_id(r, &id, &id_len));
    printf("sent %.*s %s\n", (int)id_len, id,
           st == RMQ_TRANSACTION_COMMIT     ? "commit"
           : st == RMQ_TRANSACTION_ROLLBACK ? "rollback"
                                            : "unknown");
    if (st == RMQ_TRANSACTION_UNKNOWN) s.unknown++;
    rmq_send_result_free(r);
    rmq_message_free(m);
  }
  fflush(stdout);

  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 120;
  pthread_mutex_lock(&s.lock);
  while (s.checked < s.unknown)
    if (pthread_cond_timedwait(&s.changed, &s.lock, &deadline) != 0) break;
  int ok = s.checked >= s.unknown && s.executed == count && s.arg_seen == &s;
  printf("summary executed=%d unknown=%d checked=%d\n", s.executed, s.unknown, s.checked);
  pthread_mutex_unlock(&s.lock);
  /* Let the commit answers of the checks reach the broker before the producer goes. */
  struct timespec ts = {1, 0};
  nanosleep(&ts, NULL);
  rmq_transaction_producer_free(p);
  return ok ? 0 : 1;
}
