/*
 * Training-batch traces for data-centric parallel training (DCP): one entry
 * per training sequence, either 1D (a token count: SFT or pretraining text)
 * or 2D (a video of frames x height x width pixels, or an image with one
 * frame), turned into latent tokens the way Open-Sora 1.2 does.  The
 * planners in sim/dcp/dcp.h group sequences into length buckets (bt_bucketize)
 * and the simulator prices every sequence by its own shape.
 *
 * Ownership: a btrace owns its sequence and bucket arrays; free it with
 * btrace_free() (NULL is a no-op).  Readers load everything or nothing: the
 * first bad record gives -1 with "file:line: field 'x': problem" and no trace.
 */
#ifndef TS_BATCH_H
#define TS_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "traces/trace.h"

#define BT_MAX_TOKENS 16777216  /* longest sequence accepted, latent tokens */
#define BT_MAX_PIXELS 16384     /* largest height or width accepted, pixels */
#define BT_MAX_FRAMES 65536     /* most raw frames accepted per video */

typedef enum bt_kind { BT_1D = 0, BT_2D = 1 } bt_kind;

typedef struct bt_seq {
    int32_t t;       /* latent frames (2D), 1 for a 1D sequence */
    int32_t s;       /* latent tokens per frame (2D), or the sequence length (1D), tokens */
    int32_t frames;  /* raw frames (2D; 1 = an image), 0 for 1D */
    int32_t height;  /* pixels (2D), 0 for 1D */
    int32_t width;   /* pixels (2D), 0 for 1D */
    int32_t bucket;  /* index into the trace's buckets after bt_bucketize(), else -1 */
} bt_seq;

/* A bucket: sequences the planners treat as one shape.  2D: one exact
 * (frames, height, width).  1D: a length range [lo, hi], a quarter octave
 * wide, represented by its longest member. */
typedef struct bt_bucket {
    int32_t t, s;                  /* representative shape (the largest member) */
    int32_t frames, height, width; /* 2D shape, 0 for 1D */
    int32_t lo, hi;                /* member lengths, tokens (1D; 2D: lo = hi = t*s) */
    int32_t count;                 /* members */
} bt_bucket;

typedef struct btrace {
    bt_kind kind;
    bt_seq *seq;        /* n entries, in data order */
    size_t n, cap;
    bt_bucket *buckets; /* n_buckets entries sorted by tokens, after bt_bucketize() */
    int32_t n_buckets;
} btrace;

/* Latent tokens of a sequence: t * s. */
static inline int64_t bt_tokens(const bt_seq *q) { return (int64_t)q->t * q->s; }

/* Returns an empty trace of the given kind, or NULL on allocation failure. */
btrace *btrace_new(bt_kind kind);
void btrace_free(btrace *b);

/* Open-Sora 1.2 latent shape of a video (frames == 1: an image): the VAE
 * turns each 17 raw frames into 5 latent frames (a remainder of r frames into
 * ceil(r/4)), downsamples height and width 8x (rounding up), and STDiT3's
 * patch embedder cuts 2x2 patches (padding odd sizes).  So 51 frames at
 * 720x1280 give t = 15, s = 45 * 80 = 3600.  Cannot fail for positive input. */
void bt_latent(int32_t frames, int32_t height, int32_t width, int32_t *t, int32_t *s);

/* Appenders.  Return 0, or -1 with a message (allocation failure, a value
 * out of range, or the wrong kind for the trace). */
int btrace_add_1d(btrace *b, int32_t tokens, ts_err *e);
int btrace_add_video(btrace *b, int32_t frames, int32_t height, int32_t width, ts_err *e);

/* Total latent tokens. */
int64_t btrace_tokens(const btrace *b);

/* Reads a CSV batch trace.  The header names the kind: "tokens" (1D, one
 * sequence length per row) or "frames,height,width" (2D, one video or image
 * per row).  '#' comment lines and blank lines are skipped.  The file is read
 * once ("-" is stdin), with lines of at most TS_LINE_MAX bytes and no NUL
 * bytes (common/lines.h).  Returns 0 and sets *out, or -1 naming the file,
 * line and field of the first bad record. */
int btrace_load(const char *path, btrace **out, ts_err *e);

/* Writes the same CSV format atomically.  Returns 0 or -1. */
int btrace_write_csv(const btrace *b, const char *path, ts_err *e);

/* A 1D trace of the training sequences of an RL rollout trace: each
 * response with its prompt (prompt_tokens + response tokens), in trace
 * order.  Returns NULL with a message on allocation failure or an empty trace. */
btrace *btrace_from_rollout(const trace *t, ts_err *e);

/* DCP's synthetic video mix (VideoSys DummyVariableVideoTextDataset, "zipf",
 * exclusive image mixing): `videos` videos over 20 buckets of 5 resolutions
 * (144p 144x256, 240p 240x426, 360p 360x640, 480p 480x854, 720p 720x1280)
 * x 4 frame counts (51, 102, 204, 408), and image_mix * videos images over
 * the 5 resolutions.  Buckets are ranked by pixels x frames, smallest first;
 * rank r (1-based) gets weight 1 / (r + offset)^alpha and a count rounded
 * half-to-even, the rounding remainder going to rank 1.  The data order is a
 * Fisher-Yates shuffle from ts_rng_new(seed, 0).  The paper's mixes:
 * alpha 3, offset 5, videos 2000, image_mix 1, 2 or 5.
 *
 * The fields after seed default to tailsim's first reading when zero:
 * rank_height = 1 ranks the video buckets as VideoSys' code does, by frames
 * x height (COMMON_AR[name][0] is the height), ties in bucket_config order
 * (lower resolution first), instead of frames x pixels; inclusive = 1 is
 * VideoSys' "inclusive" mixing: image_mix is then a fraction in [0, 1] of
 * the `videos` samples that are images (floor), the rest videos; exclusive
 * (0) adds image_mix x videos images to the videos (rounded; VideoSys
 * truncates, the same for a whole image_mix).  res_scale and
 * frame_scale both > 0 replace the Zipf counts by VideoSys' half-normal
 * weighting over the 25 buckets (frame counts 1 = images, 51, ..., 408):
 * bucket (h, f) weighs pdf(h / 720 x res_scale) x pdf((f / 408)^(1/4) x
 * frame_scale) with pdf the standard half-normal, and gets
 * floor(videos x its share) samples (image_mix, inclusive, alpha and offset
 * unused). */
typedef struct bt_video_mix {
    int32_t videos;     /* videos (>= 1); the data size of the half-normal mode */
    double image_mix;   /* images per video (>= 0); inclusive: image fraction in [0, 1] */
    double alpha;       /* Zipf exponent (> 0) */
    double offset;      /* Zipf rank offset (>= 0) */
    uint64_t seed;      /* data-order shuffle */
    int inclusive;      /* 1: VideoSys' inclusive image mixing (default 0: exclusive) */
    int rank_height;    /* 1: Zipf ranks by frames x height, VideoSys' key (0: x pixels) */
    double res_scale;   /* half-normal mode when both > 0 (VideoSys res_scale) */
    double frame_scale; /* half-normal mode when both > 0 (VideoSys frame_scale) */
} bt_video_mix;

/* Latent positions of a sequence as VideoSys' training loop counts its
 * "tokens" (examples/training/open_sora/train.py: x.shape[0] x T x H x W of
 * the VAE latent): a video of f frames has f x 5 / 17 latent frames
 * (floor; an image 1) of (height / 8) x (width / 8) positions (floor), before
 * STDiT3's 2 x 2 patching, so about 4 x bt_tokens().  A 1D sequence: its
 * tokens.  Cannot fail. */
int64_t bt_videosys_positions(const bt_seq *q);

/* The sum of bt_videosys_positions() over the trace.  Cannot fail. */
int64_t btrace_videosys_positions(const btrace *b);

/* Returns the generated 2D trace, or NULL with a message on bad parameters
 * or allocation failure. */
btrace *bt_gen_video_mix(const bt_video_mix *p, ts_err *e);

/* A 1D length trace of n sequences capped at cap tokens.  dist is one of:
 *   "sft"       long-tail SFT mix: lognormal components (weight/median/sigma)
 *               0.60/600/0.9, 0.30/3000/0.7, 0.10/16000/0.6 tokens;
 *   "pretrain"  variable-length pretraining documents: lognormal median
 *               2000, sigma 1.3;
 *   anything traces/gen.h's gen_parse_dist() accepts ("lognormal:M:S",
 *   "mixture[:W/M/S,...]", "fixed:LEN"), drawn through gen_trace() with one
 *   response per prompt and no correlation.
 * Lengths are clipped to [1, cap].  Seeded: the same (dist, n, cap, seed)
 * gives the same trace.  Returns NULL with a message on a bad dist, bad
 * parameters or allocation failure. */
btrace *bt_gen_1d(const char *dist, int32_t n, int32_t cap, uint64_t seed, ts_err *e);

/* Groups the sequences into buckets (see bt_bucket) and sets every
 * sequence's bucket index; buckets are sorted by representative tokens,
 * ascending.  Idempotent.  Returns 0, or -1 on allocation failure or an
 * empty trace. */
int bt_bucketize(btrace *b, ts_err *e);

/* A short name for a bucket into buf, e.g. "720x1280x408f" or
 * "4097-4871tok".  Returns buf. */
const char *bt_bucket_name(const btrace *b, int32_t bucket, char *buf, size_t n);

#endif
