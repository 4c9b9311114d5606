// Named tensors held in memory, with the same lookup as a checkpoint: used for models built from
// random weights (benchmarks, the demo) and written out as safetensors.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

namespace duet {

class TensorSet {
public:
    // Adds a zero-filled tensor and returns its bytes to fill in. The bytes stay at the same address.
    uint8_t* add(const std::string& name, DType dtype, std::vector<int64_t> shape);

    const TensorEntry* find(std::string_view name) const;
    std::vector<const TensorEntry*> all() const;  // in the order added
    size_t total_bytes() const;
    void write(const std::string& path) const;

private:
    struct Owned {
        TensorEntry entry;
        std::vector<uint8_t> bytes;
    };
    std::deque<Owned> tensors_;
    std::map<std::string, const TensorEntry*, std::less<>> by_name_;
};

}  // namespace duet
