// Nemotron 3.5 Transcribe end to end: one recording → perception → ChatML prompt with the audio
// placeholders expanded → the projected rows (rounded to bf16) over those placeholders → greedy
// decoding by the Nemotron-H LLM (drafted by its MTP module when it has one) until `<|im_end|>` →
// detokenised text, `<spk:N>` tags kept.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "models/nemotron_h/model.h"
#include "models/transcribe/perception.h"
#include "text/tokenizer.h"
#include "text/transcribe_prompt.h"

namespace duet {
class ThreadPool;
}

namespace duet::transcribe {

struct TranscribeOptions {
    std::string instruction;      // empty: text::default_transcribe_instruction()
    bool speculative = true;      // draft with the MTP module, when the LLM has one
    int64_t max_new_tokens = 2048;
    int64_t context = 0;          // the LLM state's capacity; 0: the prompt plus max_new_tokens
    // Called with a short line as each stage of a recording starts (progress for long audio).
    std::function<void(std::string_view)> progress;
};

// A recording made ready for the LLM: its prompt and the rows that go over its placeholders.
struct PreparedAudio {
    int64_t samples = 0;
    text::TranscribePrompt prompt;
    std::vector<float> audio_rows;  // [audio tokens, LM hidden], each value rounded to bf16
    double perception_seconds = 0.0;

    // The rows as embedding patches over prompt.audio; they point into audio_rows.
    std::vector<nemotron_h::EmbeddingPatch> patches(int64_t hidden) const;
};

struct TranscriptionTimings {
    double perception = 0.0;  // seconds
    double decode = 0.0;      // seconds of prefill and decoding
    double tokens_per_second = 0.0;  // generated tokens over the decode seconds
};

struct Transcription {
    std::string text;              // valid UTF-8 (U+FFFD for stray bytes)
    std::vector<int32_t> ids;      // the generated ids, `<|im_end|>` left out
    bool finished = false;         // ended at `<|im_end|>` rather than at the token limit
    int64_t samples = 0;
    int64_t audio_tokens = 0;
    int64_t prompt_tokens = 0;
    bool speculative = false;      // whether the MTP draft was used
    double draft_acceptance = 0.0; // drafts the LLM kept, of those it checked
    TranscriptionTimings seconds;
};

class Transcriber {
public:
    // A Transcribe directory: config.json with `perception` and `llm_config`, the checkpoint with
    // `perception.*` and the LLM (under `llm.` or in either Nemotron-H layout), and tokenizer.json.
    static Transcriber load(const std::string& dir);
    // Checks that the projector writes rows of the LLM's width and that the tokenizer's structural
    // tokens fit the LLM's vocabulary; `source` names the model in errors.
    Transcriber(Perception perception, nemotron_h::Model llm, std::unique_ptr<text::Tokenizer> tokenizer,
                const std::string& source);

    const Perception& perception() const { return perception_; }
    // Perception::run_on_device.
    void run_on_device(std::shared_ptr<PerceptionDevice> device) {
        perception_.run_on_device(std::move(device));
    }
    const nemotron_h::Model& llm() const { return llm_; }
    const text::Tokenizer& tokenizer() const { return *tokenizer_; }
    int32_t end_id() const { return end_id_; }

    // Perceives 16 kHz mono samples and builds the prompt around them.
    PreparedAudio prepare(const std::vector<float>& waveform_16k, std::string_view instruction,
                          ThreadPool* pool) const;
    // Decodes a prepared recording.
    Transcription decode(const PreparedAudio& audio, Backend& backend, const TranscribeOptions& options) const;
    // prepare, then decode.
    Transcription transcribe(const std::vector<float>& waveform_16k, Backend& backend, ThreadPool* pool,
                             const TranscribeOptions& options) const;

private:
    Perception perception_;
    nemotron_h::Model llm_;
    std::unique_ptr<text::Tokenizer> tokenizer_;
    int32_t end_id_ = -1;
};

}  // namespace duet::transcribe
