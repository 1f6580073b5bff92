"""What went wrong, in three kinds: the user's mistake, a remote fault, or a bug (any other exception).

Every floor raises these, so they live in the ground.  The CLI prints a
``UserError`` as one line and exits 2; the runner records an
``ExampleFailure`` (a remote fault after retries, a request the server refused,
a context that could not be compressed) as a failed example; anything else
stops the run with its traceback.
"""
from __future__ import annotations


class UserError(ValueError):
    """Something the user gave is wrong: a config, a data file, a parameter, a command line, the disk."""


class UnknownComponentError(UserError, KeyError):
    """A config named a component, task or metric that no registry knows."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ParamError(UserError):
    """A component got a parameter it does not take, misses a required one, or got a bad value."""


class PluginError(UserError):
    """A plugin (a component from outside ctxcomp) cannot be used as configured: its module is not found or
    fails to import, its class misses abstract methods, or its constructor refused the parameters with a
    ``ValueError`` / ``TypeError``.  The CLI prints one line; ``ctxcomp --debug`` also prints the plugin's own
    traceback (the exception this one was raised from)."""


class ExampleFailure(RuntimeError):
    """This example could not be done, and another might: the runner records it as failed with this reason,
    never scores it, and ``--resume`` tries it again.  Any other exception stops the run."""


class TransientError(ExampleFailure):
    """A remote service kept failing (network, timeouts, 429/5xx) after every retry.

    The runner records the example as failed with this reason and ``--resume``
    tries it again; it is never turned into an empty prediction.
    """


class RequestRejected(ExampleFailure):
    """A server refused this one request (HTTP 400, 413, 422, ...: too long, filtered); retrying cannot help."""


__all__ = ["ExampleFailure", "ParamError", "PluginError", "RequestRejected", "TransientError", "UnknownComponentError", "UserError"]
