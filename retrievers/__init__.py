"""Retrievers: score chunks for queries. Imports ``indexes`` only."""
from retrievers.base import Hit, Retriever, titled_text

__all__ = ["Hit", "Retriever", "titled_text"]
