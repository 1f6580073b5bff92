"""What every figure shares: matplotlib chosen (Agg) only when a figure is drawn, the paper's sizes and fonts (with the
CJK font where a name needs it), labels fitted to the axes, and saving as .png and .svg."""
from __future__ import annotations

import functools
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from compressors.base import PALETTE
from compressors.registry import compressor_class

COLUMN_IN = 3.4

PAGE_IN = 6.8

_STYLE = {
    "font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "legend.fontsize": 7,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "savefig.dpi": 200,
}


Style = tuple[str, str, str]  # matplotlib colour, marker, line style
LINE_STYLES = ("-", "--", ":", "-.")


def compressor_style(kind: str) -> tuple[str, str]:
    """(colour, marker) of the compressor a recorded kind names, from its class (``Compressor.style``); a kind
    whose class this machine cannot import gets a palette colour fixed by its letters."""
    cls = compressor_class(kind)
    if cls is None:
        return PALETTE[zlib.crc32(kind.encode()) % len(PALETTE)], "P"
    return cls.style()


def arm_styles(kinds: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, Style]:
    """A style per arm label, for arms given as (label, compressor kind): the compressor's colour and marker, and
    the arms of one compressor in one figure told apart by line style (in the order given)."""
    pairs = kinds.items() if isinstance(kinds, Mapping) else kinds
    seen: dict[str, int] = {}
    out: dict[str, Style] = {}
    for label, kind in pairs:
        if label in out:
            continue
        colour, marker = compressor_style(kind)
        nth = seen[kind] = seen.get(kind, -1) + 1
        out[label] = (colour, marker, LINE_STYLES[nth % len(LINE_STYLES)])
    return out


def pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


@functools.lru_cache(maxsize=1)
def cjk_family() -> str | None:
    """The family name of the CJK font (Noto Sans CJK, from the ``noto-cjk-sans-jp-regular`` package: every
    Chinese, Japanese and Korean glyph), registered with matplotlib once; None when the package is absent."""
    try:
        from noto_cjk_sans_jp_regular import FONT_PATH
    except ImportError:
        return None
    from matplotlib import font_manager

    font_manager.fontManager.addfont(str(FONT_PATH))
    return font_manager.FontProperties(fname=str(FONT_PATH)).get_name()


def paper_style() -> dict[str, Any]:
    """The figures' style; the CJK font follows the default sans-serif, so matplotlib draws a character with it
    only where the first font has no glyph (a task or arm named in Chinese, as LongBench's Chinese tasks may be)."""
    family = cjk_family()
    return {**_STYLE, "font.family": ["sans-serif", family]} if family else _STYLE


def save(fig, path: str | Path) -> list[Path]:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in (".png", ".svg"):
        target = path.with_suffix(suffix)
        fig.savefig(target, bbox_inches="tight")
        written.append(target)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return written


def fit(label: str, width: int = 40) -> str:
    """A label that leaves the axes room: a long one keeps its start and end around an ellipsis; a control
    character (a NUL, a tab) is shown escaped, as no font draws it."""
    label = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in label)
    return label if len(label) <= width else f"{label[: width // 2 - 1]}…{label[-(width // 2 - 1):]}"


def two_lines(name: str, columns: int) -> str:
    """A panel title that fits its column: a long name breaks at the underscore nearest its middle."""
    name = fit(name)
    if len(name) * columns <= 60 or "_" not in name:
        return name
    cut = min((i for i, ch in enumerate(name) if ch == "_"), key=lambda i: abs(i - len(name) / 2))
    return name[: cut + 1] + "\n" + name[cut + 1:]
