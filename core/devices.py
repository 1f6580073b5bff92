"""Where a model runs: ``device='auto'`` means the GPU when torch sees one, else the CPU."""
from __future__ import annotations


def resolve_device(device: str) -> str:
    """``'auto'`` -> ``'cuda'`` when torch sees a GPU, else ``'cpu'``; any other value as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


__all__ = ["resolve_device"]
