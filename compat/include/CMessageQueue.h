/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CMessageQueue.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_MESSAGE_QUEUE_H
#define ROCKETMQ_COMPAT_C_MESSAGE_QUEUE_H
#include "CCommon.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct _CMessageQueue_ {
  char topic[MAX_TOPIC_LENGTH];
  char brokerName[MAX_BROKER_NAME_ID_LENGTH];
  int queueId;
} CMessageQueue;

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_MESSAGE_QUEUE_H */
