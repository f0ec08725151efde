/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CSendResult.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_SEND_RESULT_H
#define ROCKETMQ_COMPAT_C_SEND_RESULT_H
#include "CCommon.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef enum E_CSendStatus_ {
  E_SEND_OK = 0,
  E_SEND_FLUSH_DISK_TIMEOUT = 1,
  E_SEND_FLUSH_SLAVE_TIMEOUT = 2,
  E_SEND_SLAVE_NOT_AVAILABLE = 3
} CSendStatus;

/* msgId: the client-side id (UNIQ_KEY; a batch: the ids joined by ","), truncated to
 * MAX_MESSAGE_ID_LENGTH - 1 bytes; offset: the queue offset. */
typedef struct _SendResult_ {
  CSendStatus sendStatus;
  char msgId[MAX_MESSAGE_ID_LENGTH];
  long long offset;
} CSendResult;

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_SEND_RESULT_H */
