/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CBatchMessage.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_BATCH_MESSAGE_H
#define ROCKETMQ_COMPAT_C_BATCH_MESSAGE_H
#include "CCommon.h"
#include "CMessage.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct CBatchMessage CBatchMessage;

ROCKETMQCLIENT_API CBatchMessage* CreateBatchMessage(void);
/* Adds a copy of msg: the caller still destroys msg. */
ROCKETMQCLIENT_API int AddMessage(CBatchMessage* batchMsg, CMessage* msg);
ROCKETMQCLIENT_API int DestroyBatchMessage(CBatchMessage* batchMsg);

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_BATCH_MESSAGE_H */
