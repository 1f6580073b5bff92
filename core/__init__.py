"""The ground every ctxcomp package stands on: errors, the registry and its checks, retries, counting, paths, files.

It imports no other ctxcomp package, and every package may import it.
"""
from core.checks import Nested, check_params, constructor_parameters
from core.errors import ParamError, TransientError, UnknownComponentError, UserError
from core.registry import ComponentSpec, Registry, SpecLike, registries
from core.retry import RetryPolicy, Transient, parse_retry_after
from core.text import count_words, word_pieces, word_spans

__all__ = [
    "ComponentSpec", "Nested", "ParamError", "Registry", "RetryPolicy", "SpecLike", "Transient", "TransientError",
    "UnknownComponentError", "UserError", "check_params", "constructor_parameters", "count_words",
    "parse_retry_after", "registries", "word_pieces", "word_spans",
]
