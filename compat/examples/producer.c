/*
 * A producer written against the rocketmq-client-cpp 2.x C API only (the headers in
 * ../include, under their original names): sync, async (both callback styles), orderly
 * (selector, sharding key, async, oneway), batch and oneway sends.
 *
 *   producer <namesrv> <topic> <count>
 *
 * Prints "SENT <msgId>" per acknowledged message ("BATCH <id>,<id>,..." for the batch);
 * exits 0 when every send was acknowledged.
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
#include "CProducer.h"
#include "CSendResult.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static int pending = 0;
static int failed = 0;

static void on_success(CSendResult result, CMessage* msg, void* userData) {
  pthread_mutex_lock(&lock);
  printf("SENT %s\n", result.msgId);
  fflush(stdout);
  (void)msg;
  (*(int*)userData)++;
  pending--;
  pthread_cond_broadcast(&done);
  pthread_mutex_unlock(&lock);
}

static void on_exception(CMQException e, CMessage* msg, void* userData) {
  pthread_mutex_lock(&lock);
  fprintf(stderr, "async send failed: %d %s\n", e.error, e.msg);
  (void)msg;
  (void)userData;
  failed++;
  pending--;
  pthread_cond_broadcast(&done);
  pthread_mutex_unlock(&lock);
}

/* The callbacks of SendMessageAsync / SendMessageOrderlyAsync (no message, no userData). */
static void on_plain_success(CSendResult result) {
  pthread_mutex_lock(&lock);
  printf("SENT %s\n", result.msgId);
  fflush(stdout);
  pending--;
  pthread_cond_broadcast(&done);
  pthread_mutex_unlock(&lock);
}

static void on_plain_exception(CMQException e) {
  pthread_mutex_lock(&lock);
  fprintf(stderr, "async send failed: %d %s\n", e.error, e.msg);
  failed++;
  pending--;
  pthread_cond_broadcast(&done);
  pthread_mutex_unlock(&lock);
}

/* Waits for the async sends in flight; returns how many are left or failed. */
static int wait_async(void) {
  pthread_mutex_lock(&lock);
  while (pending > 0) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    if (pthread_cond_timedwait(&done, &lock, &until) != 0) {
      break;
    }
  }
  int bad = pending + failed;
  pthread_mutex_unlock(&lock);
  return bad;
}

static void add_pending(void) {
  pthread_mutex_lock(&lock);
  pending++;
  pthread_mutex_unlock(&lock);
}

static int by_arg(int size, CMessage* msg, void* arg) {
  (void)msg;
  return *(int*)arg % size;
}

static CMessage* make(const char* topic, const char* kind, int i) {
  char body[128], keys[64];
  CMessage* msg = CreateMessage(topic);
  snprintf(body, sizeof body, "c-%s-%d", kind, i);
  snprintf(keys, sizeof keys, "key-%d", i);
  SetMessageTags(msg, "TagC");
  SetMessageKeys(msg, keys);
  SetMessageBody(msg, body);
  SetMessageProperty(msg, "origin", "c");
  return msg;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <namesrv> <topic> <count>\n", argv[0]);
    return 2;
  }
  const char* topic = argv[2];
  int count = atoi(argv[3]);
  int i, acked = 0;
  CSendResult result;

  CProducer* producer = CreateProducer("c_compat_producer");
  SetProducerNameServerAddress(producer, argv[1]);
  SetProducerSendMsgTimeout(producer, 10000);
  SetProducerLogLevel(producer, E_LOG_LEVEL_WARN);
  if (StartProducer(producer) != OK) {
    fprintf(stderr, "start: %s\n", GetLatestErrorMessage());
    return 1;
  }
  printf("VERSION %s\n", ShowProducerVersion(producer));

  for (i = 0; i < count; i++) {
    CMessage* msg = make(topic, "sync", i);
    if (SendMessageSync(producer, msg, &result) != OK || result.sendStatus != E_SEND_OK) {
      fprintf(stderr, "sync send: %s\n", GetLatestErrorMessage());
      return 1;
    }
    printf("SENT %s\n", result.msgId);
    DestroyMessage(msg);
  }

  /* Async: the messages live until their callback ran. */
  CMessage** async_msgs = calloc((size_t)count, sizeof(CMessage*));
  for (i = 0; i < count; i++) {
    async_msgs[i] = make(topic, "async", i);
    pthread_mutex_lock(&lock);
    pending++;
    pthread_mutex_unlock(&lock);
    if (SendAsync(producer, async_msgs[i], on_success, on_exception, &acked) != OK) {
      fprintf(stderr, "async send: %s\n", GetLatestErrorMessage());
      return 1;
    }
  }
  int bad = wait_async();
  for (i = 0; i < count; i++) {
    DestroyMessage(async_msgs[i]);
  }
  free(async_msgs);
  if (bad != 0 || acked != count) {
    fprintf(stderr, "async: %d pending or failed, %d acked\n", bad, acked);
    return 1;
  }

  /* The other async styles: the message may be destroyed once the call returned. */
  for (i = 0; i < count; i++) {
    CMessage* msg = make(topic, "plain-async", i);
    add_pending();
    if (SendMessageAsync(producer, msg, on_plain_success, on_plain_exception) != OK) {
      fprintf(stderr, "SendMessageAsync: %s\n", GetLatestErrorMessage());
      return 1;
    }
    DestroyMessage(msg);
    msg = make(topic, "orderly-async", i);
    add_pending();
    if (SendMessageOrderlyAsync(producer, msg, by_arg, &i, on_plain_success, on_plain_exception) != OK) {
      fprintf(stderr, "SendMessageOrderlyAsync: %s\n", GetLatestErrorMessage());
      return 1;
    }
    DestroyMessage(msg);
  }
  if (wait_async() != 0) {
    fprintf(stderr, "plain async sends failed\n");
    return 1;
  }

  for (i = 0; i < count; i++) {
    char key[32];
    snprintf(key, sizeof key, "shard-%d", i % 2);
    CMessage* msg = make(topic, "sharded", i);
    if (SendMessageOrderlyByShardingKey(producer, msg, key, &result) != OK) {
      fprintf(stderr, "sharding key send: %s\n", GetLatestErrorMessage());
      return 1;
    }
    printf("SENT %s\n", result.msgId);
    DestroyMessage(msg);
  }

  for (i = 0; i < count; i++) {
    CMessage* msg = make(topic, "orderly", i);
    if (SendMessageOrderly(producer, msg, by_arg, &i, 2, &result) != OK) {
      fprintf(stderr, "orderly send: %s\n", GetLatestErrorMessage());
      return 1;
    }
    printf("SENT %s\n", result.msgId);
    DestroyMessage(msg);
  }

  CBatchMessage* batch = CreateBatchMessage();
  for (i = 0; i < 3; i++) {
    CMessage* msg = make(topic, "batch", i);
    AddMessage(batch, msg);
    DestroyMessage(msg);
  }
  if (SendBatchMessage(producer, batch, &result) != OK) {
    fprintf(stderr, "batch send: %s\n", GetLatestErrorMessage());
    return 1;
  }
  printf("BATCH %s\n", result.msgId);
  DestroyBatchMessage(batch);

  CMessage* oneway = make(topic, "oneway", 0);
  if (SendMessageOneway(producer, oneway) != OK) {
    fprintf(stderr, "oneway send: %s\n", GetLatestErrorMessage());
    return 1;
  }
  DestroyMessage(oneway);
  oneway = make(topic, "oneway-orderly", 0);
  i = 1;
  if (SendMessageOnewayOrderly(producer, oneway, by_arg, &i) != OK) {
    fprintf(stderr, "oneway orderly send: %s\n", GetLatestErrorMessage());
    return 1;
  }
  DestroyMessage(oneway);

  ShutdownProducer(producer);
  DestroyProducer(producer);
  fflush(stdout);
  return 0;
}
