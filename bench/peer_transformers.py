#!/usr/bin/env python3
"""The peer for `duet bench --device cuda`: the same model shape with random bf16 weights in HuggingFace
transformers (PyTorch) on the same GPU, batch 1, printing the same JSON fields as duet.

How to run it (on a machine with a CUDA GPU, torch and transformers 5.x; nothing is downloaded):

    python3 bench/peer_transformers.py --arch nemotron_h --preset nano-8l   # or nano
    python3 bench/peer_transformers.py --arch drama3 --preset a3b-8l        # or a3b (about 72 GB of weights)

nemotron_h: greedy decode after a 512-token prompt, as `duet bench --arch nemotron_h --random-weights`.

drama3: as `duet bench --arch drama3 --random-weights`. The backbone is transformers' Qwen3.5-MoE decoder
(Qwen3_5MoeForCausalLM, else Qwen3-Next of the same family), the codebook tower, candidate head and sampling
are plain PyTorch here. The prompt is text rows fed through the backbone with the tower teacher-forced over
them; a frame is the candidate head on the last hidden state, top-k 30 / top-p 0.9 sampling, the 13 tower
layers with a code drawn after each head, and the frame's row fed back through the backbone. `--mode auto`
(the default) tries a static cache and torch.compile(mode="reduce-overhead") for the backbone step and the
tower, and falls back to transformers' dynamic cache and eager PyTorch where they fail (the JSON's "mode" and
"fallbacks" say what ran); `--mode tower` compiles only the tower, `--mode eager` nothing (compiling the
40-layer backbone can take minutes). Progress goes to stderr, the JSON line to stdout."""
import argparse
import importlib
import inspect
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

# The shapes of duet's presets (src/models/nemotron_h/presets.cpp).
NANO = dict(
    hidden_size=2688, vocab_size=131072, layer_norm_epsilon=1e-5, mamba_num_heads=64, mamba_head_dim=64,
    n_groups=8, ssm_state_size=128, conv_kernel=4, num_attention_heads=32, num_key_value_heads=2, head_dim=128,
    n_routed_experts=128, num_experts_per_tok=6, moe_intermediate_size=1856,
    moe_shared_expert_intermediate_size=3712, routed_scaling_factor=2.5, norm_topk_prob=True,
    intermediate_size=1856, n_group=1, topk_group=1)
PATTERNS = {"nano-8l": "MEM*EMEM", "nano": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"}
KINDS = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}

# Drama 3 (src/models/drama3/presets.cpp): the Qwen3.5-35B-A3B backbone widths
# (src/models/qwen35_moe/presets.cpp) with 8 or 40 layers of the 3:1 pattern, and the codebook tower.
A3B_BACKBONE = dict(
    hidden=2048, vocab=248320, norm_eps=1e-6, linear_k_heads=16, linear_v_heads=32, linear_k_dim=128,
    linear_v_dim=128, conv_kernel=4, attn_heads=16, kv_heads=2, head_dim=256, partial_rotary=0.25,
    rope_theta=1e7, experts=256, experts_per_token=8, expert_inter=512, shared_inter=512)
A3B_TOWER = dict(
    dim=2048, heads=16, kv_heads=4, head_dim=128, inter=6144, norm_eps=1e-6, num_codebooks=10,
    codebook_size=4096, shared_layers=4, rope_theta=1e7, rotary_fraction=0.5, backbone_codebooks=10)
A3B_TOKENS = dict(semantic_start=151678, semantic_end=151678 + 4095, eos=151645)
DRAMA3_LAYERS = {"a3b-8l": 8, "a3b": 40}
FRAME_RATE = 44100.0 / 2048.0  # codec frames per second of audio, as duet's real_time_factor
TOP_K, TOP_P, TEMPERATURE = 30, 0.9, 1.0  # duet's SamplingParams defaults

PRESETS = {"nemotron_h": sorted(PATTERNS), "drama3": sorted(DRAMA3_LAYERS)}
DEFAULT_PRESET = {"nemotron_h": "nano-8l", "drama3": "a3b-8l"}


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


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
def bench_nemotron(args):
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


# ---------------------------------------------------------------------------------------------------------
# Drama 3


def layer_kinds(count, interval=4):
    """Every interval-th layer full attention, the rest Gated DeltaNet (duet's default_layer_kinds)."""
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(count)]


def drama3_frame_weight_bytes(b, kinds, t, candidates):
    """Weight bytes a frame reads, counted as duet's Model::frame_weight_bytes counts them (bf16): the
    backbone's decode step (one embedding row, the mixers, the router, the shared expert and top-k experts)
    without the LM head, the candidate head, and the tower's products, heads and one embedding row a layer."""
    h = b["hidden"]
    total = h
    for kind in kinds:
        if kind == "linear_attention":
            qk, v = b["linear_k_heads"] * b["linear_k_dim"], b["linear_v_heads"] * b["linear_v_dim"]
            total += (2 * qk + v) * h + v * h + 2 * b["linear_v_heads"] * h + h * v  # qkv, z, b and a, out
        else:
            total += (2 * b["attn_heads"] + 2 * b["kv_heads"]) * b["head_dim"] * h + h * b["attn_heads"] * b["head_dim"]
        total += b["experts"] * h + 3 * b["shared_inter"] * h + h + b["experts_per_token"] * 3 * b["expert_inter"] * h
    total += candidates * h
    d, width, kv_width = t["dim"], t["heads"] * t["head_dim"], t["kv_heads"] * t["head_dim"]
    layer = 2 * d * d + 2 * width * d + 2 * kv_width * d + d * width + 3 * t["inter"] * d + d
    layers = t["shared_layers"] + t["num_codebooks"] - 1
    total += layers * layer + (t["num_codebooks"] - 1) * t["codebook_size"] * d
    return 2 * total


def find_class(module, name):
    import transformers
    try:
        return getattr(transformers, name)
    except Exception:  # the lazy module raises AttributeError or an import error for a name it lacks
        pass
    try:
        return getattr(importlib.import_module("transformers.models." + module), name)
    except Exception:
        return None


def init_names(cls):
    """The keyword arguments a config class declares (dataclass fields in transformers 5, __init__ before)."""
    names = set()
    fields = getattr(cls, "__dataclass_fields__", None)
    if fields:
        names |= set(fields)
    try:
        names |= set(inspect.signature(cls.__init__).parameters)
    except (TypeError, ValueError):
        pass
    return names


def qwen_fields(cls, b, kinds):
    """The config fields of duet's backbone preset, under transformers' names, as far as `cls` knows them."""
    fields = dict(
        vocab_size=b["vocab"], hidden_size=b["hidden"], num_hidden_layers=len(kinds), layer_types=kinds,
        rms_norm_eps=b["norm_eps"], tie_word_embeddings=False, num_attention_heads=b["attn_heads"],
        num_key_value_heads=b["kv_heads"], head_dim=b["head_dim"], linear_num_key_heads=b["linear_k_heads"],
        linear_num_value_heads=b["linear_v_heads"], linear_key_head_dim=b["linear_k_dim"],
        linear_value_head_dim=b["linear_v_dim"], linear_conv_kernel_dim=b["conv_kernel"], num_experts=b["experts"],
        num_experts_per_tok=b["experts_per_token"], moe_intermediate_size=b["expert_inter"],
        shared_expert_intermediate_size=b["shared_inter"], norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[], max_position_embeddings=32768, use_cache=True)
    names = init_names(cls)
    if "rope_parameters" in names:
        fields["rope_parameters"] = {"rope_type": "default", "rope_theta": b["rope_theta"],
                                     "partial_rotary_factor": b["partial_rotary"]}
    else:
        fields.update(rope_theta=b["rope_theta"], partial_rotary_factor=b["partial_rotary"])
    if names:
        fields = {k: v for k, v in fields.items() if k in names or k == "partial_rotary_factor"}
    return fields


def check_config(config, b, kinds):
    want = dict(hidden_size=b["hidden"], vocab_size=b["vocab"], num_hidden_layers=len(kinds), num_experts=b["experts"],
                num_experts_per_tok=b["experts_per_token"], moe_intermediate_size=b["expert_inter"],
                shared_expert_intermediate_size=b["shared_inter"], head_dim=b["head_dim"],
                linear_num_value_heads=b["linear_v_heads"])
    for key, value in want.items():
        if getattr(config, key, None) != value:
            raise ValueError(f"config {key} is {getattr(config, key, None)}, expected {value}")
    if list(getattr(config, "layer_types", kinds)) != kinds:
        raise ValueError("config layer_types differ from the preset's pattern")


def make_backbone(b, kinds, fallbacks):
    """The first of the Qwen3.5-MoE / Qwen3-Next causal-LM classes that builds duet's shape, with random
    weights on the GPU."""
    tries = [("qwen3_5_moe", "Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM", False),
             ("qwen3_5_moe", "Qwen3_5MoeConfig", "Qwen3_5MoeForCausalLM", True),
             ("qwen3_next", "Qwen3NextConfig", "Qwen3NextForCausalLM", False)]
    for module, config_name, lm_name, wrapped in tries:
        config_cls, lm_cls = find_class(module, config_name), find_class(module, lm_name)
        if config_cls is None or lm_cls is None:
            fallbacks.append(f"{config_name}/{lm_name}: not in this transformers")
            continue
        try:
            if wrapped:  # the multimodal config holds the text model's under text_config
                text_cls = type(config_cls().text_config)
                config = config_cls(text_config=qwen_fields(text_cls, b, kinds)).text_config
            else:
                config = config_cls(**qwen_fields(config_cls, b, kinds))
            check_config(config, b, kinds)
            log(f"peer: building {lm_cls.__name__} ({len(kinds)} layers) with random bf16 weights on the GPU")
            return build_backbone(config, lm_cls), lm_cls
        except Exception as e:
            fallbacks.append(f"{lm_name} from {config_name}: {type(e).__name__}: {str(e)[:200]}")
            torch.cuda.empty_cache()
    raise RuntimeError("no Qwen3.5-MoE or Qwen3-Next classes in this transformers: " + "; ".join(fallbacks))


@torch.no_grad()
def fill_backbone(model):
    """Small random values, on the GPU, as duet's random weights: products uniform in ±sqrt(3 / fan-in),
    convolution taps in ±0.5, zero-centred norms near 0, the Gated DeltaNet's output norm near 1, A in [1, 16],
    dt in [0.001, 0.1]."""
    for name, p in model.named_parameters():
        p.requires_grad_(False)
        if name.endswith("conv1d.weight"):
            p.uniform_(-0.5, 0.5)
        elif p.dim() >= 2:
            bound = math.sqrt(3.0 / p.shape[-1])
            p.uniform_(-bound, bound)
        elif name.endswith("A_log"):
            p.uniform_(0.0, math.log(16.0))
        elif name.endswith("dt_bias"):
            p.uniform_(math.log(0.001), math.log(0.1))  # softplus⁻¹(dt) ≈ log(dt) for small dt
        elif name.endswith("linear_attn.norm.weight"):
            p.uniform_(0.9, 1.1)
        else:
            p.uniform_(-0.1, 0.1)


def build_backbone(config, lm_cls):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # parameters are made in bf16 whatever from_config does with dtype
    try:
        with torch.device("cuda"):
            try:
                model = lm_cls._from_config(config, dtype=torch.bfloat16)
            except TypeError:
                model = lm_cls._from_config(config, torch_dtype=torch.bfloat16)
    finally:
        torch.set_default_dtype(previous)
    if next(model.parameters()).dtype != torch.bfloat16:
        model.to(torch.bfloat16)
    model.eval()
    fill_backbone(model)
    return model


def rms(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def sample(logits):
    """One index per row: top-k, then top-p over what is left, at temperature 1, drawn on the GPU without a
    host sync (argmax of p / Exp(1) noise draws from p)."""
    values, ids = torch.topk(logits.float() / TEMPERATURE, TOP_K, dim=-1)
    probs = torch.softmax(values, dim=-1)
    probs = probs * ((torch.cumsum(probs, dim=-1) - probs) < TOP_P)
    noise = torch.empty_like(probs).exponential_().clamp_min_(1e-20)
    pick = torch.argmax(probs / noise, dim=-1, keepdim=True)
    return torch.gather(ids, -1, pick).view(-1)


class Tower(torch.nn.Module):
    """duet's codebook tower (src/models/drama3/model.cpp tower_layer / tower_step), the code embeddings the
    backbone row sums, and the candidate head, with a key/value cache of `capacity` rows a layer."""

    def __init__(self, t, tokens, capacity, main_embed, lm_head):
        super().__init__()
        self.t, self.capacity = t, capacity
        d, cb, hd = t["dim"], t["codebook_size"], t["head_dim"]
        self.layer_count = t["shared_layers"] + t["num_codebooks"] - 1
        self.rotary_dim = int(hd * t["rotary_fraction"])
        self.semantic_start = tokens["semantic_start"]
        self.semantic_count = tokens["semantic_end"] - tokens["semantic_start"] + 1
        self.row_scale = 1.0 / math.sqrt(t["backbone_codebooks"] + 1)

        def weight(*shape):
            return torch.nn.Parameter(torch.empty(*shape, dtype=torch.bfloat16, device="cuda"), requires_grad=False)

        self.code_embeddings = weight(t["num_codebooks"] * cb, d)
        self.layers = torch.nn.ModuleList()
        for i in range(self.layer_count):
            layer = torch.nn.Module()
            layer.embed = weight(cb, d)
            for norm in ("enorm", "hnorm", "input_norm", "post_norm", "out_norm"):
                setattr(layer, norm, weight(d))
            layer.eh_embedding, layer.eh_hidden = weight(d, d), weight(d, d)  # eh_proj's two halves
            layer.q = weight(2 * t["heads"] * hd, d)  # per head [query | gate]
            layer.k, layer.v = weight(t["kv_heads"] * hd, d), weight(t["kv_heads"] * hd, d)
            layer.o = weight(d, t["heads"] * hd)
            layer.q_norm, layer.k_norm = weight(hd), weight(hd)
            layer.gate, layer.up, layer.down = weight(t["inter"], d), weight(t["inter"], d), weight(d, t["inter"])
            if i >= t["shared_layers"]:
                layer.head = weight(cb, d)
            layer.register_buffer("keys", torch.zeros(t["kv_heads"], capacity, hd, dtype=torch.bfloat16, device="cuda"))
            layer.register_buffer("values", torch.zeros_like(layer.keys))
            self.layers.append(layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name == "code_embeddings" or name.endswith(".embed"):
                    p.uniform_(-1.0, 1.0)
                elif p.dim() >= 2:
                    bound = math.sqrt(3.0 / p.shape[-1])
                    p.uniform_(-bound, bound)
                else:
                    p.uniform_(0.9, 1.1)
        self.tower_bytes = sum(p.numel() * p.element_size() for p in self.parameters())
        self.register_buffer("main_embed", main_embed.detach(), persistent=False)  # the backbone's, shared
        # The candidate head: the LM head's semantic rows and EOS, copied as duet copies them.
        head = torch.cat([lm_head[tokens["semantic_start"]:tokens["semantic_end"] + 1],
                          lm_head[tokens["eos"]:tokens["eos"] + 1]])
        self.candidate_head = torch.nn.Parameter(head.contiguous(), requires_grad=False)
        self.register_buffer("inv_freq", t["rope_theta"] ** (
            -torch.arange(0, self.rotary_dim, 2, dtype=torch.float32, device="cuda") / self.rotary_dim))
        self.register_buffer("positions", torch.arange(capacity, device="cuda"))
        self.register_buffer("code_offsets", torch.arange(t["backbone_codebooks"], device="cuda") * cb)

    def mark_static(self):
        """Fixed addresses for torch.compile's CUDA graphs, the mutated caches above all."""
        for tensor in list(self.parameters()) + list(self.buffers()):
            torch._dynamo.mark_static_address(tensor)

    def rope(self, x, cos, sin):
        """Interleaved RoPE (pairs of adjacent dims) on the first rotary_dim dims of each head."""
        rd = self.rotary_dim
        pairs = x[..., :rd].float().unflatten(-1, (rd // 2, 2))
        x0, x1 = pairs[..., 0], pairs[..., 1]
        rotated = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)
        return torch.cat((rotated.to(x.dtype), x[..., rd:]), dim=-1)

    def layer(self, layer, e, hin, pos, mask, cos, sin):
        """One tower layer over rows at positions `pos`: e and hin [n, dim] → the layer's normed output."""
        t, eps, n = self.t, self.t["norm_eps"], e.shape[0]
        heads, kv_heads, hd = t["heads"], t["kv_heads"], t["head_dim"]
        x = F.linear(rms(e, layer.enorm, eps), layer.eh_embedding) + F.linear(rms(hin, layer.hnorm, eps), layer.eh_hidden)
        xn = rms(x, layer.input_norm, eps)
        query_gate = F.linear(xn, layer.q).view(n, heads, 2 * hd)
        q = self.rope(rms(query_gate[..., :hd], layer.q_norm, eps), cos, sin)
        k = self.rope(rms(F.linear(xn, layer.k).view(n, kv_heads, hd), layer.k_norm, eps), cos, sin)
        v = F.linear(xn, layer.v).view(n, kv_heads, hd)
        layer.keys.index_copy_(1, pos, k.transpose(0, 1))
        layer.values.index_copy_(1, pos, v.transpose(0, 1))
        attended = F.scaled_dot_product_attention(q.transpose(0, 1)[None], layer.keys[None], layer.values[None],
                                                  attn_mask=mask, enable_gqa=True)
        attended = attended[0].transpose(0, 1) * torch.sigmoid(query_gate[..., hd:])
        x = x + F.linear(attended.reshape(n, heads * hd), layer.o)
        xn = rms(x, layer.post_norm, eps)
        x = x + F.linear(F.silu(F.linear(xn, layer.gate)) * F.linear(xn, layer.up), layer.down)
        return rms(x, layer.out_norm, eps)

    def angles(self, pos):
        a = pos.float()[:, None] * self.inv_freq[None, :]
        mask = self.positions[None, :] <= pos[:, None]  # [n, capacity]: the rows each query sees
        return mask, a.cos()[:, None, :], a.sin()[:, None, :]

    def teacher_forced(self, hidden, pos):
        """The prompt's tower rows: each row's successor is a text row, so every layer's code embedding is
        masked out (zero), as duet's tower_teacher_forced does for a text prompt; no heads are computed."""
        mask, cos, sin = self.angles(pos)
        e = torch.zeros_like(hidden)
        hin = hidden
        for layer in self.layers:
            hin = self.layer(layer, e, hin, pos, mask, cos, sin)

    def frame(self, hidden, pos):
        """One frame's device work before the backbone step: candidate logits of `hidden` [1, dim] and the
        main token drawn, the tower at row `pos` [1] with a code drawn after each head, and the backbone's
        input row. Returns the row [1, 1, dim] and the codes [num_codebooks]. An EOS draw stands in as the
        last semantic code, so every frame does the same work (duet draws EOS about once in 4097 frames)."""
        t = self.t
        choice = sample(F.linear(hidden, self.candidate_head))
        codes = [torch.clamp(choice, max=self.semantic_count - 1)]
        mask, cos, sin = self.angles(pos)
        hin = hidden
        for i, layer in enumerate(self.layers):
            # The shared layers embed the semantic code; the per-codebook layer i the code before its head's.
            code = codes[0] if i < t["shared_layers"] else codes[i - t["shared_layers"]]
            hin = self.layer(layer, F.embedding(code, layer.embed), hin, pos, mask, cos, sin)
            if i >= t["shared_layers"]:
                codes.append(sample(F.linear(hin, layer.head)))
        codes = torch.cat(codes)
        row = F.embedding(codes[:1] + self.semantic_start, self.main_embed).float()
        row = row + F.embedding(codes[:t["backbone_codebooks"]] + self.code_offsets, self.code_embeddings).float().sum(
            0, keepdim=True)
        return (row * self.row_scale).to(torch.bfloat16).view(1, 1, -1), codes


def make_static_cache(config, capacity):
    from transformers import StaticCache
    error = None
    for kwargs in (dict(config=config, max_cache_len=capacity),
                   dict(config=config, max_batch_size=1, max_cache_len=capacity, device="cuda", dtype=torch.bfloat16)):
        try:
            return StaticCache(**kwargs)
        except TypeError as e:
            error = e
    raise error


class Backbone:
    """The transformers decoder over frame rows: a prefill of n rows and one-row steps, with a static cache
    and a compiled step, or transformers' default (dynamic) cache in eager mode."""

    def __init__(self, model, capacity, static, compiled):
        self.text = model.model
        self.static = static
        self.cache = make_static_cache(model.config, capacity) if static else None
        self.takes_cache_position = "cache_position" in inspect.signature(self.text.forward).parameters
        self.pos = torch.zeros(1, dtype=torch.long, device="cuda")
        self.step_fn = self.run_step
        if compiled:
            self.step_fn = torch.compile(self.run_step, mode="reduce-overhead", dynamic=False)

    def call(self, rows, positions):
        kwargs = dict(inputs_embeds=rows, past_key_values=self.cache, use_cache=True, position_ids=positions[None])
        if self.takes_cache_position:
            kwargs["cache_position"] = positions
        return self.text(**kwargs)

    def prefill(self, rows):
        """rows [n, hidden] from position 0 with an empty cache → the final-normed rows [n, hidden]."""
        if self.static:
            self.cache.reset()
        else:
            self.cache = None  # the model makes its own cache
        out = self.call(rows[None], torch.arange(rows.shape[0], device="cuda"))
        if not self.static:
            self.cache = out.past_key_values
        self.pos.fill_(rows.shape[0])
        return out.last_hidden_state[0]

    def run_step(self, row):
        return self.call(row, self.pos).last_hidden_state[:, -1]

    def step(self, row):
        """row [1, 1, hidden] at the next position → its final-normed output [1, hidden]."""
        out = self.step_fn(row).clone()
        self.pos.add_(1)
        return out


def mark_step():
    begin = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    if begin is not None:
        begin()


@torch.no_grad()
def bench_drama3(args):
    import transformers
    b, t, tokens = A3B_BACKBONE, A3B_TOWER, A3B_TOKENS
    kinds = layer_kinds(DRAMA3_LAYERS[args.preset])
    candidates = tokens["semantic_end"] - tokens["semantic_start"] + 2  # the semantic tokens, then EOS
    fallbacks = []
    warmup_frames = 2
    capacity = args.prompt + max(3, warmup_frames + args.decode) + 1

    start = time.perf_counter()
    torch.manual_seed(1)
    model, lm_cls = make_backbone(b, kinds, fallbacks)
    if args.experts:
        try:
            model.config._experts_implementation = args.experts
        except Exception as e:
            fallbacks.append(f"experts implementation {args.experts}: {type(e).__name__}: {str(e)[:200]}")
    main_embed = model.get_input_embeddings().weight
    tower = Tower(t, tokens, capacity, main_embed, model.get_output_embeddings().weight)
    torch.cuda.synchronize()
    load_s = time.perf_counter() - start
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters()) + tower.tower_bytes
    log(f"peer: {weight_bytes / 1e9:.1f} GB of weights made in {load_s:.1f} s")

    # Text rows: ids below the semantic range, as duet's bench prompt.
    ids = torch.randint(0, tokens["semantic_start"], (args.prompt,), device="cuda")
    tower_pos = torch.zeros(1, dtype=torch.long, device="cuda")

    def feed(backbone):
        """The prompt: backbone over every row, the tower teacher-forced over the rows with a successor."""
        hidden = backbone.prefill(F.embedding(ids, main_embed))
        tower.teacher_forced(hidden[:-1], torch.arange(args.prompt - 1, device="cuda"))
        tower_pos.fill_(args.prompt - 1)
        return hidden[-1:].clone()

    state = {"tower_fn": tower.frame, "tower_mode": "eager"}
    if args.mode in ("auto", "tower"):
        try:
            tower.mark_static()
            state["tower_fn"] = torch.compile(tower.frame, mode="reduce-overhead", dynamic=False)
            state["tower_mode"] = "reduce-overhead"
        except Exception as e:
            fallbacks.append(f"tower compile: {type(e).__name__}: {str(e)[:200]}")

    def frame(backbone, hidden):
        mark_step()
        try:
            row, codes = state["tower_fn"](hidden, tower_pos)
        except Exception as e:
            if state["tower_mode"] == "eager":
                raise
            fallbacks.append(f"tower reduce-overhead: {type(e).__name__}: {str(e)[:200]}")
            state["tower_fn"], state["tower_mode"] = tower.frame, "eager"
            row, codes = tower.frame(hidden, tower_pos)
        row, codes = row.clone(), codes.clone()
        tower_pos.add_(1)
        hidden = backbone.step(row)
        codes.tolist()  # the frame read back, as duet does after each step
        return hidden

    # The backbone: a static cache with a compiled step where that works, else transformers' default.
    choices = [(True, True, "static cache + reduce-overhead")] if args.mode == "auto" else []
    choices.append((False, False, "dynamic cache, eager"))
    backbone = None
    for static, compiled, label in choices:
        try:
            log(f"peer: trying the backbone with {label}, tower {state['tower_mode']}")
            backbone = Backbone(model, capacity, static, compiled)
            hidden = feed(backbone)
            for _ in range(3):  # compiles and records the graphs
                hidden = frame(backbone, hidden)
            torch.cuda.synchronize()
            backbone_mode = label
            break
        except Exception as e:
            if not static:
                raise
            fallbacks.append(f"backbone {label}: {type(e).__name__}: {str(e)[:200]}")
            backbone = None
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    log("peer: timing the prompt")
    prefill_s = []
    bench_start = time.perf_counter()
    while not prefill_s or (time.perf_counter() - bench_start < 2.0 and len(prefill_s) < 10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        hidden = feed(backbone)
        torch.cuda.synchronize()
        prefill_s.append(time.perf_counter() - t0)

    log("peer: timing frames")
    for _ in range(warmup_frames):
        hidden = frame(backbone, hidden)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.decode):
        hidden = frame(backbone, hidden)
    torch.cuda.synchronize()
    frame_s = (time.perf_counter() - t0) / args.decode

    graphs = None
    try:
        from torch._dynamo.utils import counters
        graphs = int(counters["stats"]["unique_graphs"])
    except Exception:
        pass
    bytes_per_frame = drama3_frame_weight_bytes(b, kinds, t, candidates)
    copy_gbs = copy_bandwidth_gbs()
    decode_gbs = bytes_per_frame / frame_s / 1e9
    mode = "eager" if backbone_mode.endswith("eager") and state["tower_mode"] == "eager" else \
        f"backbone: {backbone_mode}; tower: {state['tower_mode']}"
    print(json.dumps({
        "arch": "drama3", "weights": "random:" + args.preset, "weight_bytes": int(weight_bytes), "load_s": load_s,
        "weights_made_on": "cuda", "backend": f"transformers {transformers.__version__} {lm_cls.__name__}",
        "torch": torch.__version__, "mode": mode, "fallbacks": fallbacks,
        "experts_implementation": getattr(model.config, "_experts_implementation", None),
        "compiled_graphs": graphs, "prompt_rows": args.prompt, "prefill_runs": len(prefill_s),
        "prefill_rows_per_s": args.prompt / sorted(prefill_s)[len(prefill_s) // 2], "frames": args.decode,
        "ms_per_frame": frame_s * 1e3, "frames_per_s": 1 / frame_s, "real_time_factor": (1 / frame_s) / FRAME_RATE,
        "frame_weight_bytes": int(bytes_per_frame), "decode_gbs": decode_gbs, "memory_copy_gbs": copy_gbs,
        "decode_fraction_of_copy": decode_gbs / copy_gbs}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", default="nemotron_h", choices=sorted(PRESETS))
    parser.add_argument("--preset", help="nemotron_h: nano-8l (default) or nano; drama3: a3b-8l (default) or a3b")
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens (rows for drama3)")
    parser.add_argument("--decode", type=int, default=16, help="timed decode tokens (frames for drama3)")
    parser.add_argument("--mode", default="auto", choices=["auto", "tower", "eager"],
                        help="drama3: auto tries a static cache and torch.compile for the backbone step and the "
                             "tower; tower compiles only the tower; eager compiles nothing")
    parser.add_argument("--experts", default="",
                        help="drama3: a transformers experts implementation (e.g. grouped_mm, batched_mm, eager); "
                             "default: transformers' own choice")
    args = parser.parse_args()
    args.preset = args.preset or DEFAULT_PRESET[args.arch]
    if args.preset not in PRESETS[args.arch]:
        parser.error(f"--arch {args.arch} has presets {', '.join(PRESETS[args.arch])}, not {args.preset}")
    if args.prompt < 2 or args.decode < 2:
        parser.error("--prompt and --decode must be at least 2")
    if args.arch == "nemotron_h":
        bench_nemotron(args)
    else:
        bench_drama3(args)


if __name__ == "__main__":
    main()
