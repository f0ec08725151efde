/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CPullResult.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_PULL_RESULT_H
#define ROCKETMQ_COMPAT_C_PULL_RESULT_H
#include "CCommon.h"
#include "CMessageExt.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef enum E_CPullStatus {
  E_FOUND,
  E_NO_NEW_MSG,
  E_NO_MATCHED_MSG,
  E_OFFSET_ILLEGAL,
  E_BROKER_TIMEOUT
} CPullStatus;

typedef struct _CPullResult_ {
  CPullStatus pullStatus;
  long long nextBeginOffset;
  long long minOffset;
  long long maxOffset;
  CMessageExt** msgFoundList;
  int size;
  void* pData;
} CPullResult;

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_PULL_RESULT_H */
