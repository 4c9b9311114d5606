#include "base/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_set>

#include "base/error.h"
#include "base/mapped_file.h"

namespace duet::json {

namespace {

// Deep enough for any real config, shallow enough that the recursive parser
// (and the recursive destructor) cannot exhaust the stack.
constexpr int kMaxDepth = 512;

// Keeps error messages one line and short even for huge strings.
std::string quote_for_message(const std::string& s) {
    constexpr size_t kMaxShown = 40;
    std::string out = "\"";
    for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    if (s.size() > kMaxShown) out += "...";
    out += '"';
    return out;
}

void append_number(std::string& out, double d) {
    if (std::isnan(d)) {
        out += "NaN";
        return;
    }
    if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
        return;
    }
    constexpr double kExactIntegerLimit = 9007199254740992.0;  // 2^53
    char buf[32];
    if (d == 0 && std::signbit(d)) {
        out += "-0.0";  // keeps the sign through a round trip
    } else if (d == std::trunc(d) && std::fabs(d) <= kExactIntegerLimit) {
        std::snprintf(buf, sizeof buf, "%.0f", d);
        out += buf;
    } else {
        std::snprintf(buf, sizeof buf, "%.17g", d);
        out += buf;
    }
}

void append_string(std::string& out, const std::string& s) {
    out += '"';
    for (char ch : s) {
        unsigned char c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += ch;
                }
        }
    }
    out += '"';
}

void append_value(std::string& out, const Value& v) {
    switch (v.kind()) {
        case Value::Kind::Null: out += "null"; break;
        case Value::Kind::Bool: out += v.boolean() ? "true" : "false"; break;
        case Value::Kind::Number:
            if (v.has_exact_integer()) {
                out += std::to_string(v.integer());
            } else {
                append_number(out, v.number());
            }
            break;
        case Value::Kind::String: append_string(out, v.string()); break;
        case Value::Kind::Array: {
            out += '[';
            bool first = true;
            for (const Value& item : v.items()) {
                if (!first) out += ',';
                first = false;
                append_value(out, item);
            }
            out += ']';
            break;
        }
        case Value::Kind::Object: {
            out += '{';
            bool first = true;
            for (const auto& [key, member] : v.members()) {
                if (!first) out += ',';
                first = false;
                append_string(out, key);
                out += ':';
                append_value(out, member);
            }
            out += '}';
            break;
        }
    }
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

}  // namespace

class Parser {
public:
    Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

    Value parse_document() {
        skip_whitespace();
        Value v = parse_value(0);
        skip_whitespace();
        if (pos_ < text_.size()) error("unexpected text after the JSON value");
        return v;
    }

private:
    [[noreturn]] void error(std::string_view message) const { error_at(pos_, message); }

    [[noreturn]] void error_at(size_t at, std::string_view message) const {
        size_t line = 1;
        size_t column = 1;
        for (size_t i = 0; i < at && i < text_.size(); ++i) {
            if (text_[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        fail(source_, ": line ", line, ", column ", column, ": ", message);
    }

    bool at_end() const { return pos_ >= text_.size(); }
    char peek() const { return at_end() ? '\0' : text_[pos_]; }

    void skip_whitespace() {
        while (!at_end()) {
            char c = text_[pos_];
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
            ++pos_;
        }
    }

    bool consume_word(std::string_view word) {
        if (text_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    Value parse_value(int depth) {
        if (at_end()) error("expected a value, got the end of the input");
        char c = peek();
        switch (c) {
            case '{': return parse_object(depth + 1);
            case '[': return parse_array(depth + 1);
            case '"': return Value(parse_string());
            case 't':
                if (consume_word("true")) return Value(true);
                break;
            case 'f':
                if (consume_word("false")) return Value(false);
                break;
            case 'n':
                if (consume_word("null")) return Value();
                break;
            case 'N':
                if (consume_word("NaN")) return Value(std::numeric_limits<double>::quiet_NaN());
                break;
            case 'I':
                if (consume_word("Infinity")) return Value(std::numeric_limits<double>::infinity());
                break;
            default:
                if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
        }
        error("expected a value (object, array, string, number, true, false or null)");
    }

    Value parse_object(int depth) {
        if (depth > kMaxDepth) error(str_cat("nesting deeper than ", kMaxDepth, " levels"));
        ++pos_;  // '{'
        Value obj = Value::object();
        std::unordered_set<std::string> seen;
        skip_whitespace();
        if (peek() == '}') {
            ++pos_;
            return obj;
        }
        while (true) {
            skip_whitespace();
            if (peek() != '"') error("expected a string key in an object");
            size_t key_pos = pos_;
            std::string key = parse_string();
            if (!seen.insert(key).second) {
                error_at(key_pos, str_cat("duplicate key ", quote_for_message(key), " in an object"));
            }
            skip_whitespace();
            if (peek() != ':') error("expected ':' after a key in an object");
            ++pos_;
            skip_whitespace();
            Value member = parse_value(depth);
            obj.members_.emplace_back(std::move(key), std::move(member));
            skip_whitespace();
            char c = peek();
            if (c == ',') {
                ++pos_;
            } else if (c == '}') {
                ++pos_;
                return obj;
            } else {
                error("expected ',' or '}' in an object");
            }
        }
    }

    Value parse_array(int depth) {
        if (depth > kMaxDepth) error(str_cat("nesting deeper than ", kMaxDepth, " levels"));
        ++pos_;  // '['
        Value arr = Value::array();
        skip_whitespace();
        if (peek() == ']') {
            ++pos_;
            return arr;
        }
        while (true) {
            skip_whitespace();
            arr.items_.push_back(parse_value(depth));
            skip_whitespace();
            char c = peek();
            if (c == ',') {
                ++pos_;
            } else if (c == ']') {
                ++pos_;
                return arr;
            } else {
                error("expected ',' or ']' in an array");
            }
        }
    }

    uint32_t parse_hex4() {
        if (text_.size() - pos_ < 4) error("expected 4 hex digits after \\u");
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) {
            char c = text_[pos_];
            uint32_t digit;
            if (c >= '0' && c <= '9') {
                digit = static_cast<uint32_t>(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                digit = static_cast<uint32_t>(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                digit = static_cast<uint32_t>(c - 'A' + 10);
            } else {
                error("expected 4 hex digits after \\u");
            }
            v = v * 16 + digit;
            ++pos_;
        }
        return v;
    }

    std::string parse_string() {
        ++pos_;  // opening quote
        std::string out;
        while (true) {
            if (at_end()) error("unterminated string");
            unsigned char c = static_cast<unsigned char>(text_[pos_]);
            if (c == '"') {
                ++pos_;
                return out;
            }
            if (c < 0x20) error("control character in a string (must be escaped)");
            if (c != '\\') {
                out += static_cast<char>(c);
                ++pos_;
                continue;
            }
            size_t escape_pos = pos_;
            ++pos_;
            if (at_end()) error("unterminated string");
            char e = text_[pos_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    uint32_t cp = parse_hex4();
                    if (cp >= 0xDC00 && cp <= 0xDFFF) {
                        error_at(escape_pos, "unpaired low surrogate in a \\u escape");
                    }
                    if (cp >= 0xD800 && cp <= 0xDBFF) {
                        if (text_.substr(pos_, 2) != "\\u") {
                            error_at(escape_pos, "high surrogate not followed by a low surrogate");
                        }
                        pos_ += 2;
                        uint32_t low = parse_hex4();
                        if (low < 0xDC00 || low > 0xDFFF) {
                            error_at(escape_pos, "high surrogate not followed by a low surrogate");
                        }
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    }
                    append_utf8(out, cp);
                    break;
                }
                default: error_at(escape_pos, "invalid escape in a string");
            }
        }
    }

    static bool is_digit(char c) { return c >= '0' && c <= '9'; }

    Value parse_number() {
        size_t start = pos_;
        bool negative = false;
        if (peek() == '-') {
            negative = true;
            ++pos_;
            if (consume_word("Infinity")) return Value(-std::numeric_limits<double>::infinity());
        }
        size_t int_start = pos_;
        if (peek() == '0') {
            ++pos_;
        } else if (is_digit(peek())) {
            while (is_digit(peek())) ++pos_;
        } else {
            error("expected a digit in a number");
        }
        size_t int_end = pos_;
        bool integral = true;
        if (peek() == '.') {
            integral = false;
            ++pos_;
            if (!is_digit(peek())) error("expected a digit after the decimal point");
            while (is_digit(peek())) ++pos_;
        }
        size_t mantissa_end = pos_;
        int64_t exponent = 0;
        if (peek() == 'e' || peek() == 'E') {
            integral = false;
            ++pos_;
            bool exponent_negative = false;
            if (peek() == '+' || peek() == '-') {
                exponent_negative = peek() == '-';
                ++pos_;
            }
            if (!is_digit(peek())) error("expected a digit in the exponent");
            while (is_digit(peek())) {
                // Saturates: only the sign of a huge exponent matters.
                if (exponent < 100000) exponent = exponent * 10 + (text_[pos_] - '0');
                ++pos_;
            }
            if (exponent_negative) exponent = -exponent;
        }
        const char* first = text_.data() + start;
        const char* last = text_.data() + pos_;
        if (integral) {
            int64_t i = 0;
            auto [ptr, ec] = std::from_chars(first, last, i);
            if (ec == std::errc() && ptr == last) {
                // "-0" is the double -0.0, not the integer 0.
                if (!(negative && i == 0)) return Value(i);
            }
        }
        double d = 0;
        auto [ptr, ec] = std::from_chars(first, last, d);
        if (ec == std::errc::result_out_of_range) {
            // from_chars leaves the value alone on overflow and underflow; decide
            // which it was from the decimal magnitude, like strtod would.
            int64_t magnitude = 0;
            bool found = false;
            for (size_t i = int_start; i < mantissa_end && !found; ++i) {
                char c = text_[i];
                if (c == '.' || c == '0') continue;
                found = true;
                magnitude = i < int_end ? static_cast<int64_t>(int_end - i) - 1
                                        : -static_cast<int64_t>(i - int_end);
            }
            double big = magnitude + exponent >= 0 ? std::numeric_limits<double>::infinity() : 0.0;
            d = negative ? -big : big;
        } else if (ec != std::errc() || ptr != last) {
            error_at(start, "malformed number");
        }
        return Value(d);
    }

    std::string_view text_;
    std::string_view source_;
    size_t pos_ = 0;
};

const Value* Value::find(std::string_view key) const {
    if (kind_ != Kind::Object) return nullptr;
    for (const auto& [k, v] : members_) {
        if (k == key) return &v;
    }
    return nullptr;
}

std::string Value::describe() const {
    switch (kind_) {
        case Kind::Null: return "null";
        case Kind::Bool: return bool_ ? "true" : "false";
        case Kind::Number: return "number " + dump(*this);
        case Kind::String: return "string " + quote_for_message(string_);
        case Kind::Array: return "an array";
        case Kind::Object: return "an object";
    }
    return "?";
}

bool Value::as_bool(std::string_view what) const {
    require(kind_ == Kind::Bool, what, ": expected true or false, got ", describe());
    return bool_;
}

double Value::as_number(std::string_view what) const {
    if (kind_ == Kind::Number) return number_;
    if (kind_ == Kind::Object && members_.size() == 1 && members_[0].first == "__float__" &&
        members_[0].second.is_string()) {
        const std::string& s = members_[0].second.string_;
        if (s == "Infinity") return std::numeric_limits<double>::infinity();
        if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
        if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
        fail(what, ": expected \"Infinity\", \"-Infinity\" or \"NaN\" in __float__, got ",
             quote_for_message(s));
    }
    fail(what, ": expected a number, got ", describe());
}

int64_t Value::as_int(std::string_view what) const {
    require(kind_ == Kind::Number, what, ": expected an integer, got ", describe());
    if (exact_integer_) return integer_;
    require(std::isfinite(number_) && number_ == std::trunc(number_), what,
            ": expected an integer, got ", describe());
    // Integer literals that fit were stored exactly above, so a double at -2^63 came
    // from a literal below INT64_MIN that rounded up to it; both bounds are exclusive.
    constexpr double kTwo63 = 9223372036854775808.0;
    require(number_ > -kTwo63 && number_ < kTwo63, what, ": integer ", dump(*this),
            " is out of range (expected a 64-bit signed integer)");
    return static_cast<int64_t>(number_);
}

const std::string& Value::as_string(std::string_view what) const {
    require(kind_ == Kind::String, what, ": expected a string, got ", describe());
    return string_;
}

Value& Value::set(std::string key, Value value) {
    require(kind_ == Kind::Object, "json: set(\"", key, "\") on ", describe(), ", expected an object");
    for (auto& [k, v] : members_) {
        if (k == key) {
            v = std::move(value);
            return *this;
        }
    }
    members_.emplace_back(std::move(key), std::move(value));
    return *this;
}

Value& Value::push(Value value) {
    require(kind_ == Kind::Array, "json: push() on ", describe(), ", expected an array");
    items_.push_back(std::move(value));
    return *this;
}

Value parse(std::string_view text, std::string_view source_name) {
    return Parser(text, source_name).parse_document();
}

Value parse_file(const std::string& path) {
    MappedFile file = MappedFile::open(path);
    std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
    return parse(text, path);
}

std::string dump(const Value& value) {
    std::string out;
    append_value(out, value);
    return out;
}

}  // namespace duet::json
