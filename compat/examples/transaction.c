/*
 * A transaction producer written against the rocketmq-client-cpp 2.x C API only: local
 * transactions that commit, roll back, or stay unknown until the broker's check asks.
 *
 *   transaction <namesrv> <topic> <count>
 *
 * Prints "SENT <msgId> <COMMIT|ROLLBACK|UNKNOWN>" per message and "CHECK <msgId>" per check
 * answered (commit); exits 0 once every unknown transaction was checked.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "CCommon.h"
#include "CErrorMessage.h"
#include "CMessage.h"
#include "CMessageExt.h"
#include "CProducer.h"
#include "CSendResult.h"
#include "CTransactionStatus.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char unknown[64][MAX_MESSAGE_ID_LENGTH];
static int unknown_count = 0;
static int checked[64];

static CTransactionStatus execute(CProducer* producer, CMessage* msg, void* data) {
  (void)producer;
  /* The half message carries its id; read it with the CMessageExt getter, as bindings do. */
  const char* id = GetMessageId((CMessageExt*)msg);
  if (id == NULL || strlen(id) == 0) {
    return E_ROLLBACK_TRANSACTION;
  }
  return *(CTransactionStatus*)data;
}

static CTransactionStatus check(CProducer* producer, CMessageExt* msg, void* data) {
  (void)producer;
  (void)data;
  const char* id = GetMessageId(msg);
  pthread_mutex_lock(&lock);
  for (int i = 0; i < unknown_count; i++) {
    if (strcmp(unknown[i], id) == 0 && !checked[i]) {
      checked[i] = 1;
      printf("CHECK %s\n", id);
      fflush(stdout);
    }
  }
  pthread_mutex_unlock(&lock);
  return E_COMMIT_TRANSACTION;
}

static int all_checked(void) {
  pthread_mutex_lock(&lock);
  int all = 1;
  for (int i = 0; i < unknown_count; i++) {
    all = all && checked[i];
  }
  pthread_mutex_unlock(&lock);
  return all;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <namesrv> <topic> <count>\n", argv[0]);
    return 2;
  }
  int count = atoi(argv[3]);
  if (count > 64) {
    count = 64;
  }
  static const char* names[] = {"COMMIT", "ROLLBACK", "UNKNOWN"};
  /* A group of its own: the broker sends a check to any producer of the group. */
  char group[64];
  snprintf(group, sizeof group, "c_compat_tx_%d", (int)getpid());
  CProducer* producer = CreateTransactionProducer(group, check, NULL);
  SetProducerNameServerAddress(producer, argv[1]);
  if (StartProducer(producer) != OK) {
    fprintf(stderr, "start: %s\n", GetLatestErrorMessage());
    return 1;
  }
  for (int i = 0; i < count; i++) {
    char body[64];
    CTransactionStatus state = (CTransactionStatus)(i % 3);
    CSendResult result;
    CMessage* msg = CreateMessage(argv[2]);
    snprintf(body, sizeof body, "c-tx-%s-%d", names[state], i);
    SetMessageTags(msg, "TagTx");
    SetMessageBody(msg, body);
    pthread_mutex_lock(&lock);
    if (SendMessageTransaction(producer, msg, execute, &state, &result) != OK) {
      pthread_mutex_unlock(&lock);
      fprintf(stderr, "send: %s\n", GetLatestErrorMessage());
      return 1;
    }
    if (state == E_UNKNOWN_TRANSACTION) {
      strncpy(unknown[unknown_count], result.msgId, MAX_MESSAGE_ID_LENGTH - 1);
      unknown_count++;
    }
    pthread_mutex_unlock(&lock);
    printf("SENT %s %s\n", result.msgId, names[state]);
    fflush(stdout);
    DestroyMessage(msg);
  }
  int done = 0;
  for (int waited = 0; waited < 900 && !done; waited++) {
    struct timespec tick = {0, 100 * 1000 * 1000};
    nanosleep(&tick, NULL);
    done = all_checked();
  }
  ShutdownProducer(producer);
  DestroyProducer(producer);
  return done ? 0 : 1;
}
