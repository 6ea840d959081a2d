"""Verifiers that misbehave in the ways the verify judge must turn into verdicts (loaded by spec,
so they run in the supervised worker)."""
import os
import time

import torch

from equiv.ops.verify.paths import torch_sampler


def correct(d, q, p, g):
    return torch_sampler(d, q, p, g)


def raises(d, q, p, g):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def int32_output(d, q, p, g):
    return torch_sampler(d, q, p, g).int()


def drops_bonus(d, q, p, g):
    return torch_sampler(d, q, p, g)[:, :-1]


def edits_target_probs(d, q, p, g):
    p[0, 0, 0] += 1.0
    return torch_sampler(d, q, p, g)


def ignores_generator(d, q, p, g):
    return torch_sampler(d, q, p, torch.Generator(device=p.device).manual_seed(time.time_ns() % 2**31))


def hangs(d, q, p, g):
    time.sleep(600)


def exits(d, q, p, g):
    os._exit(0)


def interrupts(d, q, p, g):
    raise KeyboardInterrupt


def two_arguments(d, q):
    return d
