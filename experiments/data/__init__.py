"""Data: the ``Example`` record, reading record files, synthetic data, files on disk (a benchmark's own record
formats live in its folder, ``experiments/tasks/<benchmark>/``)."""
from experiments.data.records import Example
from experiments.data.sources import DataError

__all__ = ["DataError", "Example"]
