// The codec's weights by checkpoint name (fish-speech's module names), widened to f32 and laid out
// for the CPU layers. Weight-norm parametrisations (…parametrizations.weight.original0/1, or the
// older weight_g/weight_v) are folded at load: w = g · v / ‖v‖ over every dimension but the first.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "models/fish_codec/config.h"
#include "models/fish_codec/layers.h"
#include "models/weight_binder.h"

namespace duet::fish_codec {

struct EncoderBlock {
    std::array<ResidualUnit, 3> units;
    Snake snake;
    Conv downsample;
    bool has_transformer = false;
    Transformer transformer;
};

struct DecoderBlock {
    Snake snake;
    ConvTranspose upsample;
    std::array<ResidualUnit, 3> units;
};

struct Codebook {
    Linear in_proj, out_proj;      // latent → codebook_dim → latent
    int64_t size = 0, dim = 0;
    std::vector<float> entries;     // [size, dim]
    std::vector<float> normalized;  // entries / ‖entry‖, for the nearest-code search
};

// Each normalised entry's squared norm [size], the |c|² of the nearest-code search, summed in the
// order every encoder (CPU and GPU) uses so that their distances agree.
std::vector<float> code_squares(const Codebook& cb);

struct Resample {
    Conv down;  // quantizer.downsample: conv with kernel = stride = factor
    ConvTranspose up;
    ConvNeXt block;
};

struct Weights {
    // A frame's codebook `book`: the semantic one (0), then the residual ones.
    const Codebook& codebook(int64_t book) const {
        return book == 0 ? semantic[0] : residual[static_cast<size_t>(book - 1)];
    }

    Conv encoder_in;
    std::vector<EncoderBlock> encoder_blocks;
    Snake encoder_snake;
    Conv encoder_out;

    std::vector<Codebook> semantic;  // one
    std::vector<Codebook> residual;
    std::vector<Resample> downsample;  // in the order applied when encoding
    std::vector<Resample> upsample;    // in the order applied when decoding
    Transformer pre_module, post_module;

    Conv decoder_in;
    std::vector<DecoderBlock> decoder_blocks;
    Snake decoder_snake;
    Conv decoder_out;
};

// Every problem (missing tensor, wrong shape) is reported together, naming `source`.
Weights bind_weights(const Config& config, const TensorLookup& lookup, const std::string& source);

}  // namespace duet::fish_codec
