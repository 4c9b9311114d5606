#include "models/drama3/presets.h"

#include "base/error.h"
#include "models/qwen35_moe/presets.h"
#include "text/demo_tokenizer.h"

namespace duet::drama3 {

namespace {

// ASSUMED where drama3.md gives no figure: the tower's widths (16 query / 4 key-value heads of 128,
// SwiGLU 6144), a 4096-code semantic codebook (the codec's) shared as the codebook size, every
// codebook summed into the backbone row as S2 Pro does, and where the semantic tokens sit in the
// vocabulary. Confirmed: 4 shared + 9 per-codebook layers, RoPE on 64 dims with base 1e7.
Config a3b(int64_t layers) {
    Config c;
    c.backbone = qwen35_moe::preset_config(layers == 40 ? "a3b" : "a3b-8l");
    c.semantic_start = 151678;
    c.semantic_end = c.semantic_start + 4095;
    c.eos = 151645;
    TowerConfig& t = c.tower;
    t.dim = c.backbone.hidden;
    t.heads = 16;
    t.kv_heads = 4;
    t.head_dim = 128;
    t.inter = 6144;
    t.norm_eps = 1e-6f;
    t.num_codebooks = 10;
    t.codebook_size = 4096;
    t.shared_layers = 4;
    t.rope_theta = 1e7;
    t.rotary_fraction = 0.5;
    t.backbone_codebooks = 10;
    return c;
}

Config tiny() {
    constexpr int32_t kSemantic = 64;
    const text::DemoVocabulary vocab = text::demo_vocabulary(kSemantic);
    Config c;
    c.backbone = qwen35_moe::preset_config("tiny");
    c.backbone.layers = qwen35_moe::default_layer_kinds(4, 4);
    c.backbone.vocab = vocab.size;
    c.semantic_start = vocab.semantic_start;
    c.semantic_end = vocab.semantic_start + kSemantic - 1;
    c.eos = vocab.im_end;
    TowerConfig& t = c.tower;
    t.dim = c.backbone.hidden;
    t.heads = 4;
    t.kv_heads = 2;
    t.head_dim = 16;
    t.inter = 96;
    // The tiny Fish codec's codebooks (fish_codec::tiny_config: a semantic one and 3 residual ones).
    t.num_codebooks = 4;
    t.codebook_size = kSemantic;
    t.shared_layers = 4;
    t.rope_theta = 1e7;
    t.rotary_fraction = 0.5;
    t.backbone_codebooks = 2;
    return c;
}

}  // namespace

std::vector<std::string_view> preset_names() { return {"tiny", "a3b-8l", "a3b"}; }

Config preset_config(std::string_view name) {
    Config c;
    if (name == "tiny") {
        c = tiny();
    } else if (name == "a3b-8l") {
        c = a3b(8);
    } else if (name == "a3b") {
        c = a3b(40);
    } else {
        std::string names;
        for (std::string_view known : preset_names()) names += str_cat(names.empty() ? "" : ", ", known);
        fail("unknown drama3 preset '", name, "', expected one of ", names);
    }
    c.validate(str_cat("drama3 preset ", name));
    return c;
}

}  // namespace duet::drama3
