// Drama 3 models and prompts made from the tiny fixture, for the speaker's tests on either backend.
#pragma once

#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "base/half.h"
#include "models/drama3/config.h"
#include "models/drama3/model.h"
#include "models/tensor_set.h"
#include "test_support.h"
#include "text/frame_rows.h"

namespace duet::testing {

// The fixture's model with the EOS row of its LM head made `times` the row of token 222, the token
// greedy decoding picks first and sampling picks often: at 50 EOS wins the first frame; at about 1
// sampled runs end in EOS after a few frames.
inline drama3::Model drama3_preferring_eos(float times) {
    const Checkpoint weights = Checkpoint::open(fixture_dir("drama3_tiny"));
    auto tensors = std::make_shared<TensorSet>();
    for (const TensorEntry* t : weights.all()) std::memcpy(tensors->add(t->name, t->dtype, t->shape), t->data, t->nbytes);
    const drama3::Config config = drama3::load_config(fixture_dir("drama3_tiny") + "/config.json");
    const int64_t hidden = config.backbone.hidden, often_picked = 222;
    auto* head = reinterpret_cast<uint16_t*>(const_cast<uint8_t*>(tensors->find("lm_head.weight")->data));
    for (int64_t i = 0; i < hidden; ++i) {
        head[config.eos * hidden + i] = f32_to_bf16(times * bf16_to_f32(head[often_picked * hidden + i]));
    }
    return drama3::Model::from_tensors(config, tensors);
}

// Frames [n, width] as rows.
inline text::FrameRows drama3_frame_rows(const drama3::Config& config, std::span<const int32_t> values) {
    text::FrameRows rows(static_cast<int>(config.tower.num_codebooks));
    for (size_t r = 0; r < values.size() / rows.width(); ++r) {
        rows.push_row(values.subspan(r * rows.width(), rows.width()));
    }
    return rows;
}

// The fixture's prompt frames as rows.
inline text::FrameRows drama3_prompt_rows(const drama3::Config& config) {
    const Checkpoint ref = Checkpoint::open(fixture_dir("drama3_tiny") + "/expected.safetensors");
    return drama3_frame_rows(config, read_i32(ref.get("prompt_frames")));
}

}  // namespace duet::testing
