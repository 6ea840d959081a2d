"""Device selection shared by the CLI, the plugin and the harnesses."""
from __future__ import annotations

from equiv.errors import NoDeviceError
from equiv.validation import check_choice

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(name: str = "auto") -> str:
    """'auto' -> 'cuda' when a GPU is present, else 'cpu'; 'cuda' without a GPU is an error."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch

    name = check_choice("device", name, DEVICE_CHOICES)
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise NoDeviceError("device='cuda' but no CUDA GPU is visible: use --device cpu or auto")
    return name
