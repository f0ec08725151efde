/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CMessage.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_MESSAGE_H
#define ROCKETMQ_COMPAT_C_MESSAGE_H
#include "CCommon.h"
#ifdef __cplusplus
extern "C" {
#endif

/* A message to send. Any thread may use it, and calls on one message may run at once
 * (they are serialised inside). Strings returned by the getters are copies the
 * message owns: valid until it is destroyed or the same field is read again after it
 * changed. A missing field reads as ""; a bad handle as NULL (-1/0 for numbers). The
 * getters of CMessageExt.h work on a CMessage too, and these on a CMessageExt. */
typedef struct CMessage CMessage;

/* NULL for a NULL or non-UTF-8 topic. */
ROCKETMQCLIENT_API CMessage* CreateMessage(const char* topic);
/* NULL_POINTER for a destroyed message and for one the library lent to a callback. */
ROCKETMQCLIENT_API int DestroyMessage(CMessage* msg);
ROCKETMQCLIENT_API int SetMessageTopic(CMessage* msg, const char* topic);
ROCKETMQCLIENT_API int SetMessageTags(CMessage* msg, const char* tags);
/* Keys separated by spaces. */
ROCKETMQCLIENT_API int SetMessageKeys(CMessage* msg, const char* keys);
/* The bytes up to the NUL. */
ROCKETMQCLIENT_API int SetMessageBody(CMessage* msg, const char* body);
/* len bytes, any values; a negative len is NULL_POINTER. */
ROCKETMQCLIENT_API int SetByteMessageBody(CMessage* msg, const char* body, int len);
/* TAGS, KEYS and DELAY set those fields; other reserved names (UNIQ_KEY, TRAN_MSG, ...)
 * and blank names or values are NULL_POINTER (Java putUserProperty rules). */
ROCKETMQCLIENT_API int SetMessageProperty(CMessage* msg, const char* key, const char* value);
/* 0 = no delay; negative is NULL_POINTER. */
ROCKETMQCLIENT_API int SetDelayTimeLevel(CMessage* msg, int level);
ROCKETMQCLIENT_API const char* GetOriginMessageTopic(CMessage* msg);
ROCKETMQCLIENT_API const char* GetOriginMessageTags(CMessage* msg);
ROCKETMQCLIENT_API const char* GetOriginMessageKeys(CMessage* msg);
/* Up to the first NUL of the body, as C reads it. */
ROCKETMQCLIENT_API const char* GetOriginMessageBody(CMessage* msg);
ROCKETMQCLIENT_API const char* GetOriginMessageProperty(CMessage* msg, const char* key);
ROCKETMQCLIENT_API int GetOriginDelayTimeLevel(CMessage* msg);

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_MESSAGE_H */
