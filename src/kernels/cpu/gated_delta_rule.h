// Gated DeltaNet's core on the CPU: the delta-rule state update with a per-token decay, in f32,
// either token by token (decode) or in the chunked WY/UT form (prefill). Both compute the same
// function; the chunked form turns most of the work into small dense products.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace duet::cpu {

void gated_delta_rule(const GatedDeltaArgs& args, ThreadPool* pool);

}  // namespace duet::cpu
