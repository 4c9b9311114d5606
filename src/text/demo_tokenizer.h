// A built-in byte-level tokenizer for the demo and for tests of whole text-to-speech runs: one token
// per byte (no merges), then the ChatML and Drama 3 structural tokens, then `semantic_count` semantic
// tokens. It is what a tiny random Drama 3 model speaks through; it knows no words.
#pragma once

#include <cstdint>
#include <string>

#include "base/json.h"

namespace duet::text {

struct DemoVocabulary {
    int32_t im_end = 0;          // the EOS of a spoken turn
    int32_t semantic_start = 0;  // <|semantic:0|>
    int32_t semantic_count = 0;
    int32_t size = 0;            // every id is below this
};

DemoVocabulary demo_vocabulary(int32_t semantic_count);
// tokenizer.json's content for that vocabulary.
json::Value demo_tokenizer_json(int32_t semantic_count);

}  // namespace duet::text
