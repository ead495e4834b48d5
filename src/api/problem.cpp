// Turns validated AttnArgs into the Problem that backends consume.
#include "api/problem.h"

#include <algorithm>
#include <cmath>

namespace fastattn::detail {

Operand make_operand(const Tensor& t, bool varlen, bool is_lse) {
  Operand o;
  o.data = t.data;
  o.dtype = t.dtype;
  if (is_lse) {
    // (b, h, s) or (h, total): tokens are the last axis.
    o.token_stride = 1;
    o.batch_stride = varlen ? 0 : t.stride[0];
    o.head_stride = varlen ? t.stride[0] : t.stride[1];
  } else if (varlen) {
    // (total, h, d)
    o.token_stride = t.stride[0];
    o.head_stride = t.stride[1];
  } else {
    // (b, s, h, d)
    o.batch_stride = t.stride[0];
    o.token_stride = t.stride[1];
    o.head_stride = t.stride[2];
  }
  return o;
}

bool has_work(const ProblemShape& s) {
  return s.total_q > 0 && s.heads_q > 0 && s.total_k > 0 && s.max_rows_q > 0 && s.max_rows_k > 0;
}

ProblemShape resolve_shape(const AttnArgs& args) {
  ProblemShape s;
  s.varlen = args.cu_seqlens_q.defined();
  const int hd = s.varlen ? 1 : 2;  // axis of heads
  s.heads_q = int32_t(args.q.shape[hd]);
  s.heads_kv = int32_t(args.k.shape[hd]);
  s.group = s.heads_kv > 0 ? s.heads_q / s.heads_kv : 1;
  s.head_dim = int32_t(args.q.shape[hd + 1]);
  s.head_dim_v = int32_t(args.v.shape[hd + 1]);
  if (s.varlen) {
    s.batch = int32_t(args.cu_seqlens_q.size - 1);
    s.total_q = args.q.shape[0];
    s.total_k = args.k.shape[0];
    s.max_rows_q = args.max_seqlen_q;
    s.max_rows_k = args.max_seqlen_k;
  } else {
    s.batch = int32_t(args.q.shape[0]);
    s.max_rows_q = int32_t(args.q.shape[1]);
    s.max_rows_k = int32_t(args.k.shape[1]);
    s.total_q = int64_t(s.batch) * s.max_rows_q;
    s.total_k = int64_t(s.batch) * s.max_rows_k;
  }
  s.scale = std::isnan(args.softmax_scale) ? float(1.0 / std::sqrt(double(s.head_dim)))
                                           : args.softmax_scale;
  s.softcap = args.softcap;
  s.window_left = args.window_left;
  s.window_right = fold_causal(args.causal, args.window_right);
  s.dtype = args.q.dtype;
  return s;
}

BlockMaskView resolve_block_mask(const BlockMask& m, int32_t heads_q) {
  BlockMaskView v;
  v.data = m.data;
  v.batch_stride = m.shape[0] == 1 ? 0 : m.stride[0];
  v.head_stride = m.shape[1] == 1 ? 0 : m.stride[1];
  v.row_stride = m.stride[2];
  v.col_stride = m.stride[3];
  v.head_div = m.shape[1] > 0 ? int32_t(heads_q / m.shape[1]) : 1;
  v.q_blocks = int32_t(m.shape[2]);
  v.k_blocks = int32_t(m.shape[3]);
  v.block_q = m.block_q;
  v.block_k = m.block_k;
  return v;
}

BitMaskView resolve_bit_mask(const BitMask& m, int32_t heads_q) {
  BitMaskView v;
  v.data = m.data;
  v.batch_stride = m.shape[0] == 1 ? 0 : m.stride[0];
  v.head_stride = m.shape[1] == 1 ? 0 : m.stride[1];
  v.row_stride = m.stride[2];
  v.head_div = m.shape[1] > 0 ? int32_t(heads_q / m.shape[1]) : 1;
  v.rows = int32_t(m.shape[2]);
  v.words = int32_t(m.shape[3]);
  return v;
}

BiasView resolve_bias(const Tensor& t, int32_t heads_q) {
  BiasView v;
  v.data = t.data;
  v.dtype = t.dtype;
  v.batch_stride = t.shape[0] == 1 ? 0 : t.stride[0];
  v.head_stride = t.shape[1] == 1 ? 0 : t.stride[1];
  v.row_stride = t.stride[2];
  v.head_div = t.shape[1] > 0 ? int32_t(heads_q / t.shape[1]) : 1;
  v.batch = int32_t(t.shape[0]);
  v.heads = int32_t(t.shape[1]);
  v.rows = int32_t(t.shape[2]);
  v.cols = int32_t(t.shape[3]);
  return v;
}

Problem resolve_operands(const AttnArgs& args) {
  Problem p;
  static_cast<ProblemShape&>(p) = resolve_shape(args);
  p.q = make_operand(args.q, p.varlen);
  p.k = make_operand(args.k, p.varlen);
  p.v = make_operand(args.v, p.varlen);
  p.out = make_operand(args.out, p.varlen);
  if (args.lse.defined()) p.lse = make_operand(args.lse, p.varlen, /*is_lse=*/true);
  p.seq_arrays = {args.cu_seqlens_q.data, args.cu_seqlens_k.data, args.seqused_q.data, args.seqused_k.data};
  p.num_threads = args.num_threads;
  p.num_splits = args.num_splits > 0 ? args.num_splits : 1;  // 0: the host backends do not split
  p.num_splits_arg = args.num_splits;
  if (args.mask.kind == MaskKind::BlockSparse) p.blocks = resolve_block_mask(args.mask.blocks, p.heads_q);
  if (args.mask.kind == MaskKind::DenseBitmask) p.bits = resolve_bit_mask(args.mask.bits, p.heads_q);
  if (args.bias.defined()) p.bias = resolve_bias(args.bias, p.heads_q);
  if (args.alibi_slopes.defined())
    p.alibi = {static_cast<const float*>(args.alibi_slopes.data),
               args.alibi_slopes.ndim == 2 ? args.alibi_slopes.stride[0] : 0};
  return p;
}

Problem resolve_problem(const AttnArgs& args, const std::vector<int32_t>& cu_q,
                        const std::vector<int32_t>& cu_k, const std::vector<int32_t>& used_q,
                        const std::vector<int32_t>& used_k) {
  Problem p = resolve_operands(args);

  p.seqs.resize(size_t(p.batch));
  int32_t max_q = 0, max_k = 0;
  for (int32_t b = 0; b < p.batch; ++b) {
    Sequence& s = p.seqs[size_t(b)];
    if (p.varlen) {
      s.q_start = cu_q[size_t(b)];
      s.k_start = cu_k[size_t(b)];
      s.rows_q = cu_q[size_t(b) + 1] - cu_q[size_t(b)];
      s.rows_k = cu_k[size_t(b) + 1] - cu_k[size_t(b)];
    } else {
      s.rows_q = int32_t(args.q.shape[1]);
      s.rows_k = int32_t(args.k.shape[1]);
    }
    s.len_q = used_q.empty() ? s.rows_q : used_q[size_t(b)];
    s.len_k = used_k.empty() ? s.rows_k : used_k[size_t(b)];
    max_q = std::max(max_q, s.rows_q);
    max_k = std::max(max_k, s.rows_k);
  }
  if (p.varlen) {
    p.max_rows_q = max_q;
    p.max_rows_k = max_k;
  }
  return p;
}

}  // namespace fastattn::detail
