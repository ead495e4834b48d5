// CPU forward, FlashAttention-style: one work item = (sequence, q head, block of q rows).
// The q block is staged once (scaled) in fp32; for each key block the oracle's ranges (and a
// block-sparse mask's blocks) say Empty (skipped before loading K/V), Full (no masking) or
// Partial (masked). An additive bias is added to the scores after softcap, before masking (so
// masked pairs stay masked; a -inf bias entry masks too). Softmax is online:
// a running row max m and sum l, with the accumulator rescaled by exp(m_old - m_new).
//
// num_splits > 1 splits each sequence's keys (split-KV, as the GPU's decode path does) and merges
// the partial results with combine_split_row: the same result up to rounding.
//
// Measured with tests/cpu/fastattn_cpu_bench (b=2, s=1024, h=8, d=64, fp32, non-causal; AMD
// EPYC, AVX-512 clone, Release -O3): forward 39.7 GFLOPS on 2 threads (108 ms), 19.5 GFLOPS on
// 1 thread; backward 36.6 GFLOPS counted as 2.5x the forward flops. Drops to 13-18 when other
// jobs share the 2 cores.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/split_combine.h"
#include "util/max_keeping_nan.h"
#include "util/parallel_for.h"
#include "cpu/tile_class.h"
#include "cpu/tile_io.h"
#include "cpu/tile_kernels.h"
#include "cpu/tiling.h"

namespace fastattn::cpu {
namespace {

struct WorkItem {
  int32_t b, h, i0;
  int32_t split;  // which key split (0 when unsplit)
};

// Split-KV: split s of S owns the key blocks [s * nb / S, (s + 1) * nb / S) of its sequence (whole
// blocks, so no tile straddles two splits) and writes its normalised output and LSE in fp32 to
// `o` / `lse`, row (token, head) of split s at row_index(s, ...); combine_splits merges them.
struct Partials {
  int32_t splits = 1;
  int64_t rows = 0;  // tokens x heads_q of one split
  std::vector<float> o, lse;
};

int64_t partial_row(const detail::Problem& p, const Partials& part, int32_t split, int32_t b,
                    int64_t token, int32_t h) {
  const int64_t global_token = p.varlen ? token : int64_t(b) * p.max_rows_q + token;
  return split * part.rows + global_token * p.heads_q + h;
}

struct ForwardScratch {
  std::vector<float> q, kt, v, s, acc, m, l;
  ForwardScratch(const Tiling& t, int d, int dv)
      : q(size_t(t.block_q * d)), kt(size_t(d * t.block_k)), v(size_t(t.block_k * dv)),
        s(size_t(t.block_q * t.block_k)), acc(size_t(t.block_q * dv)), m(size_t(t.block_q)),
        l(size_t(t.block_q)) {}
};

// Work list, longest first (later q blocks see more keys under causal masks).
std::vector<WorkItem> make_work(const detail::Problem& p, const Tiling& t) {
  std::vector<WorkItem> work;
  for (int32_t b = 0; b < p.batch; ++b) {
    const int32_t rows = p.seqs[size_t(b)].rows_q;
    for (int32_t i0 = ((rows - 1) / t.block_q) * t.block_q; i0 >= 0; i0 -= t.block_q) {
      for (int32_t h = 0; h < p.heads_q; ++h) {
        for (int32_t split = 0; split < p.num_splits; ++split) work.push_back({b, h, i0, split});
      }
    }
  }
  return work;
}

void forward_block(const detail::Problem& p, const Tiling& t, const WorkItem& w, ForwardScratch& sc,
                   Partials& part) {
  const detail::Sequence& seq = p.seqs[size_t(w.b)];
  const reference::HeadMask mask = reference::head_mask(p, w.b, w.h);
  const int d = p.head_dim, dv = p.head_dim_v, bk = t.block_k;
  const int rows = std::min(t.block_q, seq.rows_q - w.i0);
  const int hk = w.h / p.group;

  std::fill(sc.acc.begin(), sc.acc.end(), 0.0f);
  std::fill(sc.m.begin(), sc.m.end(), -INFINITY);
  std::fill(sc.l.begin(), sc.l.end(), 0.0f);

  reference::KeyRange keys = block_key_range(mask.rule, w.i0, w.i0 + rows);
  if (p.num_splits > 1) {
    const int64_t blocks = (int64_t(seq.len_k) + bk - 1) / bk;
    keys.begin = std::max<int64_t>(keys.begin, w.split * blocks / p.num_splits * bk);
    keys.end = std::min<int64_t>(keys.end, (w.split + 1) * blocks / p.num_splits * bk);
  }
  if (!keys.empty()) {
    load_rows(p.q, w.b, seq.q_start + w.i0, w.h, rows, d, p.scale, sc.q.data(), d);
  }
  for (int64_t j0 = (keys.begin / bk) * bk; j0 < keys.end; j0 += bk) {
    const int cols = int(std::min<int64_t>(bk, seq.len_k - j0));
    const TileClass cls = classify_tile(mask, w.i0, w.i0 + rows, j0, j0 + cols);
    if (cls == TileClass::Empty) continue;
    load_rows_transposed(p.k, w.b, seq.k_start + j0, hk, cols, d, sc.kt.data(), bk);
    load_rows(p.v, w.b, seq.k_start + j0, hk, cols, dv, 1.0f, sc.v.data(), dv);

    float* s = sc.s.data();
    std::fill(sc.s.begin(), sc.s.end(), 0.0f);
    gemm_nn(rows, cols, d, sc.q.data(), d, sc.kt.data(), bk, s, bk);
    if (p.softcap > 0) apply_softcap(p.softcap, rows, cols, s, bk);
    if (p.bias.defined()) add_bias_tile(p.bias, w.b, w.h, w.i0, rows, j0, cols, s, bk);  // after softcap
    if (p.alibi.defined())
      add_alibi_tile(p.alibi.slope(w.b, w.h), w.i0, rows, j0, cols, int64_t(mask.rule.len_k) - mask.rule.len_q, s, bk);
    if (cls == TileClass::Partial) mask_partial_tile(mask, w.i0, rows, j0, cols, s, bk);

    for (int r = 0; r < rows; ++r) {
      float* srow = s + r * bk;
      float mx = sc.m[size_t(r)];
      for (int c = 0; c < cols; ++c) mx = util::max_keeping_nan(mx, srow[c]);
      if (mx == -INFINITY) {  // nothing kept in this row so far: P row is 0
        std::fill(srow, srow + cols, 0.0f);
        continue;
      }
      const float alpha = std::exp(sc.m[size_t(r)] - mx);  // exp(-inf) = 0 on the first block
      sc.m[size_t(r)] = mx;
      sc.l[size_t(r)] = sc.l[size_t(r)] * alpha + exp_shifted(srow, cols, mx);
      if (alpha != 1.0f) {
        float* a = sc.acc.data() + r * dv;
        for (int c = 0; c < dv; ++c) a[c] *= alpha;
      }
    }
    gemm_nn(rows, dv, cols, s, bk, sc.v.data(), dv, sc.acc.data(), dv);
  }

  // Normalise; rows that kept no key get out = 0 and lse = -inf.
  for (int r = 0; r < rows; ++r) {
    const float l = sc.l[size_t(r)];
    float* a = sc.acc.data() + r * dv;
    if (l == 0) {  // no key kept: exactly 0, also where the zero P row met a NaN or Inf in V
      std::fill(a, a + dv, 0.0f);
    } else {
      const float inv = 1.0f / l;  // NaN (a NaN kept score) stays NaN
      for (int c = 0; c < dv; ++c) a[c] *= inv;
    }
    sc.m[size_t(r)] = l == 0 ? -INFINITY : sc.m[size_t(r)] + std::log(l);
  }
  if (p.num_splits > 1) {
    for (int r = 0; r < rows; ++r) {
      const int64_t row = partial_row(p, part, w.split, w.b, seq.q_start + w.i0 + r, w.h);
      std::copy(sc.acc.data() + r * dv, sc.acc.data() + (r + 1) * dv, part.o.data() + row * dv);
      part.lse[size_t(row)] = sc.m[size_t(r)];
    }
    return;
  }
  store_rows(p.out, w.b, seq.q_start + w.i0, w.h, rows, dv, sc.acc.data(), dv);
  if (p.lse.defined()) {
    float* lse = reinterpret_cast<float*>(p.lse.row(w.b, seq.q_start + w.i0, w.h));
    std::copy(sc.m.begin(), sc.m.begin() + rows, lse);
  }
}

// Below this many multiply-adds a call with num_threads = 0 (all) runs on the calling thread:
// starting a worker thread costs tens of microseconds, the work of a tiny problem less.
constexpr double kThreadWorthFlops = 1e6;

double forward_flops(const detail::Problem& p) {
  double f = 0;
  for (const detail::Sequence& s : p.seqs) f += double(s.rows_q) * s.rows_k;
  return f * p.heads_q * (p.head_dim + p.head_dim_v);
}

// out (and lse) of every row from the splits' partial results.
void combine_splits(const detail::Problem& p, const Partials& part, int workers) {
  const int dv = p.head_dim_v;
  util::parallel_for(int64_t(p.batch) * p.heads_q, workers, [&](int64_t item, int) {
    const int32_t b = int32_t(item / p.heads_q), h = int32_t(item % p.heads_q);
    const detail::Sequence& seq = p.seqs[size_t(b)];
    std::vector<float> row_out(static_cast<size_t>(dv));
    for (int64_t t = seq.q_start; t < seq.q_start + seq.rows_q; ++t) {
      const int64_t r0 = partial_row(p, part, 0, b, t, h);
      float lse = -INFINITY;
      combine_split_row(part.splits, part.rows, dv, part.o.data(), part.lse.data(), r0, row_out.data(), &lse);
      store_rows(p.out, b, t, h, 1, dv, row_out.data(), dv);
      if (p.lse.defined()) *reinterpret_cast<float*>(p.lse.row(b, t, h)) = lse;
    }
  });
}

}  // namespace

Status forward(const detail::Problem& p) {
  const Tiling t = choose_tiling(p.head_dim, p.head_dim_v);
  const std::vector<WorkItem> work = make_work(p, t);
  const bool tiny = p.num_threads == 0 && forward_flops(p) < kThreadWorthFlops;  // asked-for threads run
  const int workers = tiny ? 1 : util::worker_count(p.num_threads, int64_t(work.size()));
  std::vector<ForwardScratch> scratch;
  scratch.reserve(size_t(workers));
  for (int i = 0; i < workers; ++i) scratch.emplace_back(t, p.head_dim, p.head_dim_v);
  Partials part;
  if (p.num_splits > 1) {
    part.splits = p.num_splits;
    part.rows = p.total_q * p.heads_q;
    part.o.assign(size_t(part.splits * part.rows * p.head_dim_v), 0.0f);
    part.lse.assign(size_t(part.splits * part.rows), -INFINITY);
  }
  util::parallel_for(int64_t(work.size()), workers, [&](int64_t item, int worker) {
    forward_block(p, t, work[size_t(item)], scratch[size_t(worker)], part);
  });
  if (p.num_splits > 1) combine_splits(p, part, workers);
  return Status::Ok();
}

}  // namespace fastattn::cpu
