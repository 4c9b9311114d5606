// Element types of stored tensors, as safetensors names them.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace duet {

enum class DType { F32, F16, BF16, F8_E4M3, I8, U8, I32, I64 };

constexpr size_t dtype_size(DType t) {
    switch (t) {
        case DType::F32: return 4;
        case DType::F16: return 2;
        case DType::BF16: return 2;
        case DType::F8_E4M3: return 1;
        case DType::I8: return 1;
        case DType::U8: return 1;
        case DType::I32: return 4;
        case DType::I64: return 8;
    }
    return 0;
}

constexpr std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "F32";
        case DType::F16: return "F16";
        case DType::BF16: return "BF16";
        case DType::F8_E4M3: return "F8_E4M3";
        case DType::I8: return "I8";
        case DType::U8: return "U8";
        case DType::I32: return "I32";
        case DType::I64: return "I64";
    }
    return "?";
}

// The dtype with this safetensors name, or nothing for an unknown name.
inline std::optional<DType> parse_dtype(std::string_view name) {
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3, DType::I8, DType::U8,
                    DType::I32, DType::I64}) {
        if (dtype_name(t) == name) return t;
    }
    return std::nullopt;
}

constexpr bool dtype_is_float(DType t) {
    return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8_E4M3;
}

}  // namespace duet
