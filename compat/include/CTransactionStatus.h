/*
 * librocketmq (rocketmq-blocking's drop-in for Apache rocketmq-client-cpp 2.2.0): CTransactionStatus.h.
 * The 2.x C API's names, signatures, layouts and status codes; what this library does
 * with each call is documented in compat/README.md and beside each function below.
 */
#ifndef ROCKETMQ_COMPAT_C_TRANSACTION_STATUS_H
#define ROCKETMQ_COMPAT_C_TRANSACTION_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum E_CTransactionStatus {
  E_COMMIT_TRANSACTION = 0,
  E_ROLLBACK_TRANSACTION = 1,
  E_UNKNOWN_TRANSACTION = 2
} CTransactionStatus;

#ifdef __cplusplus
}
#endif
#endif /* ROCKETMQ_COMPAT_C_TRANSACTION_STATUS_H */
