"""Compressors: turn an example's context into what the reader sees."""
from compressors.base import CompressedContext, Compressible, CompressionError, Compressor

__all__ = ["Compressible", "CompressedContext", "CompressionError", "Compressor"]
