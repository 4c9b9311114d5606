// Drama 3 shapes known without a checkpoint: `tiny` (the fixture's widths, speaking through the
// built-in demo tokenizer into the tiny codec's four codebooks), and the real 35B-A3B backbone with 8
// layers (`a3b-8l`) or all 40 (`a3b`).
#pragma once

#include <string_view>
#include <vector>

#include "models/drama3/config.h"

namespace duet::drama3 {

Config preset_config(std::string_view name);
std::vector<std::string_view> preset_names();

}  // namespace duet::drama3
