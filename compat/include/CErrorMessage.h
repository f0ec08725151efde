/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CErrorMessage.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_ERROR_MESSAGE_H
#define ROCKETMQ_COMPAT_C_ERROR_MESSAGE_H
#include "CCommon.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The text of the last failed call on this thread ("" if none failed): valid until the
 * next failing call on the same thread. Per thread, where the original kept one global. */
ROCKETMQCLIENT_API const char* GetLatestErrorMessage(void);

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_ERROR_MESSAGE_H */
