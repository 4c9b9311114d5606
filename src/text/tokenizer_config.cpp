#include "text/tokenizer_config.h"

#include "base/error.h"

namespace duet::text::config {

namespace {

std::string type_of(const json::Value& v, const std::string& path, std::string_view part) {
    const json::Value* type = v.find("type");
    require(type != nullptr, path, ": ", part, " has no \"type\"");
    return type->as_string(str_cat(path, ": ", part, ".type"));
}

// A boolean field that may be absent (then `fallback`, HF's default).
bool flag_or(const json::Value& v, std::string_view key, bool fallback, const std::string& what) {
    const json::Value* f = v.find(key);
    return f == nullptr || f->is_null() ? fallback : f->as_bool(str_cat(what, ".", key));
}

// A field that must be null, absent or an empty string for this tokenizer to be faithful.
void require_unset(const json::Value& v, std::string_view key, const std::string& what) {
    const json::Value* f = v.find(key);
    const bool unset = f == nullptr || f->is_null() || (f->is_string() && f->string().empty());
    require(unset, what, ".", key, " = ", f ? f->describe() : "", " is not supported");
}

// GPT-2's pre-tokenizer regex, which ByteLevel applies itself when use_regex is true.
const char* kGpt2Pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

}  // namespace

bool read_normalizer(const json::Value* normalizer, const std::string& path) {
    if (normalizer == nullptr || normalizer->is_null()) return false;
    const std::string type = type_of(*normalizer, path, "normalizer");
    if (type == "NFC") return true;
    if (type == "Sequence") {
        const json::Value* parts = normalizer->find("normalizers");
        require(parts != nullptr, path, ": normalizer Sequence has no \"normalizers\"");
        bool nfc = false;
        for (const json::Value& part : parts->items()) nfc |= read_normalizer(&part, path);
        return nfc;
    }
    fail(path, ": unsupported normalizer type '", type, "' (supported: NFC, Sequence)");
}

std::vector<std::string> read_pre_tokenizer(const json::Value* pre_tokenizer, const std::string& path) {
    require(pre_tokenizer != nullptr && !pre_tokenizer->is_null(), path,
            ": no pre_tokenizer; a byte-level BPE tokenizer needs a ByteLevel pre-tokenizer");
    std::vector<const json::Value*> steps;
    const std::string top = type_of(*pre_tokenizer, path, "pre_tokenizer");
    if (top == "Sequence") {
        const json::Value* parts = pre_tokenizer->find("pretokenizers");
        require(parts != nullptr, path, ": pre_tokenizer Sequence has no \"pretokenizers\"");
        for (const json::Value& part : parts->items()) steps.push_back(&part);
    } else {
        steps.push_back(pre_tokenizer);
    }
    std::vector<std::string> patterns;
    bool byte_level = false;
    for (const json::Value* step : steps) {
        const std::string type = type_of(*step, path, "pre_tokenizer");
        const std::string what = str_cat(path, ": pre_tokenizer ", type);
        // Splitting after the byte mapping would see mapped characters, not the text.
        require(!byte_level, what, " after ByteLevel is not supported (ByteLevel must come last)");
        if (type == "Split") {
            const json::Value* pattern = step->find("pattern");
            const json::Value* regex = pattern ? pattern->find("Regex") : nullptr;
            require(regex != nullptr, what, ": only {\"Regex\": ...} patterns are supported");
            const json::Value* behavior = step->find("behavior");
            const std::string b = behavior ? behavior->as_string(what + ".behavior") : "";
            require(b == "Isolated", what, ": behavior '", b, "' is not supported (only Isolated)");
            require(!flag_or(*step, "invert", false, what), what, ": invert = true is not supported");
            patterns.push_back(regex->as_string(what + ".pattern.Regex"));
        } else if (type == "ByteLevel") {
            require(!flag_or(*step, "add_prefix_space", true, what), what, ": add_prefix_space = true is not supported");
            if (flag_or(*step, "use_regex", true, what)) patterns.push_back(kGpt2Pattern);
            byte_level = true;
        } else {
            fail(path, ": unsupported pre_tokenizer type '", type, "' (supported: Sequence, Split, ByteLevel)");
        }
    }
    require(byte_level, path, ": the pre_tokenizer has no ByteLevel step; only byte-level BPE is supported");
    return patterns;
}

void read_decoder(const json::Value* decoder, const std::string& path) {
    require(decoder != nullptr && !decoder->is_null(), path, ": no decoder; only ByteLevel is supported");
    const std::string type = type_of(*decoder, path, "decoder");
    require(type == "ByteLevel", path, ": unsupported decoder type '", type, "' (supported: ByteLevel)");
}

BpeModel read_model(const json::Value* model, const std::string& path) {
    require(model != nullptr && model->is_object(), path, ": no model");
    const std::string type = type_of(*model, path, "model");
    require(type == "BPE", path, ": unsupported model type '", type, "' (supported: BPE)");
    const std::string what = path + ": model";
    require(!flag_or(*model, "byte_fallback", false, what), what, ".byte_fallback = true is not supported");
    for (const char* key : {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix"}) {
        require_unset(*model, key, what);
    }
    BpeModel out;
    out.ignore_merges = flag_or(*model, "ignore_merges", false, what);
    const json::Value* vocab = model->find("vocab");
    require(vocab != nullptr && vocab->is_object(), what, ".vocab is missing or not an object");
    out.vocab.reserve(vocab->members().size());
    for (const auto& [token, id] : vocab->members()) {
        const int64_t value = id.as_int(str_cat(what, ".vocab[\"", token, "\"]"));
        require(value >= 0 && value <= INT32_MAX, what, ".vocab[\"", token, "\"] = ", value, " is out of range");
        out.vocab.emplace(token, static_cast<int32_t>(value));
    }
    const json::Value* merges = model->find("merges");
    require(merges != nullptr && merges->is_array(), what, ".merges is missing or not an array");
    for (size_t i = 0; i < merges->items().size(); ++i) {
        const json::Value& m = merges->items()[i];
        const std::string item = str_cat(what, ".merges[", i, "]");
        if (m.is_string()) {
            // Old format "a b": tokens never contain a space (it is mapped to 'Ġ').
            const std::string& s = m.string();
            const size_t space = s.find(' ');
            require(space != std::string::npos && s.find(' ', space + 1) == std::string::npos, item,
                    ": expected \"left right\"");
            out.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
        } else {
            require(m.is_array() && m.items().size() == 2, item, ": expected a string or a pair of strings");
            out.merges.emplace_back(m.items()[0].as_string(item), m.items()[1].as_string(item));
        }
    }
    return out;
}

std::vector<AddedToken> read_added_tokens(const json::Value* added, const std::string& path) {
    std::vector<AddedToken> out;
    if (added == nullptr || added->is_null()) return out;
    for (size_t i = 0; i < added->items().size(); ++i) {
        const json::Value& t = added->items()[i];
        const std::string what = str_cat(path, ": added_tokens[", i, "]");
        AddedToken token;
        const int64_t id = t.find("id") ? t.find("id")->as_int(what + ".id") : -1;
        require(id >= 0 && id <= INT32_MAX, what, ": missing or out-of-range id");
        token.id = static_cast<int32_t>(id);
        require(t.find("content") != nullptr, what, ": no content");
        token.content = t.find("content")->as_string(what + ".content");
        require(!token.content.empty(), what, ": empty content");
        token.special = flag_or(t, "special", false, what);
        // These change where a token may match; only the plain verbatim match is implemented.
        for (const char* key : {"single_word", "lstrip", "rstrip", "normalized"}) {
            require(!flag_or(t, key, false, what), what, " ('", token.content, "'): ", key,
                    " = true is not supported");
        }
        out.push_back(std::move(token));
    }
    return out;
}

}  // namespace duet::text::config
