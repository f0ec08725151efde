/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CPushConsumer.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_PUSH_CONSUMER_H
#define ROCKETMQ_COMPAT_C_PUSH_CONSUMER_H
#include "CCommon.h"
#include "CMessageExt.h"
#ifdef __cplusplus
extern "C" {
#endif

/* A push consumer. Thread-safe. The callback runs once per message on the consume
 * threads (the orderly one: one call per queue at a time, in order); a batch is
 * acknowledged when every message of it returned E_CONSUME_SUCCESS, else retried.
 * Shutdown/Destroy wait for callbacks that run (not for the caller's own) and no callback
 * runs after they return; messages not handed over come again later. Settings apply at
 * StartPushConsumer, except Subscribe, which a running consumer takes at once. */
typedef struct CPushConsumer CPushConsumer;

typedef enum E_CConsumeStatus { E_CONSUME_SUCCESS = 0, E_RECONSUME_LATER = 1 } CConsumeStatus;

typedef int (*MessageCallBack)(CPushConsumer*, CMessageExt*);

/* Clustering; a new group starts at the last offset. */
ROCKETMQCLIENT_API CPushConsumer* CreatePushConsumer(const char* groupId);
ROCKETMQCLIENT_API int DestroyPushConsumer(CPushConsumer* consumer);
/* PUSHCONSUMER_START_FAILED without a registered callback or when already started. */
ROCKETMQCLIENT_API int StartPushConsumer(CPushConsumer* consumer);
ROCKETMQCLIENT_API int ShutdownPushConsumer(CPushConsumer* consumer);
ROCKETMQCLIENT_API const char* ShowPushConsumerVersion(CPushConsumer* consumer);
ROCKETMQCLIENT_API int SetPushConsumerGroupID(CPushConsumer* consumer, const char* groupId);
/* Valid until the group is set again or the consumer destroyed. */
ROCKETMQCLIENT_API const char* GetPushConsumerGroupID(CPushConsumer* consumer);
ROCKETMQCLIENT_API int SetPushConsumerNameServerAddress(CPushConsumer* consumer, const char* namesrv);
ROCKETMQCLIENT_API int SetPushConsumerNameServerDomain(CPushConsumer* consumer, const char* domain);
/* A tag expression ("*", "TagA || TagB"). */
ROCKETMQCLIENT_API int Subscribe(CPushConsumer* consumer, const char* topic, const char* expression);
ROCKETMQCLIENT_API int RegisterMessageCallbackOrderly(CPushConsumer* consumer, MessageCallBack pCallback);
ROCKETMQCLIENT_API int RegisterMessageCallback(CPushConsumer* consumer, MessageCallBack pCallback);
/* Later messages are retried, not lost. */
ROCKETMQCLIENT_API int UnregisterMessageCallbackOrderly(CPushConsumer* consumer);
ROCKETMQCLIENT_API int UnregisterMessageCallback(CPushConsumer* consumer);
/* 1..1000. */
ROCKETMQCLIENT_API int SetPushConsumerThreadCount(CPushConsumer* consumer, int threadCount);
ROCKETMQCLIENT_API int SetPushConsumerMessageBatchMaxSize(CPushConsumer* consumer, int batchSize);
ROCKETMQCLIENT_API int SetPushConsumerInstanceName(CPushConsumer* consumer, const char* instanceName);
ROCKETMQCLIENT_API int SetPushConsumerSessionCredentials(CPushConsumer* consumer,
                                                         const char* accessKey,
                                                         const char* secretKey,
                                                         const char* channel);
ROCKETMQCLIENT_API int SetPushConsumerLogPath(CPushConsumer* consumer, const char* logPath);
ROCKETMQCLIENT_API int SetPushConsumerLogFileNumAndSize(CPushConsumer* consumer, int fileNum, long fileSize);
ROCKETMQCLIENT_API int SetPushConsumerLogLevel(CPushConsumer* consumer, CLogLevel level);
ROCKETMQCLIENT_API int SetPushConsumerMessageModel(CPushConsumer* consumer, CMessageModel messageModel);
/* Cached messages per queue before pulls pause. */
ROCKETMQCLIENT_API int SetPushConsumerMaxCacheMessageSize(CPushConsumer* consumer, int maxCacheSize);
/* Cached MiB per queue (the original returned Not_Support; honoured here). */
ROCKETMQCLIENT_API int SetPushConsumerMaxCacheMessageSizeInMb(CPushConsumer* consumer, int maxCacheSizeInMb);
ROCKETMQCLIENT_API int SetPushConsumerMessageTrace(CPushConsumer* consumer, CTraceModel openTrace);

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_PUSH_CONSUMER_H */
