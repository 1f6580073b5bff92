"""What in-process readers share: whether a request is read as chat, and fitting its prompt into the window.

``HFReader`` (transformers) and ``LlamaCppReader`` (llama.cpp) turn a request
into the token ids the model sees the same way, so the same prompt cut by the
same policy reaches either engine:

1. chat or not: the request's ``chat``, else the reader's, else "when the
   model has a chat template";
2. the prompt text is truncated (``truncation`` policy, in the model's tokens)
   to ``max_context - max_new_tokens`` less the tokens the template itself adds
   (measured once per (chat, system) by rendering an empty prompt);
3. the template is applied once; ids that still overflow (a decode/encode round
   trip can merge tokens differently) are cut as a last resort.
"""
from __future__ import annotations

from abc import abstractmethod

from readers.base import GenerationRequest, Reader, ReaderError
from readers.truncation import prompt_budget, truncate_ids, truncate_text


class LocalReader(Reader):
    """A reader whose model runs in this process; subclasses implement ``_render`` and set the fields below."""

    model_name: str = ""
    chat: bool | None = None
    has_chat_template: bool = False

    @abstractmethod
    def _render(self, prompt: str, chat: bool, system: str | None = None) -> list[int]:
        """Token ids the model sees for ``prompt``: the chat template applied once (with a system message when
        given), or the raw prompt with the model's special tokens (the system text glued in front)."""

    def _use_chat(self, req: GenerationRequest) -> bool:
        wanted = req.chat if req.chat is not None else self.chat
        if wanted is None:
            return self.has_chat_template
        if wanted and not self.has_chat_template:
            raise ReaderError(f"chat=True but the tokenizer of {self.model_name} has no chat template")
        return wanted

    def prompt_overhead(self, request: GenerationRequest) -> int:
        """The rendered template's tokens around an empty prompt (chat turns, system message, special tokens)."""
        chat = self._use_chat(request)
        overhead = self.__dict__.setdefault("_overhead", {})
        key = (chat, request.system)
        if key not in overhead:
            overhead[key] = len(self._render("", chat, request.system))
        return overhead[key]

    def _prepare(self, req: GenerationRequest) -> tuple[list[int], bool]:
        """(prompt ids, whether the prompt was truncated) for one request."""
        chat = self._use_chat(req)
        budget = prompt_budget(self.max_context, req.max_new_tokens) - self.prompt_overhead(req)
        prompt, truncated = truncate_text(req.prompt, self.tokenizer, max(budget, 1), self.truncation)
        ids = self._render(prompt, chat, req.system)
        if self.truncation != "none" and len(ids) + req.max_new_tokens > self.max_context:
            ids, truncated = truncate_ids(ids, self.max_context - req.max_new_tokens, self.truncation), True
        return ids, truncated


__all__ = ["LocalReader"]
