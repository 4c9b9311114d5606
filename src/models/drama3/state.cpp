#include "models/drama3/state.h"

namespace duet::drama3 {

State::State(const Config& c, Backend& backend, int64_t capacity) : backbone_(c.backbone, backend, capacity) {
    const size_t rows = static_cast<size_t>(capacity * c.tower.kv_heads * c.tower.head_dim);
    for (int64_t t = 0; t < c.tower.layers(); ++t) {
        tower_keys_.push_back(backend.alloc(rows));
        tower_values_.push_back(backend.alloc(rows));
    }
}

}  // namespace duet::drama3
