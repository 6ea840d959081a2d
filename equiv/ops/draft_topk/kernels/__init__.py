"""Triton kernels behind the ``fused_triton`` path.

``fused_softmax_topk`` holds the kernel and the wrapper that picks its block sizes; ``tune``
is the variant sweep whose figures are in docs/kernel-notes.md. Nothing here is imported by
``equiv`` until a path is called, so Triton stays optional.
"""
