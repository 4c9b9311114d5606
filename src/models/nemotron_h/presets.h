// Model shapes known without a checkpoint: the fixture-sized `tiny`, the real Nemotron 3 Nano
// widths with 8 layers (`nano-8l`), and the whole Nemotron 3 Nano 30B-A3B (`nano`).
#pragma once

#include <string_view>
#include <vector>

#include "base/json.h"
#include "models/nemotron_h/config.h"

namespace duet::nemotron_h {

Config preset_config(std::string_view name);
std::vector<std::string_view> preset_names();

// The config as transformers writes it (hub layout), so a generated checkpoint loads like any other.
json::Value config_to_json(const Config& config);

}  // namespace duet::nemotron_h
