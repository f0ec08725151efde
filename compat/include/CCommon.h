/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CCommon.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_COMMON_H
#define ROCKETMQ_COMPAT_C_COMMON_H

#ifdef __cplusplus
extern "C" {
#endif

#define MAX_MESSAGE_ID_LENGTH 256
#define MAX_TOPIC_LENGTH 512
#define MAX_BROKER_NAME_ID_LENGTH 256
#define MAX_SDK_VERSION_LENGTH 256
#define DEFAULT_SDK_VERSION "DefaultVersion"

/* Every function returning int returns one of these. NULL_POINTER also stands for any
 * argument this library cannot use: NULL, a destroyed handle, a handle of another type,
 * a string that is not UTF-8, a negative length or count. The reason of every failure is
 * GetLatestErrorMessage(). Not_Support: the call cannot be honoured (see its doc). */
typedef enum _CStatus_ {
  OK = 0,
  NULL_POINTER = 1,
  MALLOC_FAILED = 2,
  PRODUCER_ERROR_CODE_START = 10,
  PRODUCER_START_FAILED = 10,
  PRODUCER_SEND_SYNC_FAILED = 11,
  PRODUCER_SEND_ONEWAY_FAILED = 12,
  PRODUCER_SEND_ORDERLY_FAILED = 13,
  PRODUCER_SEND_ASYNC_FAILED = 14,
  PRODUCER_SEND_ORDERLYASYNC_FAILED = 15,
  PRODUCER_SEND_TRANSACTION_FAILED = 16,
  PUSHCONSUMER_ERROR_CODE_START = 20,
  PUSHCONSUMER_START_FAILED = 20,
  PULLCONSUMER_ERROR_CODE_START = 30,
  PULLCONSUMER_START_FAILED = 30,
  PULLCONSUMER_FETCH_MQ_FAILED = 31,
  PULLCONSUMER_FETCH_MESSAGE_FAILED = 32,
  Not_Support = 500,
  NOT_SUPPORT_NOW = -1
} CStatus;

/* Mapped onto the process-wide maximum level of the Rust `log` facade (FATAL and ERROR
 * are both "error"); the first level set prints the library's log to standard error.
 * This library writes no log files. */
typedef enum _CLogLevel_ {
  E_LOG_LEVEL_FATAL = 1,
  E_LOG_LEVEL_ERROR = 2,
  E_LOG_LEVEL_WARN = 3,
  E_LOG_LEVEL_INFO = 4,
  E_LOG_LEVEL_DEBUG = 5,
  E_LOG_LEVEL_TRACE = 6,
  E_LOG_LEVEL_LEVEL_NUM = 7
} CLogLevel;

#ifndef ROCKETMQCLIENT_API
#define ROCKETMQCLIENT_API
#endif

typedef enum _CMessageModel_ { BROADCASTING, CLUSTERING } CMessageModel;
typedef enum _CTraceModel_ { OPEN, CLOSE } CTraceModel;

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_COMMON_H */
