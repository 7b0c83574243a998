/* The C ABI as a C program uses it: compiled against the installed wring.h and linked with
 * libwring.so or libwring.a by scripts/capi.sh. Exits non-zero, naming the check, on the first
 * failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wring.h>

static int failures;

#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__);              \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, " (last error: %s)\n", wring_last_error());         \
      failures++;                                                         \
    }                                                                     \
  } while (0)

static unsigned char *text(size_t n) {
  static const char words[] = "wring squeezes extents the way btrfs and zram do; ";
  unsigned char *p = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(words[i % (sizeof words - 1)] ^ (i / 7919));
  return p;
}

static void one_shot_round_trips(void) {
  const char *specs[] = {"zstd:3", "zstd:-5", "zstd:19", "zlib:9", "lzo", "lz4", "lz4hc:9", "lzo-rle", "deflate:6", "no"};
  size_t sizes[] = {0, 1, 4096, 131072, 1000000};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
      size_t n = sizes[z], bound = 0, packed_len = 0, back_len = 0;
      unsigned char *data = text(n);
      CHECK(wring_compress_bound(specs[s], n, &bound) == WRING_OK, "bound %s", specs[s]);
      unsigned char *packed = malloc(bound + 1), *back = malloc(n + 1);
      CHECK(wring_compress(specs[s], NULL, data, n, packed, bound, &packed_len) == WRING_OK,
            "compress %s %zu", specs[s], n);
      CHECK(wring_decompress(specs[s], NULL, packed, packed_len, back, n, &back_len) == WRING_OK,
            "decompress %s %zu", specs[s], n);
      CHECK(back_len == n && memcmp(back, data, n) == 0, "round trip %s %zu", specs[s], n);
      free(data), free(packed), free(back);
    }
  }
}

static void errors_are_statuses_with_messages(void) {
  unsigned char out[64];
  size_t len = 0;
  CHECK(wring_compress("zstd:99", NULL, (const unsigned char *)"x", 1, out, sizeof out, &len) == WRING_INVALID, "bad level");
  CHECK(strstr(wring_last_error(), "accepted are") != NULL, "bad level message: %s", wring_last_error());
  CHECK(wring_compress("brotli", NULL, (const unsigned char *)"x", 1, out, sizeof out, &len) == WRING_INVALID, "unknown algorithm");
  CHECK(strstr(wring_last_error(), "brotli") != NULL, "unknown algorithm message");
  unsigned char garbage[100];
  memset(garbage, 0xa5, sizeof garbage);
  CHECK(wring_decompress("zstd", NULL, garbage, sizeof garbage, out, sizeof out, &len) == WRING_CORRUPT, "corrupt zstd");
  CHECK(wring_decompress("zlib", NULL, garbage, sizeof garbage, out, sizeof out, &len) == WRING_CORRUPT, "corrupt zlib");
  unsigned char *data = text(100000), packed[200000];
  CHECK(wring_compress("zstd:1", NULL, data, 100000, packed, sizeof packed, &len) == WRING_OK, "compress");
  size_t got = 0;
  CHECK(wring_decompress("zstd", NULL, packed, len, out, sizeof out, &got) == WRING_SHORT_BUFFER, "short output");
  CHECK(wring_compress("zstd:1", NULL, data, 100000, out, sizeof out, &got) == WRING_SHORT_BUFFER, "short compress");
  CHECK(wring_compress(NULL, NULL, data, 1, out, sizeof out, &got) == WRING_INVALID, "NULL spec");
  CHECK(wring_decompress("zstd", NULL, NULL, 5, out, sizeof out, &got) == WRING_INVALID, "NULL src");
  free(data);
}

static void dictionaries(void) {
  enum { N = 300 };
  const unsigned char *samples[N];
  size_t lens[N];
  for (int i = 0; i < N; i++) lens[i] = 200 + i, samples[i] = text(lens[i]);
  wring_dict *dict = NULL;
  CHECK(wring_train_dict(samples, lens, N, 16384, &dict) == WRING_OK, "train");
  const unsigned char *bytes = NULL;
  size_t dict_len = 0;
  CHECK(wring_dict_bytes(dict, &bytes, &dict_len) == WRING_OK && dict_len > 0 && dict_len <= 16384, "dict bytes");
  wring_dict *again = NULL;
  CHECK(wring_dict_new(bytes, dict_len, &again) == WRING_OK, "dict from bytes");
  unsigned char packed[4096], back[4096];
  size_t plain = 0, with = 0, back_len = 0;
  CHECK(wring_compress("zstd:3", NULL, samples[7], lens[7], packed, sizeof packed, &plain) == WRING_OK, "plain");
  CHECK(wring_compress("zstd:3", dict, samples[7], lens[7], packed, sizeof packed, &with) == WRING_OK, "with dict");
  CHECK(with < plain, "dictionary saves (%zu vs %zu)", with, plain);
  CHECK(wring_decompress("zstd", again, packed, with, back, sizeof back, &back_len) == WRING_OK &&
        back_len == lens[7] && memcmp(back, samples[7], back_len) == 0, "dict round trip");
  CHECK(wring_compress("lz4", dict, samples[7], lens[7], packed, sizeof packed, &with) == WRING_INVALID, "lz4 takes no dict");
  wring_dict_free(dict), wring_dict_free(again);
  for (int i = 0; i < N; i++) free((void *)samples[i]);
}

static void btrfs_extents(void) {
  const char *specs[] = {"zlib:3", "lzo", "zstd:1", "zstd:19"};
  unsigned expect[] = {1, 3, 2, 2};
  unsigned char *data = text(131072), packed[131072], back[131072];
  for (int s = 0; s < 4; s++) {
    size_t len = 0;
    uint32_t compression = 0;
    CHECK(wring_btrfs_encode_extent(specs[s], data, 131072, packed, sizeof packed, &len, &compression) == WRING_OK, "encode %s", specs[s]);
    CHECK(compression == expect[s], "encoding of %s: %u", specs[s], compression);
    CHECK(wring_btrfs_decode_extent(compression, packed, len, back, sizeof back) == WRING_OK &&
          memcmp(back, data, sizeof back) == 0, "decode %s", specs[s]);
  }
  size_t len = 0;
  uint32_t compression = 0;
  CHECK(wring_btrfs_encode_extent("lz4", data, 4096, packed, sizeof packed, &len, &compression) == WRING_INVALID, "btrfs has no lz4");
  CHECK(wring_btrfs_encode_extent("zstd:3", data, 4096, packed, sizeof packed, &len, &compression) == WRING_INCOMPRESSIBLE, "one block saves nothing");
  free(data);
}

static void engine_batches(void) {
  enum { N = 64, LEN = 131072 };
  wring_engine *engine = NULL;
  CHECK(wring_engine_new(2, 0, &engine) == WRING_OK, "engine");
  unsigned char *data = text(N * LEN), *packed = malloc(N * (LEN + LEN / 8 + 1024)), *back = malloc(N * LEN);
  wring_job jobs[N];
  for (int i = 0; i < N; i++) {
    jobs[i] = (wring_job){.src = data + i * LEN, .src_len = LEN, .dst = packed + i * (LEN + LEN / 8 + 1024), .dst_cap = LEN + LEN / 8 + 1024};
  }
  CHECK(wring_engine_compress_many(engine, "zstd:3", NULL, jobs, N) == WRING_OK, "compress_many");
  wring_job undo[N];
  for (int i = 0; i < N; i++) {
    CHECK(jobs[i].status == WRING_OK && jobs[i].dst_len > 0, "job %d", i);
    undo[i] = (wring_job){.src = jobs[i].dst, .src_len = jobs[i].dst_len, .dst = back + i * LEN, .dst_cap = LEN};
  }
  undo[5].src_len = 10; /* a damaged item fails alone */
  CHECK(wring_engine_decompress_many(engine, "zstd", NULL, undo, N) == WRING_CORRUPT, "decompress_many reports the damaged item");
  for (int i = 0; i < N; i++) {
    if (i == 5) {
      CHECK(undo[i].status == WRING_CORRUPT, "item 5 is corrupt");
      continue;
    }
    CHECK(undo[i].status == WRING_OK && undo[i].dst_len == LEN && memcmp(back + i * LEN, data + i * LEN, LEN) == 0, "item %d", i);
  }
  wring_engine_free(engine);
  free(data), free(packed), free(back);
}

int main(void) {
  printf("wring %s\n", wring_version());
  one_shot_round_trips();
  errors_are_statuses_with_messages();
  dictionaries();
  btrfs_extents();
  engine_batches();
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("all C ABI checks passed\n");
  return 0;
}
