"""Hugging Face configs from Python (hf_config=, docs/model.md): each shipped config.json, and a
GPT-2 and a BERT one, built as Hugging Face's classes lay their modules out (torch.nn on the meta
device: LlamaForCausalLM's q/k/v/o projections with grouped key/value heads, Qwen2's q/k/v
biases, a tied or untied head; GPT2LMHeadModel; BertForPreTraining) count the parameters the
simulator's graph has; bad configs raise InputError, and the command lines exit 2 with one line."""
import json
import os
import subprocess

import pytest

import ascendsim

torch = pytest.importorskip("torch")
nn = torch.nn

CONFIGS = os.path.join(os.environ.get("ASCENDSIM_CONFIG_DIR", "configs"), "hf")
PY = "/usr/bin/python3"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in
                                                   os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)}
# PyTorch's counts of the published models (sum of p.numel(), a tied table once).
PUBLISHED = {"llama-2-7b": 6738415616, "qwen2.5-7b": 7615616512, "qwen2.5-0.5b": 494032768}

GPT2 = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_ctx": 1024,
        "n_embd": 768, "n_head": 12, "n_inner": None, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257}
BERT = {"architectures": ["BertForPreTraining"], "hidden_act": "gelu", "hidden_size": 768, "intermediate_size": 3072,
        "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 12,
        "type_vocab_size": 2, "vocab_size": 30522}


def dense(i, o, bias=True):
    return nn.Linear(i, o, bias=bias, device="meta")


def norm(h, rms=False):
    return nn.Parameter(torch.empty(h, device="meta")) if rms else nn.LayerNorm(h, device="meta")


def decoder(c):
    """LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM's modules."""
    h, heads = c["hidden_size"], c["num_attention_heads"]
    d, kv = h // heads, c.get("num_key_value_heads") or heads
    qkv_bias = c["architectures"][0] == "Qwen2ForCausalLM"
    m = nn.Module()
    m.embed_tokens = nn.Embedding(c["vocab_size"], h, device="meta")
    m.layers = nn.ModuleList()
    for _ in range(c["num_hidden_layers"]):
        layer = nn.Module()
        layer.q_proj, layer.k_proj, layer.v_proj = (dense(h, n * d, qkv_bias) for n in (heads, kv, kv))
        layer.o_proj = dense(heads * d, h, False)
        layer.gate_proj, layer.up_proj = dense(h, c["intermediate_size"], False), dense(h, c["intermediate_size"], False)
        layer.down_proj = dense(c["intermediate_size"], h, False)
        layer.input_layernorm, layer.post_attention_layernorm = norm(h, True), norm(h, True)
        m.layers.append(layer)
    m.norm = norm(h, True)
    m.lm_head = dense(h, c["vocab_size"], False)
    if c.get("tie_word_embeddings", False):
        m.lm_head.weight = m.embed_tokens.weight
    return m


def gpt2(c):
    """GPT2LMHeadModel's modules (Conv1D as Linear: the same parameters), the head tied."""
    h = c["n_embd"]
    inner = c.get("n_inner") or 4 * h
    m = nn.Module()
    m.wte, m.wpe = nn.Embedding(c["vocab_size"], h, device="meta"), nn.Embedding(c["n_positions"], h, device="meta")
    m.h = nn.ModuleList()
    for _ in range(c["n_layer"]):
        block = nn.Module()
        block.ln_1, block.ln_2 = norm(h), norm(h)
        block.c_attn, block.attn_proj = dense(h, 3 * h), dense(h, h)
        block.c_fc, block.mlp_proj = dense(h, inner), dense(inner, h)
        m.h.append(block)
    m.ln_f = norm(h)
    return m


def bert(c):
    """BertForPreTraining's modules: the masked-LM decoder tied to the token table, its own bias."""
    h, f = c["hidden_size"], c["intermediate_size"]
    m = nn.Module()
    m.word, m.position = nn.Embedding(c["vocab_size"], h, device="meta"), nn.Embedding(c["max_position_embeddings"], h, device="meta")
    m.token_type, m.embed_norm = nn.Embedding(c["type_vocab_size"], h, device="meta"), norm(h)
    m.layer = nn.ModuleList()
    for _ in range(c["num_hidden_layers"]):
        layer = nn.Module()
        layer.query, layer.key, layer.value, layer.attn_out = (dense(h, h) for _ in range(4))
        layer.attn_norm, layer.intermediate, layer.output, layer.out_norm = norm(h), dense(h, f), dense(f, h), norm(h)
        m.layer.append(layer)
    m.pooler, m.transform, m.transform_norm = dense(h, h), dense(h, h), norm(h)
    m.decoder_bias = nn.Parameter(torch.empty(c["vocab_size"], device="meta"))
    m.seq_relationship = dense(h, 2)
    return m


def pytorch_count(c):
    build = {"GPT2LMHeadModel": gpt2, "BertForPreTraining": bert}.get(c["architectures"][0], decoder)
    return sum(p.numel() for p in build(c).parameters())


def simulated_count(path):
    # A short sequence: the count does not depend on it, and the graph builds in a moment. A model
    # that fits no device (LLaMA-2-7B's weights and Adam state take 100 GiB) is still described,
    # then refused: exit 2 (the Python API raises InputError for it).
    r = subprocess.run([os.environ.get("ASCENDSIM_BIN", "ascendsim"), "info", "--hf-config", str(path),
                        "--batch-size", "1", "--seq-length", "64", "--json", "-"], capture_output=True, text=True)
    assert r.returncode in (0, 2), r.stderr
    return json.loads(r.stdout)["parameters"]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shipped_configs_count_what_pytorch_counts(name):
    path = os.path.join(CONFIGS, name + ".json")
    with open(path) as f:
        config = json.load(f)
    assert pytorch_count(config) == PUBLISHED[name]
    assert simulated_count(path) == PUBLISHED[name]
    assert simulated_count(name) == PUBLISHED[name]  # a shipped config by its name
    # From Python, one layer (it fits a device): the config's other fields kept.
    one = ascendsim.info(hf_config=path, batch_size=1, shape={"layers": 1, "seq_length": 64})
    assert one["parameters"] == pytorch_count({**config, "num_hidden_layers": 1})


def test_gpt2_and_bert_configs_count_their_presets(tmp_path):
    for config, preset in ((GPT2, "gpt2-small"), (BERT, "bert-base")):
        path = tmp_path / (preset + ".json")
        path.write_text(json.dumps(config))
        n = pytorch_count(config)
        assert n == {"gpt2-small": 124439808, "bert-base": 110106428}[preset]
        assert simulated_count(path) == n
        assert ascendsim.info(preset, batch_size=1)["parameters"] == n
    about = ascendsim.info(hf_config=tmp_path / "gpt2-small.json", batch_size=1)
    assert about["workload"] == "gpt2-small"
    assert about["description"].startswith("GPT2LMHeadModel from ")


def test_a_config_trains_and_serves_with_its_fields_overridden():
    small = {"layers": 2, "seq_length": 128}
    r = ascendsim.train(strategy="loop-sink", hf_config="qwen2.5-0.5b", shape=small, batch_size=2, steps_per_epoch=4)
    assert r["workload"] == "qwen2.5-0.5b"
    assert r.runs[0]["model_flops"]["tokens_per_sample"] == 128
    s = ascendsim.serve(hf_config="qwen2.5-0.5b", shape={"layers": 2}, requests=4, prompt_tokens=64,
                        output_tokens=8, decode_batches=[1])
    assert s["workload"] == "qwen2.5-0.5b"
    assert s["model"]["kv_heads"] == 2 and s["model"]["layers"] == 2


@pytest.mark.parametrize("config, says", [
    ({"architectures": ["T5ForConditionalGeneration"]}, "architectures[0] 'T5ForConditionalGeneration' is not modelled"),
    ({**GPT2, "n_layer": None}, "'n_layer' is null"),
    ({k: v for k, v in BERT.items() if k != "vocab_size"}, "'vocab_size' is missing"),
    ({**BERT, "type_vocab_size": 3}, "'type_vocab_size' is 3"),
    ({**GPT2, "n_embd": 2 ** 31}, "'n_embd' is 2147483648"),
    ({**GPT2, "n_head": "12"}, "'n_head' is \"12\" (a string)"),
])
def test_bad_configs_raise_input_error(tmp_path, config, says):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ascendsim.InputError) as e:
        ascendsim.info(hf_config=str(path))
    assert str(path) + ": " + says in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_files_and_arguments_raise_input_error(tmp_path):
    (tmp_path / "broken.json").write_text('{"architectures": ["LlamaForCausalLM"],\n "hidden_size": }')
    cases = [
        (lambda: ascendsim.info(hf_config=str(tmp_path / "missing.json")), "missing.json: no such file"),
        (lambda: ascendsim.info(hf_config=str(tmp_path)), ": a directory; give a Hugging Face config.json"),
        (lambda: ascendsim.info(hf_config="/dev/full"), "/dev/full: not a regular file"),
        (lambda: ascendsim.info(hf_config=str(tmp_path / "broken.json")), "broken.json:2: malformed JSON"),
        (lambda: ascendsim.info(hf_config=3), "hf_config: a Hugging Face config.json's path, got 3 (int)"),
        (lambda: ascendsim.info("resnet50", hf_config="llama-2-7b"), "a workload or a Hugging Face config"),
        (lambda: ascendsim.serve("gpt2-medium", hf_config="llama-2-7b"), "a workload or a Hugging Face config"),
        (lambda: ascendsim.train("gpt", "non-sink", hf_config=["x"]), "hf_config: a Hugging Face config.json's path"),
    ]
    for call, says in cases:
        with pytest.raises(ascendsim.InputError, match=None) as e:
            call()
        assert says in str(e.value)


@pytest.mark.parametrize("command", [["info"], ["train", "--strategy", "non-sink"], ["serve"]])
def test_the_command_line_exits_two_with_one_line(tmp_path, command):
    (tmp_path / "t5.json").write_text(json.dumps({"architectures": ["T5ForConditionalGeneration"]}))
    r = subprocess.run([os.environ.get("ASCENDSIM_BIN", "ascendsim"), *command, "--hf-config", "t5.json"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr == "error: t5.json: architectures[0] 'T5ForConditionalGeneration' is not modelled: give " \
        "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (a LLaMA-shaped decoder), GPT2LMHeadModel or " \
        "BertForPreTraining\n"


def test_python_m_ascendsim_tune_takes_a_config(tmp_path):
    pytest.importorskip("optuna")
    (tmp_path / "t5.json").write_text(json.dumps({"architectures": ["T5ForConditionalGeneration"]}))
    # A training job's config is read for its facts before the search (exit 2); a serving job's by
    # its trials, each refused (exit 3, as for any serving input the trials judge, e.g. --gpt-size).
    for objective, code, says in (("samples_per_s", 2, "error: t5.json: architectures[0]"),
                                  ("serving_goodput", 3, "error: no trial could run: t5.json: architectures[0]")):
        r = subprocess.run([PY, "-m", "ascendsim", "tune", "--objective", objective, "--hf-config", "t5.json",
                            "--budget", "1", "-q"], cwd=tmp_path, capture_output=True, text=True, env=ENV)
        assert r.returncode == code, r.stderr
        assert r.stderr.startswith(says) and r.stderr.count("\n") == 1, r.stderr
    r = subprocess.run([PY, "-m", "ascendsim", "tune", "--objective", "serving_goodput", "--hf-config", "qwen2.5-0.5b",
                        "--layers", "2", "--requests", "4", "--prompt-tokens", "64", "--output-tokens", "8",
                        "--budget", "1", "--json", "-", "-q"], cwd=tmp_path, capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["workload"] == "qwen2.5-0.5b"
