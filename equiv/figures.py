"""Figures as PNG bytes for self-contained pages: matplotlib on Agg, never wider than the page.

``figure_png`` saves at ``DPI`` and saves again at a lower resolution if a long title or label
pushed the tight bounding box past ``PAGE_WIDTH_PX``; ``short_label`` keeps a long candidate
spec's end; ``b64`` embeds the bytes. Shared by the HTML tolerance report and the MTP plots.
"""
from __future__ import annotations

import base64
import io
import struct

from equiv.errors import MissingDependency

PAGE_WIDTH_PX = 1400
DPI = 110


def pyplot():
    """matplotlib.pyplot on the Agg backend, or a one-line error saying what to install."""
    try:
        # matplotlib.pyplot: 1.2 s to import (-X importtime, busy 2-core CPU; ~0.5 s idle)
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependency("plots need matplotlib: pip install matplotlib") from exc
    plt.switch_backend("Agg")             # pyplot resolves no backend on import: none but Agg is tried
    return plt


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) in pixels, from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return struct.unpack(">II", data[16:24])


def figure_png(fig, max_width: int = PAGE_WIDTH_PX) -> bytes:
    """The figure as PNG bytes no wider than ``max_width`` pixels; closes the figure."""
    plt = pyplot()
    dpi = DPI
    try:
        for _ in range(5):
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
            data = buf.getvalue()
            width = png_size(data)[0]
            if width <= max_width:
                return data
            dpi = int(dpi * 0.97 * max_width / width)   # text does not shrink quite linearly
        raise RuntimeError(f"figure is {width} px wide after 5 tries at fitting {max_width} px")
    finally:
        plt.close(fig)


def short_label(name: str, limit: int = 36) -> str:
    """A legend label no longer than ``limit``: a long candidate spec keeps its end (file:function)."""
    return name if len(name) <= limit else "..." + name[-(limit - 3):]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
