#!/usr/bin/env python3
"""The peer for `duet bench --device cuda`: the same model shape with random bf16 weights in HuggingFace
transformers on the same GPU, batch-1 greedy decode after a 512-token prompt, printing the same JSON
fields as duet. Usage: bench/peer_transformers.py --arch nemotron_h --preset nano-8l|nano."""
import argparse
import json
import time

import torch

# The shapes of duet's presets (src/models/nemotron_h/presets.cpp).
NANO = dict(
    hidden_size=2688, vocab_size=131072, layer_norm_epsilon=1e-5, mamba_num_heads=64, mamba_head_dim=64,
    n_groups=8, ssm_state_size=128, conv_kernel=4, num_attention_heads=32, num_key_value_heads=2, head_dim=128,
    n_routed_experts=128, num_experts_per_tok=6, moe_intermediate_size=1856,
    moe_shared_expert_intermediate_size=3712, routed_scaling_factor=2.5, norm_topk_prob=True,
    intermediate_size=1856, n_group=1, topk_group=1)
PATTERNS = {"nano-8l": "MEM*EMEM", "nano": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"}
KINDS = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}


def nemotron_config(preset):
    from transformers import NemotronHConfig
    kinds = [KINDS[c] for c in PATTERNS[preset]]
    fields = dict(NANO, num_hidden_layers=len(kinds), layers_block_type=kinds)
    try:
        return NemotronHConfig(**fields)
    except TypeError:  # older releases name the pattern instead
        fields.pop("layers_block_type")
        return NemotronHConfig(**fields, hybrid_override_pattern=PATTERNS[preset])


def active_weight_bytes(model, config):
    """Weights one decode token reads: all but the unchosen experts and all but one embedding row."""
    total = expert = 0
    for name, p in model.named_parameters():
        size = p.numel() * p.element_size()
        total += size
        if ".experts." in name:
            expert += size
    embed = model.get_input_embeddings().weight
    k, e = config.num_experts_per_tok, config.n_routed_experts
    return total - expert * (1 - k / e) - embed.numel() * embed.element_size() + embed.shape[1] * embed.element_size()


def copy_bandwidth_gbs(size=1 << 30):
    a = torch.empty(size, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    best = 0.0
    for _ in range(10):
        torch.cuda.synchronize()
        t = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize()
        best = max(best, 2 * size / (time.perf_counter() - t) / 1e9)
    return best


@torch.inference_mode()
def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="nemotron_h", choices=["nemotron_h"])
    parser.add_argument("--preset", default="nano-8l", choices=sorted(PATTERNS))
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--decode", type=int, default=16)
    args = parser.parse_args()

    import transformers
    from transformers import AutoModelForCausalLM
    config = nemotron_config(args.preset)
    start = time.perf_counter()
    torch.manual_seed(1)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16, trust_remote_code=False)
    model.eval()
    load_s = time.perf_counter() - start
    ids = torch.randint(0, config.vocab_size, (1, args.prompt), device="cuda")

    def prefill():
        return model(ids, use_cache=True)

    prefill()  # warm-up: kernels, caches
    torch.cuda.synchronize()
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        out = prefill()
        torch.cuda.synchronize()
        runs.append(time.perf_counter() - t)
    prefill_s = sorted(runs)[1]

    past = out.past_key_values
    token = out.logits[:, -1:].argmax(-1)
    steps = []
    for _ in range(args.decode):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = model(token, past_key_values=past, use_cache=True)
        past = out.past_key_values
        token = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        steps.append(time.perf_counter() - t)
    decode_s = sum(steps[1:]) / (len(steps) - 1)
    bytes_per_token = active_weight_bytes(model, config)
    copy_gbs = copy_bandwidth_gbs()
    decode_gbs = bytes_per_token / decode_s / 1e9
    print(json.dumps({
        "arch": args.arch, "weights": "random:" + args.preset, "backend": "transformers " + transformers.__version__,
        "load_s": load_s, "prompt_tokens": args.prompt, "prefill_tokens_per_s": args.prompt / prefill_s,
        "decode_tokens": args.decode, "decode_ms_per_token": decode_s * 1e3, "decode_tokens_per_s": 1 / decode_s,
        "decode_weight_bytes_per_token": int(bytes_per_token), "decode_gbs": decode_gbs, "memory_copy_gbs": copy_gbs,
        "decode_fraction_of_copy": decode_gbs / copy_gbs}))


if __name__ == "__main__":
    main()
