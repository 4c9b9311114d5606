// duet bench --arch product_chain --device cuda: what it costs to hand one product's result to the
// next. A decode step is a few hundred dependent kernels; this times chains of dependent bf16
// products of 8, 16 and 32 MB, each handed over in the ways ProductChain offers, and gives each
// product's time beyond its bytes at the measured copy bandwidth: the price of one hand-over. One
// JSON line.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "cli/bench_support.h"
#include "cli/commands.h"

#ifdef DUET_HAVE_CUDA
#include "kernels/cuda/bandwidth.h"
#include "kernels/cuda/product_chain.h"
#endif

namespace duet::cli {

int bench_product_chain(const Args& args) {
    Runtime rt(args);
    if (rt.backend->name() != "cuda") throw UsageError{"--arch product_chain needs --device cuda"};
#ifdef DUET_HAVE_CUDA
    const int64_t products = args.integer_or("--products", 64, 2, 4096);
    const int repeats = 20;
    const int rounds = 8;  // each way first in two of them
    const size_t bandwidth_bytes = static_cast<size_t>(args.integer_or("--bandwidth-mib", 1024, 64, 1 << 20)) << 20;
    const double copy_gbs = cuda::measure_device_copy_bandwidth_gbs(bandwidth_bytes);

    json::Value out = json::Value::object();
    out.set("arch", json::Value(std::string("product_chain")));
    add_runtime_figures(out, rt);
    out.set("products", json::Value(products));
    out.set("memory_copy_gbs", json::Value(copy_gbs));
    json::Value chains = json::Value::array();
    // [rows, cols] then [cols, rows]: 2048 columns as Drama 3's backbone, rows to 8, 16 and 32 MB.
    for (const int64_t rows : {2048, 4096, 8192}) {
        const int64_t cols = 2048;
        cuda::ProductChain chain(rows, cols, products, 1);
        const double bytes = static_cast<double>(chain.weight_bytes_per_product());
        const double floor_us = bytes / (copy_gbs * 1e3);
        json::Value entry = json::Value::object();
        entry.set("weight_mb", json::Value(bytes / 1e6));
        entry.set("floor_us", json::Value(floor_us));
        // The ways take turns, each round starting with the next one, so that none is favoured by
        // what runs before it (clocks settling after the resident kernel's polling, the weights
        // just written); each way's figure is the median over the rounds.
        std::vector<cuda::ChainHandOver> ways;
        for (cuda::ChainHandOver way : cuda::kChainHandOvers) {
            if (cuda::ProductChain::available(way)) ways.push_back(way);
        }
        std::vector<std::vector<double>> rounds_us(ways.size());
        for (int round = 0; round < rounds; ++round) {
            for (size_t turn = 0; turn < ways.size(); ++turn) {
                const size_t i = (turn + static_cast<size_t>(round)) % ways.size();
                rounds_us[i].push_back(chain.median_pass_us(ways[i], repeats));
            }
        }
        for (size_t i = 0; i < ways.size(); ++i) {
            json::Value by_round = json::Value::array();  // in the order run, µs a product
            for (double us : rounds_us[i]) by_round.push(json::Value(us / static_cast<double>(products)));
            std::sort(rounds_us[i].begin(), rounds_us[i].end());
            const double product_us = rounds_us[i][rounds_us[i].size() / 2] / static_cast<double>(products);
            const cuda::ChainHandOver way = ways[i];
            json::Value figures = json::Value::object();
            figures.set("us_per_product_by_round", std::move(by_round));
            figures.set("us_per_product", json::Value(product_us));
            figures.set("us_beyond_bytes", json::Value(product_us - floor_us));
            figures.set("fraction_of_copy", json::Value(floor_us / product_us));
            entry.set(cuda::hand_over_name(way), std::move(figures));
        }
        chains.push(std::move(entry));
    }
    out.set("chains", std::move(chains));
    std::printf("%s\n", json::dump(out).c_str());
    return 0;
#else
    (void)args;
    return 1;
#endif
}

}  // namespace duet::cli
