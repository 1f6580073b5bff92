"""RULER-style synthetic tasks generated at a target length in a given tokenizer's tokens (Hsieh et al., 2024).

Follows RULER (NVIDIA/RULER ``scripts/data/synthetic/*.py``, ``scripts/synthetic.yaml``):

- needles ``One of the special magic {numbers} for {key} is: {value}.``, keys adjective-noun words, values
  7-digit numbers; single (1 key), multi-key (4 keys, 1 asked), multi-value (4 values), multi-query (4 keys
  asked); in an essay haystack, needles go between sentences at depths drawn from 40 evenly spaced depths
  (0-100 %); in the noise haystack (RULER's five sentences repeated), between repeats;
- variable tracking: one chain of 4 hops (``VAR ABCDE = 12345``, ``VAR FGHIJ = VAR ABCDE``) in the noise
  haystack, statements in order at random places; the answer is every variable of the chain;
- common words: a numbered list with 10 words 30 times each and the others 3 times each (6 and 1 below 4k);
- frequent words: coded 6-letter words drawn from a zeta distribution (alpha 2) over ``max_length // 50`` words,
  the commonest replaced by ``...``; the answer is the next three;
- QA: the question's gold passage among distractor passages of other questions, shuffled, as
  ``Document {i}:\\n{text}``;
- size: the largest haystack (a binary search, as RULER's) whose prompt, template and answer prefix included, plus
  the tokens to generate, fits ``max_length`` tokens; a sample that overflows shrinks by RULER's increment.

Differs from RULER (docs/protocols.md): sentences are split by a regular expression (RULER: NLTK punkt);
keys and common words come from the project's own word lists and pseudo-words (RULER: ``wonderwords`` and an
English word list); the essay haystack is text the user gives (RULER: Paul Graham's essays) or, by default,
the project's own invented-fact prose; QA reads any multi-document or Lost in the Middle QA file (RULER: SQuAD,
HotpotQA); no few-shot example before variable tracking and common words; one ``random.Random(seed)`` drives
everything, so the same seed gives the same records but not RULER's.
"""
from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Sequence
from typing import Any

from core.errors import UserError
from experiments.data.records import Example
from experiments.tasks.ruler.kinds import _CTX, INCREMENT, NEEDLE, NOISE, TASKS, _Draw, _insert, _sentences


class Generator:
    """Builds one task's records at one length; ``count`` measures a prompt in the target tokenizer's tokens."""

    def __init__(self, task: str, template: str, prefix: str, tokens_to_generate: int, count: Callable[[str], int],
                 *, essay: str | None = None, documents: Sequence[Example] = (), seed: int = 0) -> None:
        if task not in TASKS:
            raise UserError(f"unknown RULER task {task!r}; choose from {', '.join(TASKS)}")
        self.task, self.setting = task, TASKS[task]
        self.template, self.prefix, self.generate_tokens, self.count = template, prefix, tokens_to_generate, count
        self.seed = seed
        self.essay_words = re.sub(r"\s+", " ", essay).strip().split(" ") if essay else []
        self.documents = [ex for ex in documents if ex.passages and ex.answers]
        if self.setting.kind == "qa" and len(self.documents) < 2:
            raise UserError("the RULER qa task needs a QA source with passages and answers (qa_source / --qa-source)")
        gold = [next((p for p in ex.passages if p.is_gold), ex.passages[0]) for ex in self.documents]
        self.pool = list({p.text: p for p in gold}.values())
        haystack = "essay" if self.essay_words and self.setting.kind == "niah" else \
            "noise" if self.setting.kind == "niah" else self.setting.haystack
        self.haystack = haystack
        self.step = INCREMENT[haystack]

    def _step(self, max_length: int) -> int:
        """RULER's increments (essay 500 words, noise 25 sentences, 5 below 4k tokens); an essay step never above
        an eighth of the target, so short targets still fit."""
        if self.haystack == "essay":
            return max(25, min(self.step, max_length // 8))
        return 5 if max_length < 4096 else self.step

    # -- one sample -------------------------------------------------------------------------------------------------
    def _niah(self, size: int, draw: _Draw, max_length: int) -> dict[str, Any]:
        s = self.setting
        singular = s.queries * s.values == 1
        keys, values, needles = [], [], []
        for _ in range(max(s.keys, s.queries)):
            keys.append(draw.key())
            values.append([draw.number() for _ in range(s.values)])
            needles += [NEEDLE.format(type_needle_v="numbers", key=keys[-1], value=v) for v in values[-1]]
        draw.rng.shuffle(needles)
        if self.essay_words:
            words = (self.essay_words * (size // len(self.essay_words) + 1))[:size]
            units, _ = _insert(_sentences(" ".join(words)), needles, draw, at_depths=True)
            context = " ".join(units)
        else:
            units, _ = _insert([NOISE] * size, needles, draw, at_depths=False)
            context = "\n".join(units)
        asked = draw.rng.sample(range(len(keys)), s.queries)
        queries = [keys[i] for i in asked]
        query = ", ".join(queries[:-1]) + ", and " + queries[-1] if len(queries) > 1 else queries[0]
        answers = [v for i in asked for v in values[i]]
        return {"context": context, "query": query, "outputs": answers, "singular": singular,
                "type_needle_v": "number" if singular else "numbers"}

    def _vt(self, size: int, draw: _Draw, max_length: int) -> dict[str, Any]:
        names: list[str] = []
        while len(names) < 5:
            name = "".join(draw.rng.choices(string.ascii_uppercase, k=5))
            names += [] if name in names else [name]
        value = draw.number(5)
        chain = [f"VAR {names[0]} = {value}"] + [f"VAR {names[j + 1]} = VAR {names[j]} " for j in range(4)]
        units, _ = _insert([NOISE] * size, chain, draw, at_depths=False)
        return {"context": "\n".join(units).replace(". \n", ".\n"), "query": value, "outputs": names, "num_v": 5}

    def _cwe(self, size: int, draw: _Draw, max_length: int) -> dict[str, Any]:
        size = max(size, 11)
        vocab: list[str] = []
        seen: set[str] = set()
        while len(vocab) < size:
            word = draw.pseudo_word()
            if word not in seen:
                seen.add(word)
                vocab.append(word)
        common, rare = vocab[:10], vocab[10:]
        repeats = (6, 1) if max_length < 4096 else (30, 3)
        words = common * repeats[0] + rare * repeats[1]
        draw.rng.shuffle(words)
        return {"context": " ".join(f"{i + 1}. {w}" for i, w in enumerate(words)), "query": "", "outputs": common}

    def _fwe(self, size: int, draw: _Draw, max_length: int) -> dict[str, Any]:
        from scipy.special import zeta

        vocab_size = max(10, (max_length - self.generate_tokens) // 50)
        vocab = sorted({"".join(draw.rng.choices(string.ascii_lowercase, k=6)) for _ in range(vocab_size)})
        draw.rng.shuffle(vocab)
        vocab[0] = "..."
        words = [w for k, w in enumerate(vocab, start=1) for _ in range(int(size * k ** -2.0 / zeta(2.0)))]
        draw.rng.shuffle(words)
        return {"context": " ".join(words), "query": "", "outputs": vocab[1:4]}

    def _qa(self, size: int, draw: _Draw, max_length: int, index: int = 0) -> dict[str, Any]:
        item = self.documents[index % len(self.documents)]
        gold = next((p for p in item.passages if p.is_gold), item.passages[0])
        pool = [p for p in self.pool if p.text != gold.text]
        others = draw.rng.sample(pool, min(len(pool), max(0, size - 1)))
        docs = [gold] + others
        draw.rng.shuffle(docs)
        text = lambda p: f"{p.title}\n{p.text}" if p.title else p.text  # noqa: E731  (RULER's hotpotqa docs)
        context = "\n\n".join(f"Document {i}:\n{text(p)}" for i, p in enumerate(docs, start=1))
        return {"context": context, "query": item.query, "outputs": list(item.answers),
                "gold_position": docs.index(gold), "num_docs": len(docs)}

    def sample(self, size: int, draw: _Draw, max_length: int, index: int = 0) -> dict[str, Any]:
        kind = self.setting.kind
        if kind == "qa":
            return self._qa(size, draw, max_length, index)
        build = {"niah": self._niah, "variable_tracking": self._vt, "common_words_extraction": self._cwe,
                 "freq_words_extraction": self._fwe}[kind]
        return build(size, draw, max_length)

    # -- prompt and size --------------------------------------------------------------------------------------------
    def render(self, fields: dict[str, Any]) -> tuple[str, str, str]:
        """(input before the answer prefix, answer prefix, question after the context) with RULER's singular wording."""
        template, prefix = self.template, self.prefix
        if fields.get("singular"):
            for old, new in (("Some", "A"), ("are all", "is"), ("are", "is"), ("answers", "answer")):
                template, prefix = template.replace(old, new), prefix.replace(old, new)
        values = {"query": str(fields.get("query", "")), "type_needle_v": str(fields.get("type_needle_v", "")),
                  "num_v": str(fields.get("num_v", ""))}
        fill = lambda t: re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), t)  # noqa: E731
        filled = fill(template)
        before, after = filled.split("{context}", 1)
        return before + _CTX + after, fill(prefix), after.strip()

    def length(self, fields: dict[str, Any]) -> int:
        prompt, prefix, _ = self.render(fields)
        return self.count(prompt.replace(_CTX, fields["context"]) + prefix) + self.generate_tokens

    def fit(self, max_length: int) -> int:
        """RULER's answer to "the largest haystack size whose first sample fits ``max_length``" (its binary search),
        found with fewer token counts: tokens grow about linearly in the size, so a few secant steps give a guess,
        a bracket around the guess is checked, and a binary search inside it finds the exact size.  ``fits`` is
        monotone (a larger haystack holds a smaller one's units), so the answer is the binary search's; each
        count tokenizes a whole prompt (up to tens of thousands of tokens), and this takes 5-7 counts instead
        of 12-15, which is most of a length grid's dry run."""
        step = self._step(max_length)
        probe = f"{self.seed}:{self.task}:{max_length}:fit"
        counted: dict[int, int] = {}

        def tokens(size: int) -> int:
            if size not in counted:
                counted[size] = self.length(self.sample(size, _Draw(probe), max_length))
            return counted[size]

        first, second = tokens(step), tokens(2 * step)
        if first > max_length:
            raise UserError(f"RULER {self.task}: even {step} haystack units exceed {max_length} tokens")
        if second <= first:  # tokens do not grow with the size: RULER's search from the bottom
            return self._bisect(lambda size: tokens(size) <= max_length, step, 2 * step)
        (a, ta), (b, tb) = (step, first), (2 * step, second)
        guess = b
        for _ in range(3):  # the secant through the last two counts, until it settles
            if tb == ta:
                break
            guess = max(step, b + int((max_length - tb) * (b - a) / (tb - ta)))
            if abs(guess - b) <= 2:
                break
            (a, ta), (b, tb) = (b, tb), (guess, tokens(guess))
        if tokens(guess) <= max_length < tokens(guess + 1):
            return guess  # the usual case: the secant lands on the answer
        margin = 4  # the guess is off by a unit or two; a miss doubles the bracket
        lo, hi = max(step, guess - margin), guess + margin
        while lo > step and tokens(lo) > max_length:  # the bracket's bottom must fit ...
            lo, margin = max(step, lo - 2 * margin), 2 * margin
        while tokens(hi) <= max_length:  # ... and its top must not
            lo, hi, margin = hi, hi + 2 * margin, 2 * margin
        return self._bisect(lambda size: tokens(size) <= max_length, lo, hi)

    @staticmethod
    def _bisect(fits: Callable[[int], bool], lo: int, hi: int) -> int:
        """RULER's search: the upper bound doubles while it fits, then the largest fitting size in ``[lo, hi]``."""
        while fits(hi):
            lo, hi = hi, 2 * hi
        best = lo
        while lo <= hi:
            mid = (lo + hi) // 2
            if fits(mid):
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return best

    def records(self, n: int, max_length: int) -> list[dict[str, Any]]:
        """``n`` records at ``max_length`` tokens (template, answer prefix and tokens to generate included)."""
        size, step = self.fit(max_length), self._step(max_length)
        out = []
        for i in range(n):
            draw = _Draw(f"{self.seed}:{self.task}:{max_length}:{i}")
            used = size
            while True:
                fields = self.sample(used, draw, max_length, i)
                length = self.length(fields)
                if length <= max_length or used <= step:
                    break
                used -= step
                draw = _Draw(f"{self.seed}:{self.task}:{max_length}:{i}:{used}")
            prompt, prefix, question = self.render(fields)
            first = fields["context"].find(fields["outputs"][0]) if fields["outputs"] else -1
            out.append({
                "id": f"ruler_{self.task}-{max_length}-{i}", "task": f"ruler_{self.task}", "kind": self.setting.kind,
                "index": i, "input": prompt.replace(_CTX, fields["context"]), "answer_prefix": prefix,
                "outputs": fields["outputs"], "length": length, "max_length": max_length, "context": fields["context"],
                "query": fields["query"],
                "question": fields["query"] if self.setting.kind == "qa" else question or prompt.replace(_CTX, "").strip(),
                "depth": round(first / max(1, len(fields["context"])), 4) if first >= 0 else None,
                **{k: fields[k] for k in ("type_needle_v", "num_v", "singular", "gold_position", "num_docs") if k in fields},
                "haystack": self.haystack, "seed": self.seed,
            })
        return out


def own_essay(words: int = 20_000, seed: int = 0) -> str:
    """The project's own essay haystack: the invented-fact prose of ``experiments.data.synthetic`` (plain English
    sentences about fictional places and people), about ``words`` words; repeated by the generator when short."""
    from experiments.data.synthetic import make_multidoc_qa

    docs = make_multidoc_qa(max(1, words // 800), num_docs=10, words_per_doc=80, seed=seed)
    return " ".join(p.text for ex in docs for p in ex.passages)


@functools.lru_cache(maxsize=8)
def token_counter(spec: str) -> Callable[[str], int]:
    """How many tokens a text is for ``spec``: ``words`` (LongBench words), ``tiktoken:NAME``, a Hugging Face
    tokenizer id or folder, or ``reader:NAME`` (that reader's own tokenizer: read without its model where the
    reader can say it (``readers.sizing``), else from the reader built as a run builds it); built once per spec."""
    if spec.startswith("reader:"):
        from readers.registry import make_reader
        from readers.sizing import reader_sizing

        sizing = reader_sizing(spec.removeprefix("reader:"))
        tokenizer = sizing.tokenizer if sizing.same_tokens else make_reader(spec.removeprefix("reader:")).tokenizer
    else:
        from readers.tokenizers import load_tokenizer

        tokenizer = load_tokenizer(spec)
    count = getattr(tokenizer, "count", None)  # without ids where the tokenizer can (readers.sizing.JsonTokenizer)
    return count if callable(count) else lambda text: len(tokenizer.encode(text))


def generate(task: str, lengths: Sequence[int], n: int, *, count: Callable[[str], int], seed: int = 0,
             haystack: str = "essay", essay_text: str | None = None, qa_examples: Sequence[Example] = ()
             ) -> list[dict[str, Any]]:
    """``n`` records of RULER task ``task`` at each length (tokens as ``count`` measures them), length-major.

    ``haystack``: ``essay`` (``essay_text``, else the project's own prose) or ``noise`` (RULER's sentences) for
    the needle tasks; variable tracking always uses noise, as RULER's ``vt``.
    """
    from experiments.tasks.specs import get_task

    if n < 1 or not lengths or min(lengths) < 256:
        raise UserError(f"need n >= 1 and lengths >= 256 tokens, got n={n}, lengths={list(lengths)}")
    if haystack not in ("essay", "noise"):
        raise UserError(f"haystack must be 'essay' or 'noise' (a text file gives essay_text), got {haystack!r}")
    if task not in TASKS:
        raise UserError(f"unknown RULER task {task!r}; choose from {', '.join(TASKS)}")
    spec = get_task(f"ruler_{task}")
    template = spec.prompt
    cut = template.index("{context}")
    tail = template[cut:]
    prefix_at = max(tail.rfind(" The special"), tail.rfind(" Answer:"))
    essay = None
    if haystack == "essay" and TASKS[task].kind == "niah":
        essay = essay_text if essay_text is not None else own_essay(seed=seed)
    gen = Generator(task, template[:cut] + tail[:prefix_at], tail[prefix_at:], spec.max_new_tokens, count,
                    essay=essay, documents=qa_examples, seed=seed)
    return [record for length in lengths for record in gen.records(n, length)]
