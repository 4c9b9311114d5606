// Model shapes known without a checkpoint: the fixture-sized `tiny`, the real Qwen3.5-35B-A3B
// widths with 8 layers (`a3b-8l`), and the whole 40-layer model (`a3b`).
#pragma once

#include <string_view>
#include <vector>

#include "models/qwen35_moe/config.h"

namespace duet::qwen35_moe {

Config preset_config(std::string_view name);
std::vector<std::string_view> preset_names();

}  // namespace duet::qwen35_moe
