// One FA3 variant object's element type and name parts, from the defines build.sh passes
// (FA3_BF16, FA3_CAUSAL, FA3_LOCAL): shared by fa3_peer.cu (forward) and fa3_bwd_peer.cu (backward).
#pragma once

#include "cutlass/numeric_types.h"

#if FA3_BF16
using Fa3Elem = cutlass::bfloat16_t;
#define FA3_T bf16
#else
using Fa3Elem = cutlass::half_t;
#define FA3_T fp16
#endif
#if FA3_CAUSAL
#define FA3_M causal
#elif FA3_LOCAL
#define FA3_M local
#else
#define FA3_M full
#endif
