"""The shared records: a scored passage is the passage with its score and nothing else changed."""
from dataclasses import fields, replace

import pytest

from indexes.types import Passage


def test_scored_equals_replace_and_leaves_the_original():
    values = {f.name: v for f, v in zip(fields(Passage), ("text", "title", "d7", True, True, 0.5))}
    assert set(values) == {f.name for f in fields(Passage)}, "a new field needs a value here"
    passage = Passage(**values)
    scored = passage.scored(0.25)
    assert scored == replace(passage, score=0.25) and hash(scored) == hash(replace(passage, score=0.25))
    assert passage.score == 0.5 and scored.score == 0.25
    with pytest.raises(AttributeError):  # still frozen
        scored.score = 1.0  # type: ignore[misc]
