"""Splitting long texts into chunks, by one documented rule.

The rule (docs/knowledge.md): a text of at most ``max_chars`` characters is one chunk. A longer
text is cut at the best boundary before ``max_chars``: a blank line (paragraph), else a line end,
else the end of a sentence (``.``, ``!``, ``?`` followed by a space), else a space, else anywhere.
Each next chunk starts ``overlap`` characters before the previous cut (moved forward to a word
start), so a sentence cut in two is still whole in one of them. Whitespace at chunk edges is
dropped and empty chunks are skipped.
"""

from __future__ import annotations

import re

from .._errors import UserError

__all__ = ("chunk_text",)

_SENTENCE_END = re.compile(r"[.!?][\"')\]]?\s")


def _cut(text: str, start: int, end: int) -> int:
    """The best cut in ``text[start:end]``, as an index in ``text`` (> start)."""
    window = text[start:end]
    floor = len(window) // 2  # never cut in the first half: chunks stay near max_chars
    for separator in ("\n\n", "\n"):
        at = window.rfind(separator, floor)
        if at > 0:
            return start + at + len(separator)
    last = None
    for match in _SENTENCE_END.finditer(window, floor):
        last = match.end()
    if last is not None:
        return start + last
    at = window.rfind(" ", floor)
    if at > 0:
        return start + at + 1
    return end


def chunk_text(text: str, *, max_chars: int = 1200, overlap: int = 150) -> list[str]:
    """Split ``text`` into chunks of at most ``max_chars`` characters (see the module's rule).

    Args:
        text: The text.
        max_chars: The longest chunk.
        overlap: Characters of the previous chunk repeated at the start of the next one.
    """
    if max_chars < 50:
        raise UserError(f"max_chars must be >= 50, got {max_chars}.")
    if not 0 <= overlap < max_chars // 2:
        raise UserError(f"overlap must be >= 0 and less than half of max_chars ({max_chars}), got {overlap}.")
    chunks: list[str] = []
    start, n = 0, len(text)
    while start < n:
        end = min(start + max_chars, n)
        cut = end if end == n else _cut(text, start, end)
        piece = text[start:cut].strip()
        if piece:
            chunks.append(piece)
        if cut >= n:
            break
        nxt = max(cut - overlap, start + 1)
        if overlap:
            space = text.find(" ", nxt, cut)  # start the overlap on a word
            nxt = space + 1 if space != -1 else cut
        start = nxt
    return chunks
