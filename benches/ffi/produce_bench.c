/*
 * Sync sends from one C thread through the C ABI: WARMUP messages, then COUNT measured
 * ones; prints the measured TPS and the process's CPU time per message.
 *
 *   NAMESRV_ADDR=... ./produce_bench TOPIC COUNT WARMUP SIZE
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "rocketmq_blocking.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static void check(rmq_result r, const char *what) {
  if (r != RMQ_OK) {
    char text[512];
    size_t n;
    rmq_last_error(text, sizeof text, &n);
    fprintf(stderr, "%s: %s: %s\n", what, rmq_result_name(r), text);
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc < 5) return 2;
  const char *topic = argv[1];
  long count = atol(argv[2]), warmup = atol(argv[3]);
  size_t size = (size_t)atol(argv[4]);
  const char *namesrv = getenv("NAMESRV_ADDR");
  uint8_t *body = calloc(size, 1);
  memset(body, 'x', size);

  rmq_producer_builder *b;
  rmq_producer *p;
  check(rmq_producer_builder_new("ffi_bench_c", 11, &b), "builder");
  rmq_client_options *o;
  check(rmq_client_options_new(&o), "options");
  check(rmq_client_options_namesrv_addr(o, namesrv, strlen(namesrv)), "namesrv");
  check(rmq_producer_builder_client_options(b, o), "client options");
  rmq_client_options_free(o);
  check(rmq_producer_builder_start(b, &p), "start");
  double t0 = 0, c0 = 0;
  for (long i = 0; i < warmup + count; i++) {
    if (i == warmup) {
      t0 = now();
      c0 = cpu();
    }
    rmq_message *m;
    check(rmq_message_new(topic, strlen(topic), body, size, &m), "message");
    check(rmq_producer_send(p, m, NULL), "send");
    rmq_message_free(m);
  }
  double secs = now() - t0, cpus = cpu() - c0;
  printf("c tps=%.0f cpu_us_per_msg=%.1f\n", count / secs, cpus * 1e6 / count);
  rmq_producer_free(p);
  free(body);
  return 0;
}
