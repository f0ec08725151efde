/*
 * Where rocketmq-client-cpp 2.x crashed, this library must not: NULL arguments, use and
 * destroy after destroy, destroy after shutdown, shutdown and destroy while a listener
 * runs, destroying a message the library lent to a callback, callbacks destroying their
 * own consumer or producer. Written against the 2.x
 * headers only.
 *
 *   safety <namesrv> <topic> <group>
 *
 * Prints "SAFE OK" and exits 0 when every check held; else names the first that failed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "CBatchMessage.h"
#include "CCommon.h"
#include "CErrorMessage.h"
#include "CMessage.h"
#include "CMessageExt.h"
#include "CProducer.h"
#include "CPullConsumer.h"
#include "CPushConsumer.h"

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "FAILED line %d: %s (last error: %s)\n", __LINE__, #cond, \
              GetLatestErrorMessage());                                          \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int entered = 0;   /* callbacks started */
static int inside = 0;    /* callbacks running now */
static int lent_destroy = -1;

static void pause_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000 * 1000};
  nanosleep(&t, NULL);
}

static int slow(CPushConsumer* consumer, CMessageExt* msg) {
  (void)consumer;
  pthread_mutex_lock(&lock);
  entered++;
  inside++;
  /* A received message is the library's: destroying it must be refused. */
  lent_destroy = DestroyMessage((CMessage*)msg);
  pthread_mutex_unlock(&lock);
  pause_ms(400);
  pthread_mutex_lock(&lock);
  inside--;
  pthread_mutex_unlock(&lock);
  return E_CONSUME_SUCCESS;
}

/* Destroys its own consumer from inside the callback, once. */
static int self_destroyed = -1;
static int destroy_self(CPushConsumer* consumer, CMessageExt* msg) {
  (void)msg;
  pthread_mutex_lock(&lock);
  int first = self_destroyed == -1;
  if (first) {
    self_destroyed = -2;
  }
  pthread_mutex_unlock(&lock);
  if (first) {
    int st = DestroyPushConsumer(consumer);
    pthread_mutex_lock(&lock);
    self_destroyed = st;
    pthread_mutex_unlock(&lock);
  }
  return E_CONSUME_SUCCESS;
}

static int get(int* v) {
  pthread_mutex_lock(&lock);
  int x = *v;
  pthread_mutex_unlock(&lock);
  return x;
}

static void null_arguments(void) {
  CSendResult r;
  CHECK(CreateProducer(NULL) == NULL);
  CHECK(CreatePushConsumer(NULL) == NULL);
  CHECK(CreatePullConsumer(NULL) == NULL);
  CHECK(CreateMessage(NULL) == NULL);
  CHECK(CreateTransactionProducer("g", NULL, NULL) == NULL);
  CHECK(DestroyProducer(NULL) == NULL_POINTER);
  CHECK(StartProducer(NULL) == NULL_POINTER);
  CHECK(ShutdownProducer(NULL) == NULL_POINTER);
  CHECK(SendMessageSync(NULL, NULL, &r) == NULL_POINTER);
  CHECK(SendMessageOneway(NULL, NULL) == NULL_POINTER);
  CHECK(SetProducerNameServerAddress(NULL, "x") == NULL_POINTER);
  CHECK(DestroyPushConsumer(NULL) == NULL_POINTER);
  CHECK(StartPushConsumer(NULL) == NULL_POINTER);
  CHECK(ShutdownPushConsumer(NULL) == NULL_POINTER);
  CHECK(Subscribe(NULL, "t", "*") == NULL_POINTER);
  CHECK(RegisterMessageCallback(NULL, slow) == NULL_POINTER);
  CHECK(GetPushConsumerGroupID(NULL) == NULL);
  CHECK(DestroyMessage(NULL) == NULL_POINTER);
  CHECK(SetMessageBody(NULL, "b") == NULL_POINTER);
  CHECK(GetMessageTopic(NULL) == NULL);
  CHECK(GetMessageQueueId(NULL) == -1);
  CHECK(AddMessage(NULL, NULL) == NULL_POINTER);
  CHECK(DestroyBatchMessage(NULL) == NULL_POINTER);
  CHECK(strlen(GetLatestErrorMessage()) > 0);

  CProducer* p = CreateProducer("g");
  CMessage* m = CreateMessage("T");
  CHECK(SetMessageBody(m, NULL) == NULL_POINTER);
  CHECK(SetByteMessageBody(m, "abc", -1) == NULL_POINTER);
  CHECK(SetMessageProperty(m, NULL, "v") == NULL_POINTER);
  CHECK(SendMessageSync(p, m, NULL) == NULL_POINTER);
  CHECK(SendMessageSync(p, NULL, &r) == NULL_POINTER);
  CHECK(SendMessageSync(p, m, &r) == PRODUCER_SEND_SYNC_FAILED); /* not started */
  CHECK(SendMessageSync((CProducer*)m, m, &r) == NULL_POINTER);  /* wrong type */
  CHECK(DestroyMessage(m) == OK);
  CHECK(DestroyMessage(m) == NULL_POINTER);                      /* twice */
  CHECK(GetOriginMessageBody(m) == NULL);                        /* after destroy */
  CHECK(DestroyProducer(p) == OK);
  CHECK(DestroyProducer(p) == NULL_POINTER);
  CHECK(StartProducer(p) == NULL_POINTER);

  CPullConsumer* pull = CreatePullConsumer("g");
  CHECK(DestroyPullConsumer(pull) == OK);
  CHECK(DestroyPullConsumer(pull) == NULL_POINTER);
}

static void destroy_after_shutdown(const char* namesrv, const char* topic) {
  CSendResult r;
  CProducer* p = CreateProducer("c_safety_producer");
  CHECK(SetProducerNameServerAddress(p, namesrv) == OK);
  CHECK(StartProducer(p) == OK);
  CHECK(StartProducer(p) == PRODUCER_START_FAILED);
  for (int i = 0; i < 4; i++) {
    CMessage* m = CreateMessage(topic);
    SetMessageBody(m, "safety");
    CHECK(SendMessageSync(p, m, &r) == OK);
    DestroyMessage(m);
  }
  CHECK(ShutdownProducer(p) == OK);
  CHECK(ShutdownProducer(p) == OK);
  CMessage* m = CreateMessage(topic);
  CHECK(SendMessageSync(p, m, &r) == PRODUCER_SEND_SYNC_FAILED);
  DestroyMessage(m);
  CHECK(DestroyProducer(p) == OK);
  CHECK(ShutdownProducer(p) == NULL_POINTER);
}

/* A consumer whose listener is running when it is stopped: `destroy_only` skips the
 * shutdown and destroys the running consumer at once. */
static void stop_with_listener_running(const char* namesrv, const char* topic, const char* group,
                                       int destroy_only) {
  pthread_mutex_lock(&lock);
  entered = 0;
  pthread_mutex_unlock(&lock);
  CPushConsumer* c = CreatePushConsumer(group);
  CHECK(SetPushConsumerNameServerAddress(c, namesrv) == OK);
  CHECK(SetPushConsumerThreadCount(c, 2) == OK);
  CHECK(Subscribe(c, topic, "*") == OK);
  CHECK(RegisterMessageCallback(c, slow) == OK);
  CHECK(StartPushConsumer(c) == OK);
  for (int i = 0; i < 600 && get(&entered) == 0; i++) {
    pause_ms(100);
  }
  CHECK(get(&entered) > 0);
  if (destroy_only) {
    CHECK(DestroyPushConsumer(c) == OK);
  } else {
    CHECK(ShutdownPushConsumer(c) == OK);
  }
  /* No callback runs once shutdown or destroy returned. */
  CHECK(get(&inside) == 0);
  int after = get(&entered);
  pause_ms(1000);
  CHECK(get(&entered) == after);
  CHECK(get(&lent_destroy) == NULL_POINTER);
  if (!destroy_only) {
    CHECK(DestroyPushConsumer(c) == OK);
  }
  CHECK(DestroyPushConsumer(c) == NULL_POINTER);
  CHECK(ShutdownPushConsumer(c) == NULL_POINTER);
}

/* An async send callback destroying its own producer. */
static CProducer* self_producer = NULL;
static int producer_destroyed = -1;
static void destroy_producer(CSendResult result, CMessage* msg, void* data) {
  (void)result;
  (void)msg;
  (void)data;
  int st = DestroyProducer(self_producer);
  pthread_mutex_lock(&lock);
  producer_destroyed = st;
  pthread_mutex_unlock(&lock);
}

static void send_failed(CMQException e, CMessage* msg, void* data) {
  (void)msg;
  (void)data;
  fprintf(stderr, "async send failed: %s\n", e.msg);
  pthread_mutex_lock(&lock);
  producer_destroyed = 99;
  pthread_mutex_unlock(&lock);
}

static void destroy_producer_from_inside(const char* namesrv, const char* topic) {
  self_producer = CreateProducer("c_safety_self");
  CHECK(SetProducerNameServerAddress(self_producer, namesrv) == OK);
  CHECK(StartProducer(self_producer) == OK);
  CMessage* m = CreateMessage(topic);
  SetMessageBody(m, "self");
  CHECK(SendAsync(self_producer, m, destroy_producer, send_failed, NULL) == OK);
  for (int i = 0; i < 600 && get(&producer_destroyed) == -1; i++) {
    pause_ms(100);
  }
  CHECK(get(&producer_destroyed) == OK);
  CHECK(DestroyProducer(self_producer) == NULL_POINTER);
  DestroyMessage(m);
}

/* A callback destroying its own consumer: no deadlock, OK, the handle dead afterwards. */
static void destroy_from_inside(const char* namesrv, const char* topic, const char* group) {
  CPushConsumer* c = CreatePushConsumer(group);
  CHECK(SetPushConsumerNameServerAddress(c, namesrv) == OK);
  CHECK(Subscribe(c, topic, "*") == OK);
  CHECK(RegisterMessageCallback(c, destroy_self) == OK);
  CHECK(StartPushConsumer(c) == OK);
  for (int i = 0; i < 600 && get(&self_destroyed) < 0; i++) {
    pause_ms(100);
  }
  CHECK(get(&self_destroyed) == OK);
  CHECK(DestroyPushConsumer(c) == NULL_POINTER);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <namesrv> <topic> <group>\n", argv[0]);
    return 2;
  }
  char group2[256];
  null_arguments();
  destroy_after_shutdown(argv[1], argv[2]);
  stop_with_listener_running(argv[1], argv[2], argv[3], 0);
  snprintf(group2, sizeof group2, "%s_destroy", argv[3]);
  stop_with_listener_running(argv[1], argv[2], group2, 1);
  snprintf(group2, sizeof group2, "%s_self", argv[3]);
  destroy_from_inside(argv[1], argv[2], group2);
  destroy_producer_from_inside(argv[1], argv[2]);
  printf("SAFE OK\n");
  return 0;
}
