// A restricted unpickler for the data.pkl of a torch.save(state_dict) checkpoint. It understands
// only what such a file holds: a dict (or OrderedDict) of names to tensors rebuilt by
// torch._utils._rebuild_tensor_v2 from storages named by persistent id. Every other opcode or
// global is refused with its name before anything it asks for is run or allocated; nothing in the
// pickle is ever executed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace duet {

// One tensor as the pickle describes it: a view into a storage (a zip entry data/<key>).
struct PickledTensor {
    std::string name;
    DType dtype = DType::F32;
    std::string storage_key;
    int64_t storage_numel = 0;  // the element count the storage claims
    int64_t offset = 0;         // in elements
    std::vector<int64_t> shape;
    std::vector<int64_t> stride;  // in elements
};

// `source` names the file in errors. Tensors come in the pickle's order.
std::vector<PickledTensor> unpickle_state_dict(const uint8_t* data, size_t size, const std::string& source);

}  // namespace duet
