// FA3's Flash_fwd_params for a fixed-length (b, s, h, d) call, the fields flash_api.cpp's mha_fwd
// fills from the tensors alike for every forward: shared by the forward peer (fa3_peer.cu) and the
// decode peer (fa3_decode_peer.cu), whose argument structs name these fields the same way.
// Include after flash.h.
#pragma once

#include <cstring>

template <class Args>
Flash_fwd_params fa3_fixed_length_params(const Args* a) {
  Flash_fwd_params p;
  std::memset(&p, 0, sizeof(p));
  p.q_ptr = const_cast<void*>(a->q);
  p.k_ptr = const_cast<void*>(a->k);
  p.v_ptr = const_cast<void*>(a->v);
  p.o_ptr = a->out;
  p.q_batch_stride = a->q_stride[0], p.q_row_stride = a->q_stride[1], p.q_head_stride = a->q_stride[2];
  p.k_batch_stride = a->k_stride[0], p.k_row_stride = a->k_stride[1], p.k_head_stride = a->k_stride[2];
  p.v_batch_stride = a->v_stride[0], p.v_row_stride = a->v_stride[1], p.v_head_stride = a->v_stride[2];
  p.o_batch_stride = a->o_stride[0], p.o_row_stride = a->o_stride[1], p.o_head_stride = a->o_stride[2];
  p.v_dim_stride = 1;
  p.softmax_lse_ptr = a->lse;
  p.b = p.b_k = a->b;
  p.h = a->h, p.h_k = a->h_k;
  p.seqlen_q = a->s_q, p.seqlen_k = a->s_k;
  p.seqlen_q_rounded = (a->s_q + 127) / 128 * 128, p.seqlen_k_rounded = (a->s_k + 127) / 128 * 128;
  p.d = p.dv = p.d_rounded = p.dv_rounded = a->d;
  p.total_q = a->b * a->s_q, p.total_k = a->b * a->s_k;
  p.scale_softmax = a->scale;
  p.p_dropout = 1.f, p.rp_dropout = 1.f, p.p_dropout_in_uint8_t = 255;
  p.arch = 90;
  p.num_sm = a->num_sm;
  return p;
}
