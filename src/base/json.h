// A small JSON reader and writer (RFC 8259) for configs, tokenizers and
// safetensors headers. Besides standard JSON it reads the bare tokens Infinity,
// -Infinity and NaN as numbers, because Python's json module writes them.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace duet::json {

class Value {
public:
    enum class Kind { Null, Bool, Number, String, Array, Object };

    Value() = default;
    Value(std::nullptr_t) {}
    Value(bool b) : kind_(Kind::Bool), bool_(b) {}
    Value(double d) : kind_(Kind::Number), number_(d) {}
    Value(float f) : Value(static_cast<double>(f)) {}
    // Every integer type; the exact value is kept so that int64 round-trips.
    template <std::integral T>
        requires(!std::same_as<T, bool>)
    Value(T i) : kind_(Kind::Number) {
        if constexpr (std::is_signed_v<T> || sizeof(T) < sizeof(int64_t)) {
            set_integer(static_cast<int64_t>(i));
        } else if (i <= static_cast<T>(INT64_MAX)) {
            set_integer(static_cast<int64_t>(i));
        } else {
            number_ = static_cast<double>(i);
        }
    }
    Value(std::string s) : kind_(Kind::String), string_(std::move(s)) {}
    Value(std::string_view s) : Value(std::string(s)) {}
    Value(const char* s) : Value(std::string(s)) {}

    static Value object() { Value v; v.kind_ = Kind::Object; return v; }
    static Value array() { Value v; v.kind_ = Kind::Array; return v; }

    Kind kind() const { return kind_; }
    bool is_null() const { return kind_ == Kind::Null; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_number() const { return kind_ == Kind::Number; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_array() const { return kind_ == Kind::Array; }
    bool is_object() const { return kind_ == Kind::Object; }

    // The first member with this key, or nullptr when absent or not an object.
    const Value* find(std::string_view key) const;
    // Array elements; empty for anything but an array.
    const std::vector<Value>& items() const { return items_; }
    // Object members in file order; empty for anything but an object.
    const std::vector<std::pair<std::string, Value>>& members() const { return members_; }

    // Typed reads. `what` names the value for the error, e.g. "config.json: hidden_size".
    bool as_bool(std::string_view what) const;
    // Also accepts transformers' {"__float__": "Infinity" | "-Infinity" | "NaN"}.
    double as_number(std::string_view what) const;
    // Requires an integral value that fits in int64.
    int64_t as_int(std::string_view what) const;
    const std::string& as_string(std::string_view what) const;

    // Builders. set() replaces an existing key or appends; both return *this for chaining.
    Value& set(std::string key, Value value);
    Value& push(Value value);

    // A short description for error messages: `string "abc"`, `number 1.5`, `array`, ...
    std::string describe() const;

    // True when the number was written as an integer literal (or built from an integer)
    // and fits in int64; then integer() is exact.
    bool has_exact_integer() const { return kind_ == Kind::Number && exact_integer_; }
    int64_t integer() const { return integer_; }
    double number() const { return number_; }
    bool boolean() const { return bool_; }
    const std::string& string() const { return string_; }

private:
    void set_integer(int64_t i) {
        exact_integer_ = true;
        integer_ = i;
        number_ = static_cast<double>(i);
    }
    friend class Parser;

    Kind kind_ = Kind::Null;
    bool bool_ = false;
    bool exact_integer_ = false;
    int64_t integer_ = 0;
    double number_ = 0;
    std::string string_;
    std::vector<Value> items_;
    std::vector<std::pair<std::string, Value>> members_;
};

// Parses a whole document; `source_name` prefixes every error (e.g. "config.json").
Value parse(std::string_view text, std::string_view source_name);
// Reads and parses a file; errors name the path.
Value parse_file(const std::string& path);
// Compact one-line JSON. Non-finite numbers are written as Infinity, -Infinity, NaN.
std::string dump(const Value& value);

}  // namespace duet::json
