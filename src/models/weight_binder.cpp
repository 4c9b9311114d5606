#include "models/weight_binder.h"

#include "base/error.h"

namespace duet {

std::string shape_to_string(const std::vector<int64_t>& shape) {
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) out += ", ";
        out += std::to_string(shape[i]);
    }
    return out + "]";
}

namespace {

std::vector<int64_t> without_unit_dims(const std::vector<int64_t>& shape) {
    std::vector<int64_t> out;
    for (int64_t d : shape) {
        if (d != 1) out.push_back(d);
    }
    return out;
}

}  // namespace

WeightBinder::WeightBinder(TensorLookup lookup, std::string source)
    : lookup_(std::move(lookup)), source_(std::move(source)) {}

const TensorEntry* WeightBinder::find_first(const std::vector<std::string>& names, std::string_view what) {
    for (const std::string& name : names) {
        if (const TensorEntry* t = lookup_(name)) {
            if (!dtype_is_float(t->dtype)) {
                problems_.push_back(str_cat("'", name, "' has dtype ", dtype_name(t->dtype),
                                            ", expected a floating-point type"));
                return nullptr;
            }
            return t;
        }
    }
    problems_.push_back(str_cat("'", names.front(), "' missing (", what, ")"));
    return nullptr;
}

const void* WeightBinder::matrix_data(const TensorEntry& t, DType& dtype) {
    if (t.dtype == DType::F32 || t.dtype == DType::BF16) {
        dtype = t.dtype;
        return t.data;
    }
    auto widened = std::make_shared<std::vector<float>>(read_f32(t));
    storage_.push_back(widened);
    dtype = DType::F32;
    return widened->data();
}

MatrixView WeightBinder::matrix(const std::vector<std::string>& names, int64_t rows, int64_t cols) {
    const TensorEntry* t = find_first(names, str_cat("a matrix ", shape_to_string({rows, cols})));
    if (t == nullptr) return {};
    if (t->shape != std::vector<int64_t>{rows, cols}) {
        problems_.push_back(str_cat("'", t->name, "' has shape ", shape_to_string(t->shape), ", expected ",
                                    shape_to_string({rows, cols})));
        return {};
    }
    MatrixView view{DType::F32, rows, cols, nullptr};
    view.data = matrix_data(*t, view.dtype);
    return view;
}

std::vector<MatrixView> WeightBinder::matrix_stack(const std::string& name, int64_t count, int64_t rows,
                                                   int64_t cols) {
    const TensorEntry* t = find_first({name}, str_cat("a stack ", shape_to_string({count, rows, cols})));
    if (t == nullptr) return {};
    if (t->shape != std::vector<int64_t>{count, rows, cols}) {
        problems_.push_back(str_cat("'", t->name, "' has shape ", shape_to_string(t->shape), ", expected ",
                                    shape_to_string({count, rows, cols})));
        return {};
    }
    DType dtype = DType::F32;
    const auto* base = static_cast<const uint8_t*>(matrix_data(*t, dtype));
    const size_t stride = static_cast<size_t>(rows * cols) * dtype_size(dtype);
    std::vector<MatrixView> out;
    for (int64_t i = 0; i < count; ++i) out.push_back({dtype, rows, cols, base + i * stride});
    return out;
}

std::vector<float> WeightBinder::vector(const std::vector<std::string>& names, const std::vector<int64_t>& shape) {
    const TensorEntry* t = find_first(names, str_cat("shape ", shape_to_string(shape)));
    if (t == nullptr) return {};
    if (without_unit_dims(t->shape) != without_unit_dims(shape)) {
        problems_.push_back(str_cat("'", t->name, "' has shape ", shape_to_string(t->shape), ", expected ",
                                    shape_to_string(shape)));
        return {};
    }
    return read_f32(*t);
}

void WeightBinder::finish() const {
    if (problems_.empty()) return;
    std::string joined;
    for (size_t i = 0; i < problems_.size(); ++i) joined += (i ? "; " : "") + problems_[i];
    fail(source_, ": ", problems_.size(), problems_.size() == 1 ? " tensor problem: " : " tensor problems: ",
         joined);
}

}  // namespace duet
