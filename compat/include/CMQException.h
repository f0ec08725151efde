/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CMQException.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_MQ_EXCEPTION_H
#define ROCKETMQ_COMPAT_C_MQ_EXCEPTION_H
#include "CCommon.h"
#ifdef __cplusplus
extern "C" {
#endif

#define MAX_EXEPTION_MSG_LENGTH 512
#define MAX_EXEPTION_FILE_LENGTH 256
#define MAX_EXEPTION_TYPE_LENGTH 128

/* What an async send failed with: `error` the broker response code (-1 when the failure
 * was not a broker answer), `msg` the text, `type` the rocketmq-blocking error kind,
 * `file` "rocketmq-blocking", `line` 0. */
typedef struct _CMQException_ {
  int error;
  int line;
  char file[MAX_EXEPTION_FILE_LENGTH];
  char msg[MAX_EXEPTION_MSG_LENGTH];
  char type[MAX_EXEPTION_TYPE_LENGTH];
} CMQException;

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_MQ_EXCEPTION_H */
