// CPU backward, FlashAttention-2 style, in three race-free passes:
//   0. D_i = rowsum(dO_i * O_i) per (sequence, q head, row);
//   1. per (sequence, kv head, key block): dK, dV accumulated in fp32 over every q head of the
//      GQA group and every q block, then rounded once;
//   2. per (sequence, q head, q block): dQ accumulated over key blocks;
//   3. (dbias asked) per (bias batch entry, bias head, q block, key block): dS summed over the
//      sequences and q heads that share the bias entry, then stored once (entries no sequence
//      reaches, or masked, stay 0).
// Both passes rebuild P = exp(S - lse) from the forward's lse, so no N x N matrix is kept, and
// walk the same tiles as the forward (Empty skipped, only Partial masked; a block-sparse mask's
// dropped blocks count as masked). No atomics: results
// are deterministic for any thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_backend.h"
#include "util/parallel_for.h"
#include "cpu/tile_class.h"
#include "cpu/tile_io.h"
#include "cpu/tile_kernels.h"
#include "cpu/tiling.h"

namespace fastattn::cpu {
namespace {

struct Item {
  int32_t b, h, start;  // h: q head (passes 0, 2) or kv head (pass 1); start: first row/key
};

struct Scratch {
  std::vector<float> q, dout, kt, vt, k, s, dp, dcap, dk, dv, dq, lse, D;
  Scratch(const Tiling& t, int d, int dvd)
      : q(size_t(t.block_q * d)), dout(size_t(t.block_q * dvd)), kt(size_t(d * t.block_k)),
        vt(size_t(dvd * t.block_k)), k(size_t(t.block_k * d)), s(size_t(t.block_q * t.block_k)),
        dp(size_t(t.block_q * t.block_k)), dcap(size_t(t.block_q * t.block_k)),
        dk(size_t(t.block_k * d)), dv(size_t(t.block_k * dvd)), dq(size_t(t.block_q * d)),
        lse(size_t(t.block_q)), D(size_t(t.block_q)) {}
};

// D_i for every q row, indexed [h * total_q + token] (token as in the reference's layout).
struct RowStats {
  std::vector<float> D;
  int64_t index(const detail::Problem& p, int64_t b, int64_t h, int64_t i) const {
    const int64_t tok = p.varlen ? p.seqs[size_t(b)].q_start + i : b * p.max_rows_q + i;
    return h * p.total_q + tok;
  }
};

class Backward {
 public:
  Backward(const detail::Problem& p, const detail::GradOperands& g)
      : p_(p), g_(g), t_(choose_tiling(p.head_dim, p.head_dim_v)) {}

  void run() {
    stats_.D.assign(size_t(p_.heads_q * p_.total_q), 0.0f);
    std::vector<Item> q_items, k_items;
    for (int32_t b = 0; b < p_.batch; ++b) {
      const detail::Sequence& s = p_.seqs[size_t(b)];
      for (int32_t i0 = 0; i0 < s.rows_q; i0 += t_.block_q) {
        for (int32_t h = 0; h < p_.heads_q; ++h) q_items.push_back({b, h, i0});
      }
      for (int32_t j0 = 0; j0 < s.rows_k; j0 += t_.block_k) {
        for (int32_t h = 0; h < p_.heads_kv; ++h) k_items.push_back({b, h, j0});
      }
    }
    const int workers = util::worker_count(p_.num_threads, int64_t(std::max(q_items.size(), k_items.size())));
    std::vector<Scratch> scratch;
    scratch.reserve(size_t(workers));
    for (int i = 0; i < workers; ++i) scratch.emplace_back(t_, p_.head_dim, p_.head_dim_v);

    util::parallel_for(int64_t(q_items.size()), workers, [&](int64_t i, int w) {
      row_stats(q_items[size_t(i)], scratch[size_t(w)]);
    });
    util::parallel_for(int64_t(k_items.size()), workers, [&](int64_t i, int w) {
      dkdv_block(k_items[size_t(i)], scratch[size_t(w)]);
    });
    util::parallel_for(int64_t(q_items.size()), workers, [&](int64_t i, int w) {
      dq_block(q_items[size_t(i)], scratch[size_t(w)]);
    });
    if (g_.dbias.defined()) dbias_pass(workers, scratch);
  }

 private:
  // Pass 0: D = rowsum(dO * O) for the used rows of one q block.
  void row_stats(const Item& it, Scratch& sc) {
    const detail::Sequence& seq = p_.seqs[size_t(it.b)];
    const int rows = std::clamp(seq.len_q - it.start, 0, t_.block_q);
    const int dv = p_.head_dim_v;
    load_rows(g_.dout, it.b, seq.q_start + it.start, it.h, rows, dv, 1.0f, sc.dout.data(), dv);
    load_rows(p_.out, it.b, seq.q_start + it.start, it.h, rows, dv, 1.0f, sc.dv.data(), dv);
    for (int r = 0; r < rows; ++r) {
      float acc = 0;
      for (int c = 0; c < dv; ++c) acc += sc.dout[size_t(r * dv + c)] * sc.dv[size_t(r * dv + c)];
      stats_.D[size_t(stats_.index(p_, it.b, it.h, it.start + r))] = acc;
    }
  }

  // Stages the q-side operands of rows [i0, i0 + rows) of head h: scaled q, dO, lse, D.
  void load_q_side(int32_t b, int32_t h, int32_t i0, int rows, Scratch& sc) const {
    const detail::Sequence& seq = p_.seqs[size_t(b)];
    load_rows(p_.q, b, seq.q_start + i0, h, rows, p_.head_dim, p_.scale, sc.q.data(), p_.head_dim);
    load_rows(g_.dout, b, seq.q_start + i0, h, rows, p_.head_dim_v, 1.0f, sc.dout.data(), p_.head_dim_v);
    const float* lse = reinterpret_cast<const float*>(p_.lse.row(b, seq.q_start + i0, h));
    for (int r = 0; r < rows; ++r) {
      // A row that kept no key has lse = -inf and every score masked: +inf makes P exactly 0.
      sc.lse[size_t(r)] = lse[r] == -INFINITY ? INFINITY : lse[r];
      sc.D[size_t(r)] = stats_.D[size_t(stats_.index(p_, b, h, i0 + r))];
    }
  }

  // Stages the key-side operands of keys [j0, j0 + cols) of kv head hk: K^T, V^T (and K).
  void load_k_side(int32_t b, int32_t hk, int64_t j0, int cols, bool plain_k, Scratch& sc) const {
    const detail::Sequence& seq = p_.seqs[size_t(b)];
    const int bk = t_.block_k;
    load_rows_transposed(p_.k, b, seq.k_start + j0, hk, cols, p_.head_dim, sc.kt.data(), bk);
    load_rows_transposed(p_.v, b, seq.k_start + j0, hk, cols, p_.head_dim_v, sc.vt.data(), bk);
    if (plain_k) load_rows(p_.k, b, seq.k_start + j0, hk, cols, p_.head_dim, 1.0f, sc.k.data(), p_.head_dim);
  }

  // For a staged (rows x cols) tile: sc.s <- P, sc.dp <- dS (= dX, softcap's derivative folded
  // in; the 1/scale is not: q was staged pre-scaled).
  // `fold_softcap` false leaves dS as the gradient of the post-softcap score (what dbias sums).
  void p_and_ds(const reference::HeadMask& m, TileClass cls, int64_t i0, int rows, int64_t j0,
                int cols, Scratch& sc, bool fold_softcap = true) const {
    const int bk = t_.block_k;
    float* s = sc.s.data();
    float* dp = sc.dp.data();
    std::fill(sc.s.begin(), sc.s.end(), 0.0f);
    std::fill(sc.dp.begin(), sc.dp.end(), 0.0f);
    gemm_nn(rows, cols, p_.head_dim, sc.q.data(), p_.head_dim, sc.kt.data(), bk, s, bk);
    const float cap = p_.softcap;
    if (cap > 0) {
      apply_softcap(cap, rows, cols, s, bk);
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
          const float u = s[r * bk + c] / cap;
          sc.dcap[size_t(r * bk + c)] = 1.0f - u * u;
        }
      }
    }
    if (p_.bias.defined()) add_bias_tile(p_.bias, m.b, m.h, i0, rows, j0, cols, s, bk);  // after dcap's softcap
    if (p_.alibi.defined())
      add_alibi_tile(p_.alibi.slope(m.b, m.h), i0, rows, j0, cols, int64_t(m.rule.len_k) - m.rule.len_q, s, bk);
    if (cls == TileClass::Partial) mask_partial_tile(m, i0, rows, j0, cols, s, bk);
    for (int r = 0; r < rows; ++r) exp_shifted(s + r * bk, cols, sc.lse[size_t(r)]);
    gemm_nn(rows, cols, p_.head_dim_v, sc.dout.data(), p_.head_dim_v, sc.vt.data(), bk, dp, bk);
    for (int r = 0; r < rows; ++r) {
      const float D = sc.D[size_t(r)];
      float* pr = s + r * bk;
      float* dr = dp + r * bk;
      for (int c = 0; c < cols; ++c) dr[c] = pr[c] * (dr[c] - D);
      if (cap > 0 && fold_softcap) {
        const float* dc = sc.dcap.data() + r * bk;
        for (int c = 0; c < cols; ++c) dr[c] *= dc[c];
      }
    }
  }

  // Pass 1: dK, dV of keys [j0, j0 + block_k) of kv head hk.
  void dkdv_block(const Item& it, Scratch& sc) {
    const detail::Sequence& seq = p_.seqs[size_t(it.b)];
    const int d = p_.head_dim, dv = p_.head_dim_v, bk = t_.block_k;
    const int cols = std::min(bk, seq.rows_k - it.start);
    const int used = std::clamp(seq.len_k - it.start, 0, cols);
    std::fill(sc.dk.begin(), sc.dk.end(), 0.0f);
    std::fill(sc.dv.begin(), sc.dv.end(), 0.0f);
    if (used > 0) load_k_side(it.b, it.h, it.start, used, /*plain_k=*/false, sc);
    for (int32_t h = it.h * p_.group; used > 0 && h < (it.h + 1) * p_.group; ++h) {
      const reference::HeadMask m = reference::head_mask(p_, it.b, h);
      for (int32_t i0 = 0; i0 < seq.len_q; i0 += t_.block_q) {
        const int rows = std::min(t_.block_q, seq.len_q - i0);
        const TileClass cls = classify_tile(m, i0, i0 + rows, it.start, it.start + used);
        if (cls == TileClass::Empty) continue;
        load_q_side(it.b, h, i0, rows, sc);
        p_and_ds(m, cls, i0, rows, it.start, used, sc);
        gemm_tn(used, dv, rows, sc.s.data(), bk, sc.dout.data(), dv, sc.dv.data(), dv);
        gemm_tn(used, d, rows, sc.dp.data(), bk, sc.q.data(), d, sc.dk.data(), d);
      }
    }
    // Keys past seqused_k stay zero; dK already carries the scale through the staged q.
    store_rows(g_.dk, it.b, seq.k_start + it.start, it.h, cols, d, sc.dk.data(), d);
    store_rows(g_.dv, it.b, seq.k_start + it.start, it.h, cols, dv, sc.dv.data(), dv);
  }

  // Pass 2: dQ of rows [i0, i0 + block_q) of q head h.
  void dq_block(const Item& it, Scratch& sc) {
    const detail::Sequence& seq = p_.seqs[size_t(it.b)];
    const reference::HeadMask m = reference::head_mask(p_, it.b, it.h);
    const int d = p_.head_dim, bk = t_.block_k;
    const int rows = std::min(t_.block_q, seq.rows_q - it.start);
    const int used = std::clamp(seq.len_q - it.start, 0, rows);
    std::fill(sc.dq.begin(), sc.dq.end(), 0.0f);
    const reference::KeyRange keys = block_key_range(m.rule, it.start, it.start + used);
    if (!keys.empty()) load_q_side(it.b, it.h, it.start, used, sc);
    const int32_t hk = it.h / p_.group;
    for (int64_t j0 = (keys.begin / bk) * bk; j0 < keys.end; j0 += bk) {
      const int cols = int(std::min<int64_t>(bk, seq.len_k - j0));
      const TileClass cls = classify_tile(m, it.start, it.start + used, j0, j0 + cols);
      if (cls == TileClass::Empty) continue;
      load_k_side(it.b, hk, j0, cols, /*plain_k=*/true, sc);
      p_and_ds(m, cls, it.start, used, j0, cols, sc);
      gemm_nn(used, d, cols, sc.dp.data(), bk, sc.k.data(), d, sc.dq.data(), d);
    }
    for (float& x : sc.dq) x *= p_.scale;
    store_rows(g_.dq, it.b, seq.q_start + it.start, it.h, rows, d, sc.dq.data(), d);
  }

  // Pass 3: every dbias entry written once. Zero first (rows / cols no sequence reaches), then one
  // item per (bias entry, q block) sums its tiles over the sharing sequences and heads.
  void dbias_pass(int workers, std::vector<Scratch>& scratch) {
    const detail::BiasView& db = g_.dbias;
    for (int64_t e = 0; e < int64_t(db.batch) * db.heads; ++e) {
      for (int64_t i = 0; i < db.rows; ++i) {
        float* row = dbias_row(e, i);
        std::fill(row, row + db.cols, 0.0f);
      }
    }
    std::vector<Item> items;  // b: bias batch entry, h: bias head, start: first row
    for (int32_t e = 0; e < db.batch * db.heads; ++e) {
      for (int32_t i0 = 0; i0 < std::min(db.rows, p_.max_rows_q); i0 += t_.block_q) items.push_back({e / db.heads, e % db.heads, i0});
    }
    util::parallel_for(int64_t(items.size()), workers, [&](int64_t i, int w) {
      dbias_rows(items[size_t(i)], scratch[size_t(w)]);
    });
  }

  float* dbias_row(int64_t entry, int64_t i) const {
    const detail::BiasView& db = g_.dbias;
    return static_cast<float*>(db.data) + (entry / db.heads) * db.batch_stride + (entry % db.heads) * db.head_stride +
           i * db.row_stride;
  }

  void dbias_rows(const Item& it, Scratch& sc) {
    const detail::BiasView& db = g_.dbias;
    const int bk = t_.block_k, bq = t_.block_q;
    const int32_t b_end = db.batch == 1 ? p_.batch : it.b + 1;
    const int32_t h_first = it.h * db.head_div;
    const int64_t key_end = std::min<int64_t>(db.cols, p_.max_rows_k);
    std::vector<float> acc(size_t(bq * bk));
    for (int64_t j0 = 0; j0 < key_end; j0 += bk) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      bool any = false;
      for (int32_t b = db.batch == 1 ? 0 : it.b; b < b_end; ++b) {
        const detail::Sequence& seq = p_.seqs[size_t(b)];
        const int rows = std::clamp(seq.len_q - it.start, 0, bq);
        const int cols = int(std::clamp<int64_t>(seq.len_k - j0, 0, bk));
        if (rows == 0 || cols == 0) continue;
        for (int32_t h = h_first; h < h_first + db.head_div; ++h) {
          const reference::HeadMask m = reference::head_mask(p_, b, h);
          const TileClass cls = classify_tile(m, it.start, it.start + rows, j0, j0 + cols);
          if (cls == TileClass::Empty) continue;
          load_q_side(b, h, it.start, rows, sc);
          load_k_side(b, h / p_.group, j0, cols, /*plain_k=*/false, sc);
          p_and_ds(m, cls, it.start, rows, j0, cols, sc, /*fold_softcap=*/false);
          for (int r = 0; r < rows; ++r) {
            for (int c = 0; c < cols; ++c) acc[size_t(r * bk + c)] += sc.dp[size_t(r * bk + c)];
          }
          any = true;
        }
      }
      if (!any) continue;
      const int rows = std::min<int>(bq, db.rows - it.start);
      const int cols = int(std::min<int64_t>(bk, key_end - j0));
      for (int r = 0; r < rows; ++r) std::copy(&acc[size_t(r * bk)], &acc[size_t(r * bk)] + cols, dbias_row(int64_t(it.b) * db.heads + it.h, it.start + r) + j0);
    }
  }

  const detail::Problem& p_;
  const detail::GradOperands& g_;
  const Tiling t_;
  RowStats stats_;
};

}  // namespace

Status backward(const detail::Problem& p, const detail::GradOperands& g) {
  Backward(p, g).run();
  return Status::Ok();
}

}  // namespace fastattn::cpu
