// Reading typed fields of a config.json object, each error naming the file and the field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/json.h"

namespace duet {

class ConfigFields {
public:
    // `source` names the object in errors, e.g. "model/config.json: llm_config".
    ConfigFields(const json::Value& obj, std::string source) : obj_(obj), source_(std::move(source)) {}

    // The field, or nullptr when it is absent or null.
    const json::Value* find(std::string_view key) const {
        const json::Value* v = obj_.find(key);
        return v != nullptr && !v->is_null() ? v : nullptr;
    }

    int64_t positive_int(std::string_view key) const {
        const json::Value* v = find(key);
        require(v != nullptr, source_, ": missing ", key, " (expected a positive integer)");
        const int64_t value = v->as_int(str_cat(source_, ": ", key));
        require(value > 0, source_, ": ", key, " is ", value, ", expected a positive integer");
        return value;
    }

    int64_t int_or(std::string_view key, int64_t fallback) const {
        const json::Value* v = find(key);
        return v == nullptr ? fallback : v->as_int(str_cat(source_, ": ", key));
    }

    double number_or(std::string_view key, double fallback) const {
        const json::Value* v = find(key);
        return v == nullptr ? fallback : v->as_number(str_cat(source_, ": ", key));
    }

    bool bool_or(std::string_view key, bool fallback) const {
        const json::Value* v = find(key);
        return v == nullptr ? fallback : v->as_bool(str_cat(source_, ": ", key));
    }

    const std::string& source() const { return source_; }

private:
    const json::Value& obj_;
    std::string source_;
};

}  // namespace duet
