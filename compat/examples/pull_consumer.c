/*
 * A pull consumer written against the rocketmq-client-cpp 2.x C API only: every queue of
 * the topic is read from its first offset to its end.
 *
 *   pull_consumer <namesrv> <topic> <group>
 *
 * Prints "GOT <msgId> <queueId> <queueOffset> <body>" per message and exits 0 once every
 * queue was read to its max offset.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "CCommon.h"
#include "CErrorMessage.h"
#include "CMessageExt.h"
#include "CMessageQueue.h"
#include "CPullConsumer.h"
#include "CPullResult.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <namesrv> <topic> <group>\n", argv[0]);
    return 2;
  }
  CPullConsumer* consumer = CreatePullConsumer(argv[3]);
  SetPullConsumerNameServerAddress(consumer, argv[1]);
  SetPullConsumerLogLevel(consumer, E_LOG_LEVEL_WARN);
  if (StartPullConsumer(consumer) != OK) {
    fprintf(stderr, "start: %s\n", GetLatestErrorMessage());
    return 1;
  }
  CMessageQueue* mqs = NULL;
  int size = 0;
  if (FetchSubscriptionMessageQueues(consumer, argv[2], &mqs, &size) != OK || size == 0) {
    fprintf(stderr, "queues: %s\n", GetLatestErrorMessage());
    return 1;
  }
  for (int i = 0; i < size; i++) {
    long long offset = 0;
    int idle = 0;
    for (;;) {
      CPullResult r = Pull(consumer, &mqs[i], "*", offset, 8);
      if (r.pullStatus == E_FOUND) {
        for (int k = 0; k < r.size; k++) {
          CMessageExt* m = r.msgFoundList[k];
          printf("GOT %s %d %lld %s\n", GetMessageId(m), GetMessageQueueId(m), GetMessageQueueOffset(m),
                 GetMessageBody(m));
        }
        idle = 0;
      } else if (r.pullStatus == E_NO_NEW_MSG || r.pullStatus == E_NO_MATCHED_MSG) {
        if (r.nextBeginOffset >= r.maxOffset) {
          ReleasePullResult(r);
          break;
        }
        if (++idle > 20) {
          fprintf(stderr, "queue %d: nothing at %lld of %lld\n", mqs[i].queueId, offset, r.maxOffset);
          return 1;
        }
      } else {
        fprintf(stderr, "pull: status %d: %s\n", (int)r.pullStatus, GetLatestErrorMessage());
        return 1;
      }
      offset = r.nextBeginOffset;
      if (ReleasePullResult(r) != OK) {
        fprintf(stderr, "release: %s\n", GetLatestErrorMessage());
        return 1;
      }
      if (r.pData != NULL && ReleasePullResult(r) != NULL_POINTER) {
        fprintf(stderr, "a second release of a result was accepted\n");
        return 1;
      }
    }
    /* Past the end: the nearest valid offset. */
    CPullResult past = Pull(consumer, &mqs[i], "*", offset + 100, 8);
    if (past.pullStatus != E_OFFSET_ILLEGAL || past.nextBeginOffset != past.maxOffset) {
      fprintf(stderr, "offset past the end: status %d next %lld\n", (int)past.pullStatus,
              past.nextBeginOffset);
      return 1;
    }
    ReleasePullResult(past);
  }
  printf("QUEUES %d\n", size);
  ReleaseSubscriptionMessageQueue(mqs);
  if (ReleaseSubscriptionMessageQueue(mqs) != NULL_POINTER) {
    fprintf(stderr, "a second release of the queues was accepted\n");
    return 1;
  }
  ShutdownPullConsumer(consumer);
  DestroyPullConsumer(consumer);
  return 0;
}
