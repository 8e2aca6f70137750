from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolplan import UserError
from toolplan.knowledge import chunk_text

EXAMPLES = int(os.environ.get("TOOLPLAN_HYPOTHESIS_EXAMPLES", "50"))


def test_short_text_is_one_chunk_and_long_text_cuts_at_paragraphs() -> None:
    assert chunk_text("  hello world  ") == ["hello world"]
    text = ("First paragraph. " * 5).strip() + "\n\n" + ("Second paragraph here. " * 5).strip()
    chunks = chunk_text(text, max_chars=120, overlap=0)
    assert chunks[0].endswith("First paragraph.") and chunks[1].startswith("Second paragraph here.")


def test_bad_settings_are_refused() -> None:
    with pytest.raises(UserError, match="max_chars"):
        chunk_text("x", max_chars=10)
    with pytest.raises(UserError, match="overlap"):
        chunk_text("x", max_chars=100, overlap=60)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("ab .\n!?é東"), max_size=3000),
    max_chars=st.integers(50, 400),
    overlap=st.integers(0, 24),
)
def test_chunks_are_bounded_non_empty_and_cover_every_word(text: str, max_chars: int, overlap: int) -> None:
    chunks = chunk_text(text, max_chars=max_chars, overlap=overlap)
    assert all(0 < len(c) <= max_chars and c == c.strip() for c in chunks)
    joined = " ".join(chunks)
    assert all(word in joined for word in text.split())
    if overlap == 0:
        assert "".join(chunks).replace(" ", "").replace("\n", "") == "".join(text.split())
