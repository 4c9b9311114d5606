// A tiny random Nemotron 3.5 Transcribe directory for tests and demonstrations: a real (tiny)
// perception checkpoint, a random Nemotron-H LLM sized to it, and a tokenizer. Its text is noise, but
// every stage of the transcription loop runs at its real shapes.
#pragma once

#include <cstdint>
#include <string>

#include "base/thread_pool.h"
#include "models/nemotron_h/config.h"

namespace duet::transcribe {

// The `tiny` Nemotron-H shape with `hidden` as its width and `vocab` ids.
nemotron_h::Config tiny_llm_config(int64_t hidden, int64_t vocab);

// Writes `out_dir` (created if needed): config.json with the `perception` object of
// `perception_dir`/config.json and the LLM's config under `llm_config`; model.safetensors with
// `perception_dir`'s perception.* tensors and a random LLM (with its MTP draft module) under `llm.`;
// and a copy of `tokenizer_path` as tokenizer.json. The LLM's hidden size is the projector's width and
// its vocabulary covers the tokenizer's ids.
void write_tiny_transcribe_model(const std::string& out_dir, const std::string& perception_dir,
                                 const std::string& tokenizer_path, uint64_t seed, ThreadPool* pool);

}  // namespace duet::transcribe
