/* Helpers shared by the examples: fail loudly with the library's error text. */
#ifndef RMQ_EXAMPLE_COMMON_H
#define RMQ_EXAMPLE_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rocketmq_blocking.h"

static void die(const char *what, rmq_result r) {
  char text[512];
  size_t n = 0;
  rmq_last_error(text, sizeof text, &n);
  fprintf(stderr, "%s failed: %s: %s\n", what, rmq_result_name(r), text);
  exit(1);
}

/* Runs a call that returns rmq_result and exits on failure. */
#define CHECK(call)                 \
  do {                              \
    rmq_result r_ = (call);         \
    if (r_ != RMQ_OK) die(#call, r_); \
  } while (0)

/* A NUL-terminated C string as pointer + length. */
#define STR(s) (s), strlen(s)

static const char *namesrv_from_env(void) {
  const char *addr = getenv("NAMESRV_ADDR");
  if (addr == NULL || *addr == '\0') {
    fprintf(stderr, "set NAMESRV_ADDR (host:port of the name server)\n");
    exit(2);
  }
  return addr;
}

/* Client options on the name servers `namesrv`, for every client an example builds
   (each builder and rmq_admin_new copy them). Free with rmq_client_options_free. */
static rmq_client_options *client_options(const char *namesrv) {
  rmq_client_options *o;
  CHECK(rmq_client_options_new(&o));
  CHECK(rmq_client_options_namesrv_addr(o, STR(namesrv)));
  /* RMQ_EXAMPLE_SERIALIZE=rocketmq: the compact binary request headers. */
  const char *ser = getenv("RMQ_EXAMPLE_SERIALIZE");
  if (ser && strcmp(ser, "rocketmq") == 0)
    CHECK(rmq_client_options_serialize_type(o, RMQ_SERIALIZE_ROCKETMQ));
  return o;
}

/* Prints "stats <json>" on one line: `stats_json` is rmq_producer_stats_json or a
   consumer's, called first with a small buffer to learn the size. */
#define PRINT_STATS(stats_json, client)                                        \
  do {                                                                         \
    char small_[4];                                                            \
    size_t need_ = 0, got_ = 0;                                                \
    rmq_result r0_ = stats_json((client), small_, sizeof small_, &need_);      \
    if (r0_ != RMQ_BUFFER_TOO_SMALL) die(#stats_json " (small buffer)", r0_);  \
    char *buf_ = malloc(need_ + 1);                                            \
    CHECK(stats_json((client), buf_, need_ + 1, &got_));                       \
    printf("stats %.*s\n", (int)got_, buf_);                                  \
    free(buf_);                                                                \
  } while (0)

#endif
