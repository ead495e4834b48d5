// The class of a problem's mask, decided once per launch on the host from the resolved window
// (causal arrives folded in as window_right = 0, api/problem.cpp). Schedules and kernel configs
// choose by it; nothing else looks at (window_left, window_right) to tell the classes apart.
//   None         no window: every row sees every key of its sequence.
//   Causal       right edge only (window_left unbounded): row i's keys end at its diagonal
//                + window_right, so a tile's work grows with its m-block.
//   Local        a left edge (sliding window), right edge or not: every m-block sees about as
//                many keys.
//   NarrowLocal  Local with both edges and left + right <= kNarrowWindowKeys: an m-block sees
//                only a few key blocks, so short key tiles pay (sm90: d = 128's 64-key config).
// Block-sparse masks will be a fifth class, with their block list as the block source.
#pragma once

namespace fastattn::cuda_backend {

enum class MaskClass { None, Causal, Local, NarrowLocal };

constexpr int kNarrowWindowKeys = 64;

constexpr MaskClass classify_mask(int window_left, int window_right) {
  if (window_left < 0) return window_right < 0 ? MaskClass::None : MaskClass::Causal;
  if (window_right >= 0 && window_left + window_right <= kNarrowWindowKeys) return MaskClass::NarrowLocal;
  return MaskClass::Local;
}

}  // namespace fastattn::cuda_backend
