// Binds checkpoint tensors to a model's weight slots by name. Every slot is looked up under each
// name a supported layout gives it; problems (missing tensors, wrong shapes, wrong dtypes) are
// collected and reported together by finish(), so one run names everything that is wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "tensor/matrix.h"

namespace duet {

using TensorLookup = std::function<const TensorEntry*(std::string_view name)>;

class WeightBinder {
public:
    // `source` names the checkpoint in errors.
    WeightBinder(TensorLookup lookup, std::string source);

    bool has(std::string_view name) const { return lookup_(name) != nullptr; }

    // A [rows, cols] matrix under the first of `names` present. F32 and BF16 tensors are used in
    // place; F16 and F8_E4M3 ones are widened to f32 copies owned by the binder's storage.
    MatrixView matrix(const std::vector<std::string>& names, int64_t rows, int64_t cols);

    // `count` matrices [rows, cols] stored as one rank-3 tensor [count, rows, cols].
    std::vector<MatrixView> matrix_stack(const std::string& name, int64_t count, int64_t rows, int64_t cols);

    // A small tensor widened to f32; its shape must equal `shape` once dimensions of size 1 are
    // dropped from both (so a conv weight [C, 1, K] matches [C, K]).
    std::vector<float> vector(const std::vector<std::string>& names, const std::vector<int64_t>& shape);

    // Throws one error listing every problem found so far.
    void finish() const;

    // Copies the binder made (widened matrices); the model keeps them alive.
    std::vector<std::shared_ptr<const void>> take_storage() { return std::move(storage_); }

private:
    const TensorEntry* find_first(const std::vector<std::string>& names, std::string_view what);
    const void* matrix_data(const TensorEntry& t, DType& dtype);

    TensorLookup lookup_;
    std::string source_;
    std::vector<std::string> problems_;
    std::vector<std::shared_ptr<const void>> storage_;
};

std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace duet
