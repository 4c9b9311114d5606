#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/split_regex.h"

#include <pcre2.h>

#include <algorithm>

#include "base/error.h"

namespace duet::text {

struct SplitRegex::Compiled {
    pcre2_code* code = nullptr;
    ~Compiled() { pcre2_code_free(code); }
};

SplitRegex::SplitRegex(const std::string& pattern, std::string_view what) : compiled_(std::make_unique<Compiled>()) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                    PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (compiled_->code == nullptr) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof(message));
        fail(what, ": cannot compile split regex at offset ", offset, ": ", reinterpret_cast<const char*>(message));
    }
    // JIT is an optimisation only; without it (unsupported platform) matching still works.
    pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

SplitRegex::~SplitRegex() = default;
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;

void SplitRegex::split(std::string_view text, std::vector<std::string_view>& out) const {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t gap_start = 0;
    size_t at = 0;
    while (at <= text.size()) {
        // The caller validated the UTF-8 once, so PCRE2 need not check it on every call.
        const int rc = pcre2_match(compiled_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) fail("split regex: matching failed with PCRE2 error ", rc);
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
        const size_t start = ov[0], end = ov[1];
        if (start > gap_start) out.push_back(text.substr(gap_start, start - gap_start));
        if (end > start) {
            out.push_back(text.substr(start, end - start));
            at = end;
        } else {
            // An empty match: step over one whole character, as HF's regex iterator does.
            if (start >= text.size()) break;
            at = start + 1;
            while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        }
        gap_start = std::max(gap_start, end);
    }
    if (gap_start < text.size()) out.push_back(text.substr(gap_start));
}

}  // namespace duet::text
