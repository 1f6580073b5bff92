"""Data: the ``Example`` record, loaders for the published formats, synthetic data, files on disk."""
from experiments.data.loaders import DataError, load_examples
from experiments.data.records import Example

__all__ = ["DataError", "Example", "load_examples"]
