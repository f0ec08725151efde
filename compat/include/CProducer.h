/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CProducer.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_PRODUCER_H
#define ROCKETMQ_COMPAT_C_PRODUCER_H
#include "CBatchMessage.h"
#include "CMQException.h"
#include "CMessage.h"
#include "CMessageExt.h"
#include "CSendResult.h"
#include "CTransactionStatus.h"
#ifdef __cplusplus
extern "C" {
#endif

/* A producer. Thread-safe: any thread may send on it at once. Settings apply at
 * StartProducer (a change on a running producer applies from its next start).
 * ShutdownProducer completes pending async sends (their exception callback runs), then
 * waits for running callbacks: none runs after it, or DestroyProducer, returns. Destroy
 * shuts a running producer down; a destroyed handle is NULL_POINTER afterwards.
 * Callbacks run on the library's threads; calling ShutdownProducer/DestroyProducer from
 * inside one does not wait for itself. */
typedef struct CProducer CProducer;

/* Returns an index in 0..size-1 (anything else fails the send). msg is the caller's. */
typedef int (*QueueSelectorCallback)(int size, CMessage* msg, void* arg);
typedef void (*CSendSuccessCallback)(CSendResult result);
typedef void (*CSendExceptionCallback)(CMQException e);
typedef void (*COnSendSuccessCallback)(CSendResult result, CMessage* msg, void* userData);
typedef void (*COnSendExceptionCallback)(CMQException e, CMessage* msg, void* userData);
typedef CTransactionStatus (*CLocalTransactionCheckerCallback)(CProducer* producer, CMessageExt* msg, void* data);
typedef CTransactionStatus (*CLocalTransactionExecutorCallback)(CProducer* producer, CMessage* msg, void* data);

ROCKETMQCLIENT_API CProducer* CreateProducer(const char* groupId);
/* The same as CreateProducer: order comes from the queue a send picks. */
ROCKETMQCLIENT_API CProducer* CreateOrderlyProducer(const char* groupId);
/* callback answers the broker's transaction checks (on a check thread); NULL -> NULL. */
ROCKETMQCLIENT_API CProducer* CreateTransactionProducer(const char* groupId,
                                                        CLocalTransactionCheckerCallback callback,
                                                        void* userData);
ROCKETMQCLIENT_API int DestroyProducer(CProducer* producer);
/* PRODUCER_START_FAILED when already started or the configuration is refused. */
ROCKETMQCLIENT_API int StartProducer(CProducer* producer);
/* OK when not running. */
ROCKETMQCLIENT_API int ShutdownProducer(CProducer* producer);
/* A static string; "DefaultVersion" for a bad handle. */
ROCKETMQCLIENT_API const char* ShowProducerVersion(CProducer* producer);
ROCKETMQCLIENT_API int SetProducerNameServerAddress(CProducer* producer, const char* namesrv);
/* The HTTP address server http://<domain>:8080/rocketmq/nsaddr (or the URL given), asked
 * when no name-server address is set. */
ROCKETMQCLIENT_API int SetProducerNameServerDomain(CProducer* producer, const char* domain);
ROCKETMQCLIENT_API int SetProducerGroupName(CProducer* producer, const char* groupName);
ROCKETMQCLIENT_API int SetProducerInstanceName(CProducer* producer, const char* instanceName);
/* ACL credentials; onsChannel is checked and otherwise unused. */
ROCKETMQCLIENT_API int SetProducerSessionCredentials(CProducer* producer,
                                                     const char* accessKey,
                                                     const char* secretKey,
                                                     const char* onsChannel);
/* Accepted, ignored: no log files are written. */
ROCKETMQCLIENT_API int SetProducerLogPath(CProducer* producer, const char* logPath);
/* Checked (not negative), ignored. */
ROCKETMQCLIENT_API int SetProducerLogFileNumAndSize(CProducer* producer, int fileNum, long fileSize);
/* Process-wide: the maximum level of the Rust log facade; the first call prints the
 * library's log to standard error. */
ROCKETMQCLIENT_API int SetProducerLogLevel(CProducer* producer, CLogLevel level);
/* Milliseconds, positive. */
ROCKETMQCLIENT_API int SetProducerSendMsgTimeout(CProducer* producer, int timeout);
/* -1 (zlib default) or 0..9. */
ROCKETMQCLIENT_API int SetProducerCompressLevel(CProducer* producer, int level);
ROCKETMQCLIENT_API int SetProducerMaxMessageSize(CProducer* producer, int size);
ROCKETMQCLIENT_API int SetProducerMessageTrace(CProducer* producer, CTraceModel openTrace);
ROCKETMQCLIENT_API int SendMessageSync(CProducer* producer, CMessage* msg, CSendResult* result);
ROCKETMQCLIENT_API int SendBatchMessage(CProducer* producer, CBatchMessage* msg, CSendResult* result);
/* On OK exactly one callback runs later, on a library thread; on an error none does. */
ROCKETMQCLIENT_API int SendMessageAsync(CProducer* producer,
                                        CMessage* msg,
                                        CSendSuccessCallback cSendSuccessCallback,
                                        CSendExceptionCallback cSendExceptionCallback);
/* As SendMessageAsync; the callbacks get msg back (keep it alive until then). */
ROCKETMQCLIENT_API int SendAsync(CProducer* producer,
                                 CMessage* msg,
                                 COnSendSuccessCallback cSendSuccessCallback,
                                 COnSendExceptionCallback cSendExceptionCallback,
                                 void* userData);
ROCKETMQCLIENT_API int SendMessageOneway(CProducer* producer, CMessage* msg);
ROCKETMQCLIENT_API int SendMessageOnewayOrderly(CProducer* producer,
                                                CMessage* msg,
                                                QueueSelectorCallback selector,
                                                void* arg);
/* Up to autoRetryTimes (at most 16) more attempts, the selector asked each time. */
ROCKETMQCLIENT_API int SendMessageOrderly(CProducer* producer,
                                          CMessage* msg,
                                          QueueSelectorCallback callback,
                                          void* arg,
                                          int autoRetryTimes,
                                          CSendResult* result);
ROCKETMQCLIENT_API int SendMessageOrderlyAsync(CProducer* producer,
                                               CMessage* msg,
                                               QueueSelectorCallback callback,
                                               void* arg,
                                               CSendSuccessCallback cSendSuccessCallback,
                                               CSendExceptionCallback cSendExceptionCallback);
/* Queue = Java String.hashCode(shardingKey) modulo the queue count (Java's
 * SelectMessageQueueByHash), so Java producers put a key on the same queue. */
ROCKETMQCLIENT_API int SendMessageOrderlyByShardingKey(CProducer* producer,
                                                       CMessage* msg,
                                                       const char* shardingKey,
                                                       CSendResult* result);
/* Only on a transaction producer: callback runs the local transaction on this thread. */
ROCKETMQCLIENT_API int SendMessageTransaction(CProducer* producer,
                                              CMessage* msg,
                                              CLocalTransactionExecutorCallback callback,
                                              void* userData,
                                              CSendResult* result);

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_PRODUCER_H */
