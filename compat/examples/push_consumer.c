/*
 * A push consumer written against the rocketmq-client-cpp 2.x C API only.
 *
 *   push_consumer <namesrv> <topic> <group> <expected> <seconds> [orderly] [broadcasting]
 *
 * Prints "GOT <msgId> <queueId> <tags> <body>" per delivery; exits 0 once <expected>
 * deliveries were seen, 1 after <seconds> without them. Messages tagged "Probe" are printed
 * as "PROBE <queueId>" and not counted (a test sends them until a broadcasting consumer,
 * which starts at each queue's end, holds every queue).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "CCommon.h"
#include "CErrorMessage.h"
#include "CMessageExt.h"
#include "CPushConsumer.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int seen = 0;

static int on_message(CPushConsumer* consumer, CMessageExt* msg) {
  (void)consumer;
  if (strcmp(GetMessageTags(msg), "Probe") == 0) {
    pthread_mutex_lock(&lock);
    printf("PROBE %d\n", GetMessageQueueId(msg));
    fflush(stdout);
    pthread_mutex_unlock(&lock);
    return E_CONSUME_SUCCESS;
  }
  pthread_mutex_lock(&lock);
  printf("GOT %s %d %s %s\n", GetMessageId(msg), GetMessageQueueId(msg), GetMessageTags(msg),
         GetMessageBody(msg));
  fflush(stdout);
  seen++;
  pthread_mutex_unlock(&lock);
  return E_CONSUME_SUCCESS;
}

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr,
            "usage: %s <namesrv> <topic> <group> <expected> <seconds> [orderly] [broadcasting]\n",
            argv[0]);
    return 2;
  }
  int expected = atoi(argv[4]);
  int seconds = atoi(argv[5]);
  int orderly = 0, broadcasting = 0;
  for (int i = 6; i < argc; i++) {
    orderly |= strcmp(argv[i], "orderly") == 0;
    broadcasting |= strcmp(argv[i], "broadcasting") == 0;
  }

  CPushConsumer* consumer = CreatePushConsumer(argv[3]);
  SetPushConsumerNameServerAddress(consumer, argv[1]);
  SetPushConsumerThreadCount(consumer, 2);
  SetPushConsumerMessageBatchMaxSize(consumer, 4);
  SetPushConsumerMessageModel(consumer, broadcasting ? BROADCASTING : CLUSTERING);
  SetPushConsumerLogLevel(consumer, E_LOG_LEVEL_WARN);
  Subscribe(consumer, argv[2], "*");
  if (orderly) {
    RegisterMessageCallbackOrderly(consumer, on_message);
  } else {
    RegisterMessageCallback(consumer, on_message);
  }
  if (StartPushConsumer(consumer) != OK) {
    fprintf(stderr, "start: %s\n", GetLatestErrorMessage());
    return 1;
  }
  printf("GROUP %s\n", GetPushConsumerGroupID(consumer));
  int reached = 0;
  for (int waited = 0; waited < seconds * 10 && !reached; waited++) {
    struct timespec tick = {0, 100 * 1000 * 1000};
    nanosleep(&tick, NULL);
    pthread_mutex_lock(&lock);
    reached = seen >= expected;
    pthread_mutex_unlock(&lock);
  }
  ShutdownPushConsumer(consumer);
  DestroyPushConsumer(consumer);
  fflush(stdout);
  return reached ? 0 : 1;
}
