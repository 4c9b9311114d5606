#include "models/transcribe/transcriber.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "base/half.h"
#include "models/nemotron_h/speculative.h"
#include "text/unicode.h"

namespace duet::transcribe {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string one_decimal(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", value);
    return text;
}

int32_t required_token(const text::Tokenizer& tokenizer, std::string_view token, const std::string& source) {
    const auto id = tokenizer.token_id(token);
    require(id.has_value(), source, ": the tokenizer has no ", token, " token (expected a Transcribe tokenizer)");
    return *id;
}

}  // namespace

std::vector<nemotron_h::EmbeddingPatch> PreparedAudio::patches(int64_t hidden) const {
    std::vector<nemotron_h::EmbeddingPatch> out;
    size_t row = 0;
    for (const text::AudioSpan& span : prompt.audio) {
        out.push_back({static_cast<int64_t>(span.begin), static_cast<int64_t>(span.count),
                       audio_rows.data() + row * static_cast<size_t>(hidden)});
        row += span.count;
    }
    return out;
}

Transcriber Transcriber::load(const std::string& dir) {
    Perception perception = Perception::load(dir);
    const std::string tokenizer_path = (std::filesystem::path(dir) / "tokenizer.json").string();
    require(std::filesystem::exists(tokenizer_path), dir,
            ": no tokenizer.json (expected a Transcribe directory: config.json, the checkpoint, tokenizer.json)");
    nemotron_h::Model llm = nemotron_h::Model::load(dir);
    return Transcriber(std::move(perception), std::move(llm), text::Tokenizer::load(tokenizer_path), dir);
}

Transcriber::Transcriber(Perception perception, nemotron_h::Model llm, std::unique_ptr<text::Tokenizer> tokenizer,
                         const std::string& source)
    : perception_(std::move(perception)), llm_(std::move(llm)), tokenizer_(std::move(tokenizer)) {
    const int64_t width = perception_.config().output_dim, hidden = llm_.config().hidden;
    require(width == hidden, source, ": the perception's projector writes rows of width ", width,
            " (perception output_dim) but the LLM's hidden size is ", hidden);
    end_id_ = required_token(*tokenizer_, "<|im_end|>", source);
    for (const int32_t id : {end_id_, required_token(*tokenizer_, "<|audio|>", source)}) {
        require(id < llm_.vocab(), source, ": the tokenizer's structural token id ", id,
                " is outside the LLM's vocabulary of ", llm_.vocab());
    }
}

PreparedAudio Transcriber::prepare(const std::vector<float>& waveform_16k, std::string_view instruction,
                                   ThreadPool* pool) const {
    PreparedAudio out;
    out.samples = static_cast<int64_t>(waveform_16k.size());
    const int64_t tokens = perception_.audio_tokens(out.samples);
    require(tokens > 0, "the recording has ", out.samples, " samples, shorter than one 80 ms audio token (",
            perception_.config().mel.hop * perception_.config().asr.stacking, " samples at 16 kHz)");
    const Clock::time_point start = Clock::now();
    const PerceptionOutput perceived = perception_.perceive(waveform_16k, pool);
    out.perception_seconds = seconds_since(start);

    const size_t counts[1] = {static_cast<size_t>(perceived.audio_tokens)};
    out.prompt = text::build_transcribe_prompt(*tokenizer_, instruction.empty() ? text::default_transcribe_instruction()
                                                                                 : instruction,
                                               counts);
    // The checkpoint's LLM was trained on bf16 inputs: the rows are rounded as it would receive them.
    const std::span<const float> rows = perceived.audio_embeddings();
    out.audio_rows.resize(rows.size());
    std::transform(rows.begin(), rows.end(), out.audio_rows.begin(),
                   [](float v) { return bf16_to_f32(f32_to_bf16(v)); });
    return out;
}

Transcription Transcriber::decode(const PreparedAudio& audio, Backend& backend,
                                  const TranscribeOptions& options) const {
    Transcription out;
    out.samples = audio.samples;
    out.audio_tokens = static_cast<int64_t>(audio.audio_rows.size()) / llm_.config().hidden;
    out.prompt_tokens = static_cast<int64_t>(audio.prompt.ids.size());
    out.seconds.perception = audio.perception_seconds;

    const int64_t capacity = options.context > 0 ? options.context : out.prompt_tokens + options.max_new_tokens;
    require(out.prompt_tokens < capacity, "the prompt needs ", out.prompt_tokens, " positions (",
            out.audio_tokens, " audio tokens) but the context holds ", capacity);
    const int64_t max_new = std::min(options.max_new_tokens, capacity - out.prompt_tokens);
    const std::vector<nemotron_h::EmbeddingPatch> patches = audio.patches(llm_.config().hidden);
    const nemotron_h::DecodeRequest request{audio.prompt.ids, patches, max_new, end_id_};

    nemotron_h::State state = llm_.new_state(backend, capacity);
    out.speculative = options.speculative && llm_.has_draft();
    const Clock::time_point start = Clock::now();
    GreedyOutput generated;
    if (out.speculative) {
        nemotron_h::MtpDrafter drafter(llm_);
        nemotron_h::SpeculativeStats stats;
        generated = nemotron_h::speculative_greedy(llm_, backend, state, request, drafter, &stats);
        out.draft_acceptance = stats.acceptance();
    } else {
        generated = nemotron_h::greedy_decode(llm_, backend, state, request);
    }
    out.seconds.decode = seconds_since(start);

    out.ids = std::move(generated.ids);
    out.finished = !out.ids.empty() && out.ids.back() == end_id_;
    if (out.finished) out.ids.pop_back();
    const double emitted = static_cast<double>(out.ids.size() + (out.finished ? 1 : 0));
    out.seconds.tokens_per_second = out.seconds.decode > 0.0 ? emitted / out.seconds.decode : 0.0;
    // Ids cut at the token limit may end inside a character; the text stays valid UTF-8.
    out.text = text::replace_invalid_utf8(tokenizer_->decode(out.ids));
    return out;
}

Transcription Transcriber::transcribe(const std::vector<float>& waveform_16k, Backend& backend, ThreadPool* pool,
                                      const TranscribeOptions& options) const {
    if (options.progress) {
        options.progress(str_cat("perceiving ", one_decimal(static_cast<double>(waveform_16k.size()) /
                                             static_cast<double>(perception_.config().mel.sample_rate)),
                                 " s of audio"));
    }
    const PreparedAudio audio = prepare(waveform_16k, options.instruction, pool);
    if (options.progress) {
        options.progress(str_cat(audio.prompt.audio.front().count, " audio tokens in ",
                                 one_decimal(audio.perception_seconds), " s; decoding (up to ",
                                 options.max_new_tokens, " tokens)"));
    }
    return decode(audio, backend, options);
}

}  // namespace duet::transcribe
