"""The built-in transformers against their PyTorch definitions (Debian python3-torch): BERT
pretraining (BertForPreTraining's layers: embeddings, post-LN encoder, pooler, masked-LM head
tied to the token table, next-sentence head), GPT-2 (pre-LN, learned positions, LM head tied to
the token table) and a LLaMA decoder (RMSNorm, SwiGLU, rotary, untied LM head). Parameters are
counted on the meta device (no memory: LLaMA-7B has 6.7 billion); multiply-accumulates of one
sequence's forward pass are counted from the modules' shapes as they run on meta tensors."""
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

BIN = os.environ.get("ASCENDSIM_BIN", "ascendsim")

SHAPES = {  # layers, hidden, heads, ffn, seq, vocab, positions, masked per sequence
    "bert-base": (12, 768, 12, 3072, 128, 30522, 512, 20),
    "bert-large": (24, 1024, 16, 4096, 128, 30522, 512, 20),
    "gpt2-small": (12, 768, 12, 3072, 1024, 50257, 1024, 0),
    "gpt2-medium": (24, 1024, 16, 4096, 1024, 50257, 1024, 0),
    "llama-7b": (32, 4096, 32, 11008, 2048, 32000, 0, 0),
}

MACS = [0]  # the forward pass's multiply-accumulates, counted as it runs


def linear(i, o, bias=True):
    layer = nn.Linear(i, o, bias=bias, device="meta")
    layer.register_forward_hook(lambda m, x, y: MACS.__setitem__(0, MACS[0] + x[0].numel() * m.out_features))
    return layer


def matmul(a, b):
    MACS[0] += a.numel() // a.shape[-1] * a.shape[-1] * b.shape[-1]
    return a @ b


class RMSNorm(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(h, device="meta"))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Block(nn.Module):
    def __init__(self, kind, h, heads, ffn):
        super().__init__()
        self.kind, self.heads = kind, heads
        bias = kind != "llama"
        self.q, self.k, self.v, self.o = (linear(h, h, bias) for _ in range(4))
        norm = (lambda: RMSNorm(h)) if kind == "llama" else (lambda: nn.LayerNorm(h, device="meta"))
        self.n1, self.n2 = norm(), norm()
        if kind == "llama":
            self.w1, self.w3, self.w2 = linear(h, ffn, False), linear(h, ffn, False), linear(ffn, h, False)
        else:
            self.fc1, self.fc2 = linear(h, ffn), linear(ffn, h)

    def attention(self, x):
        b, s, h = x.shape
        split = lambda t: t.view(b, s, self.heads, h // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        p = torch.softmax(matmul(q, k.transpose(-1, -2)), -1)
        return self.o(matmul(p, v).transpose(1, 2).reshape(b, s, h))

    def mlp(self, x):
        if self.kind == "llama":
            return self.w2(torch.nn.functional.silu(self.w1(x)) * self.w3(x))
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))

    def forward(self, x):
        if self.kind == "bert":  # post-LN
            x = self.n1(x + self.attention(x))
            return self.n2(x + self.mlp(x))
        x = x + self.attention(self.n1(x))
        return x + self.mlp(self.n2(x))


class Transformer(nn.Module):
    def __init__(self, name):
        super().__init__()
        layers, h, heads, ffn, self.seq, vocab, positions, self.masked = SHAPES[name]
        self.kind = "bert" if name.startswith("bert") else "llama" if name.startswith("llama") else "gpt2"
        self.tokens = nn.Embedding(vocab, h, device="meta")
        self.positions = nn.Embedding(positions, h, device="meta") if positions else None
        self.blocks = nn.ModuleList(Block(self.kind, h, heads, ffn) for _ in range(layers))
        if self.kind == "bert":
            self.segments = nn.Embedding(2, h, device="meta")
            self.embed_norm = nn.LayerNorm(h, device="meta")
            self.pooler = linear(h, h)
            self.transform, self.transform_norm = linear(h, h), nn.LayerNorm(h, device="meta")
            self.mlm_bias = nn.Parameter(torch.empty(vocab, device="meta"))
            self.nsp = linear(h, 2)
        elif self.kind == "gpt2":
            self.final = nn.LayerNorm(h, device="meta")
        else:
            self.final = RMSNorm(h)
            self.head = nn.Linear(h, vocab, bias=False, device="meta")

    def forward(self, ids):
        x = self.tokens(ids)
        if self.positions is not None:
            x = x + self.positions(torch.arange(ids.shape[1], device="meta"))
        if self.kind == "bert":
            x = self.embed_norm(x + self.segments(torch.zeros_like(ids)))
        for block in self.blocks:
            x = block(x)
        if self.kind == "bert":  # the masked positions' predictions, the decoder tied to the tokens
            m = self.transform_norm(torch.nn.functional.gelu(self.transform(x[:, : self.masked])))
            self.nsp(torch.tanh(self.pooler(x[:, 0])))
            return matmul(m, self.tokens.weight.t()) + self.mlm_bias
        head = self.tokens.weight if self.kind == "gpt2" else self.head.weight
        return matmul(self.final(x), head.t())


def info(name):
    # A model that fits no device (LLaMA-7B's weights and Adam state alone take 75 GiB) is still
    # described, then refused: exit 2.
    r = subprocess.run([BIN, "info", "--workload", name, "--batch-size", "2", "--json", "-"], capture_output=True,
                       text=True)
    assert r.returncode in (0, 2), r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", list(SHAPES))
def test_parameters_and_macs_match_the_pytorch_definition(name):
    model = Transformer(name)
    params = sum(p.numel() for p in model.parameters())  # a tied table once
    MACS[0] = 0
    model(torch.zeros(1, model.seq, dtype=torch.long, device="meta"))
    got = info(name)
    assert got["parameters"] == params, name
    assert got["forward_macs_per_sample"] == MACS[0], name


def test_the_published_sizes():
    # BertForPreTraining: 110,106,428 (bert-base-uncased), 336,226,108 (large); GPT-2 small 124,439,808 and medium
    # 354,823,168 (Hugging Face's GPT2LMHeadModel); LLaMA-7B 6,738,415,616 (Touvron et al.).
    expected = {"bert-base": 110106428, "bert-large": 336226108, "gpt2-small": 124439808, "gpt2-medium": 354823168,
                "llama-7b": 6738415616}
    for name, n in expected.items():
        assert info(name)["parameters"] == n, name


def test_a_shape_given_in_python_reaches_the_run():
    import ascendsim
    report = ascendsim.train("gpt", "loop-sink", batch_size=2, steps_per_epoch=4,
                             shape={"layers": 2, "hidden": 256, "heads": 4, "seq_length": 128})
    run = report.runs[0]
    assert run["model_flops"]["tokens_per_sample"] == 128
    assert run["model_flops"]["tokens_per_s"] == pytest.approx(128 * run["steady_state"]["samples_per_s"])
    assert 0 < run["model_flops"]["mfu"] < run["device_busy_fraction"]
    with pytest.raises(ascendsim.InputError, match="shape: unknown key 'depth'"):
        ascendsim.train("gpt", "loop-sink", shape={"depth": 2})
    with pytest.raises(ascendsim.InputError, match="--heads"):
        ascendsim.train("gpt", "loop-sink", shape={"heads": 5})


def test_tensor_parallel_and_a_sharded_optimizer_from_python():
    import ascendsim
    shape = {"layers": 2, "hidden": 256, "heads": 4, "seq_length": 128}
    tp = ascendsim.train("gpt", "loop-sink", batch_size=2, steps_per_epoch=4, devices=4, tensor_parallel=2,
                         optimizer_shard=True, shape=shape)
    p = tp["parallel"]
    assert p["tensor_parallel"] == 2 and p["data_shards"] == 2
    assert p["gradient_group"] == {"size": 2, "stride": 2}
    run = tp.runs[0]
    assert run["exposed_comm"]["operators_ms_per_step"] > 0
    # Two groups of two devices, each its own 2 sequences: 4 sequences a step, not 4 x 2.
    steady = run["steady_state"]
    assert steady["samples_per_s"] == pytest.approx(4 / (steady["step_ms_mean"] / 1e3))
    with pytest.raises(ascendsim.InputError, match="tensor_parallel|--tensor-parallel"):
        ascendsim.train("gpt", "loop-sink", devices=4, tensor_parallel=3, shape=shape)


def test_sharded_gradients_from_python():
    import ascendsim
    shape = {"layers": 2, "hidden": 256, "heads": 4, "seq_length": 128}
    runs = {level: ascendsim.train("gpt", "graph-sink", batch_size=8, steps_per_epoch=2, devices=4,
                                   gradient_accumulation=4, amp_level="O3", optimizer_shard_level=level, shape=shape)
            for level in (1, 2)}
    assert runs[1]["recipe"]["gradients_sharded"] is False and runs[2]["recipe"]["gradients_sharded"] is True
    assert runs[1]["recipe"]["optimizer_shard"] == runs[2]["recipe"]["optimizer_shard"] == 4
    with pytest.raises(ascendsim.InputError, match="optimizer-shard-level|optimizer_shard_level"):
        ascendsim.train("gpt", "graph-sink", devices=4, optimizer_shard_level=5, shape=shape)
    with pytest.raises(ascendsim.InputError, match="optimizer_shard_level"):
        ascendsim.train("gpt", "graph-sink", devices=4, optimizer_shard_level="2", shape=shape)


def test_sequence_parallel_from_python():
    import ascendsim
    shape = {"layers": 2, "hidden": 256, "heads": 4, "seq_length": 128}
    sp = ascendsim.train("gpt", "loop-sink", batch_size=2, steps_per_epoch=4, devices=2, tensor_parallel=2,
                         sequence_parallel=True, shape=shape)
    p = sp["parallel"]
    assert p["sequence_parallel"] is True and p["output_strategies"]["embed/Reshape"] == "((2,1))"
    kinds = {c["kind"] for c in p["collectives"] if c["name"].startswith("h.")}
    assert kinds == {"AllGather", "ReduceScatter"}  # no AllReduce of the layers' activations left
    with pytest.raises(ascendsim.InputError, match="--sequence-parallel: .*--tensor-parallel 2 or more"):
        ascendsim.train("gpt", "loop-sink", sequence_parallel=True, shape=shape)
    with pytest.raises(ascendsim.InputError, match="sequence_parallel"):
        ascendsim.train("gpt", "loop-sink", sequence_parallel="yes", shape=shape)


def test_recomputation_from_python_costs_the_forward_again():
    import ascendsim
    shape = {"layers": 2, "hidden": 256, "heads": 4, "seq_length": 128}
    plain = ascendsim.train("gpt", "loop-sink", batch_size=2, steps_per_epoch=4, shape=shape)
    again = ascendsim.train("gpt", "loop-sink", batch_size=2, steps_per_epoch=4, shape=shape, recompute=True)
    busy = [r.runs[0]["breakdown_s"]["device_compute"] for r in (plain, again)]
    assert busy[0] < busy[1] < 2 * busy[0]  # the layers' forward once more: less than the whole step again


def test_pipeline_stages_from_python_report_each_stage():
    import ascendsim
    shape = {"layers": 4, "hidden": 256, "heads": 4, "seq_length": 128}
    r = ascendsim.train("gpt", "graph-sink", batch_size=8, steps_per_epoch=4, devices=4, pipeline_stages=4,
                        micro_batches=8, shape=shape)
    assert r["parallel"]["pipeline"]["stages"] == 4 and r["parallel"]["pipeline"]["micro_batch"] == 1
    p = r.runs[0]["pipeline"]
    assert p["micro_batches"] == 8 and len(p["per_stage"]) == 4
    assert [s["layers"] for s in p["per_stage"]] == [[0, 0], [1, 1], [2, 2], [3, 3]]
    for s in p["per_stage"]:
        assert 0 < s["bubble_ms"] <= s["exposed_exchange_ms"] < s["step_ms"]
    # A stage's step is its busy time, its waits in the pipeline and the host's: the same on every stage.
    steps = [s["step_ms"] for s in p["per_stage"]]
    assert max(steps) - min(steps) < 0.01 * max(steps)
    # The whole batch of 8 a step (one pipeline): samples/s from the steady step.
    steady = r.runs[0]["steady_state"]
    assert steady["samples_per_s"] == pytest.approx(8 / (steady["step_ms_mean"] / 1e3))
    with pytest.raises(ascendsim.InputError, match="micro.batches"):
        ascendsim.train("gpt", "graph-sink", batch_size=8, devices=4, pipeline_stages=4, micro_batches=3, shape=shape)
