"""`TokenCounter` -- tiktoken counts, cached per message so a growing history costs only its new messages."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = (
    'DEFAULT_ENCODING',
    'ENCODING_ENV',
    'ESTIMATE',
    'TokenCounter',
    'TokenizerUnavailableError',
    'check_encoding',
    'encoding_for_model',
)

DEFAULT_ENCODING: Final = 'o200k_base'
ENCODING_ENV: Final = 'MEMENTOGRAPH_ENCODING'
ESTIMATE: Final = 'estimate'
"""Encoding name that selects the documented estimator (4 characters a token) instead of tiktoken."""

MESSAGE_OVERHEAD_TOKENS: Final = 4
"""Role and framing tokens a chat API adds around each message (OpenAI's published figure)."""

_CACHE_LIMIT: Final = 200_000

_MODEL_ENCODINGS: Final = (
    ('gpt-3.5', 'cl100k_base'),
    ('gpt-4-', 'cl100k_base'),
    ('gpt-4', 'o200k_base'),  # gpt-4o, gpt-4.1, ...
    ('text-embedding-3', 'cl100k_base'),
)


class TokenizerUnavailableError(RuntimeError):
    """tiktoken could not load its BPE files (offline, no cache)."""


def encoding_for_model(model_name: str | None) -> str:
    """The tiktoken encoding for a model name; `o200k_base` for everything not known to differ, and
    `$MEMENTOGRAPH_ENCODING` whenever it is set (the user's choice, e.g. `estimate` offline, wins).

    Non-OpenAI models have no public tiktoken encoding; `o200k_base` is a close, documented stand-in.
    """
    chosen = os.environ.get(ENCODING_ENV)
    if chosen:
        return chosen
    if model_name:
        name = model_name.split(':', 1)[-1].lower()
        for prefix, encoding in _MODEL_ENCODINGS:
            if name.startswith(prefix):
                return encoding
    return DEFAULT_ENCODING


def _load_tiktoken(encoding: str) -> Callable[[str], int]:
    try:
        import tiktoken
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise TokenizerUnavailableError('tiktoken is not installed: pip install tiktoken') from exc
    try:
        enc = tiktoken.get_encoding(encoding)
    except ValueError as exc:
        raise TokenizerUnavailableError(_unknown_encoding(encoding)) from exc
    except Exception as exc:
        cache = os.environ.get('TIKTOKEN_CACHE_DIR') or os.environ.get('DATA_GYM_CACHE_DIR')
        where = f'TIKTOKEN_CACHE_DIR={cache!r} does not hold it' if cache else 'TIKTOKEN_CACHE_DIR is not set'
        raise TokenizerUnavailableError(
            f'cannot load the tiktoken encoding {encoding!r} ({type(exc).__name__}: {exc}); {where}. '
            'Fix: connect to the internet once so tiktoken can download it, or point TIKTOKEN_CACHE_DIR at a '
            'directory holding its BPE files, or choose the character estimator explicitly with '
            "encoding='estimate' (MEMENTOGRAPH_ENCODING=estimate)."
        ) from exc

    def count(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    return count


def check_encoding(encoding: str) -> None:
    """Raise `ValueError` for a name that is neither `'estimate'` nor a tiktoken encoding, loading no BPE file: a
    capability refuses a misspelt encoding when it is made, instead of failing at every request of every run."""
    import tiktoken

    if encoding != ESTIMATE and encoding not in tiktoken.list_encoding_names():
        raise ValueError(_unknown_encoding(encoding))


def _unknown_encoding(encoding: str) -> str:
    import tiktoken

    known = ', '.join(tiktoken.list_encoding_names())
    return f'unknown tiktoken encoding {encoding!r}: use one of {known}, or estimate (the character estimator)'


def _estimate(text: str) -> int:
    return (len(text) + 3) // 4


@dataclass
class TokenCounter:
    """Counts tokens of text and of pydantic-ai messages.

    Message counts are cached by message identity (messages are treated as immutable, as pydantic-ai asks),
    so recounting a history that grew by one message tokenizes only that message.

    Example:
        ```python
        counter = TokenCounter()
        counter.count_text('hello world')
        ```
    """

    encoding: str = field(default_factory=lambda: os.environ.get(ENCODING_ENV, DEFAULT_ENCODING))
    """tiktoken encoding name, or `'estimate'` for the 4-characters-a-token estimator (never chosen silently)."""

    defer_loading: bool = field(default=False, kw_only=True)
    """Load the encoding at the first count, not when made. The capability makes its counter before it logs a
    run's messages, and the log must not wait on (or be lost to) a tokenizer that cannot load: the count fails
    then, with the same `TokenizerUnavailableError`, and compaction is skipped with a warning."""
    _count: Callable[[str], int] | None = field(default=None, init=False, repr=False, compare=False)
    _load_error: TokenizerUnavailableError | None = field(default=None, init=False, repr=False, compare=False)
    _cache: OrderedDict[int, tuple[ModelMessage, int]] = field(
        default_factory=OrderedDict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not self.defer_loading:
            self._loaded()

    def _loaded(self) -> Callable[[str], int]:
        if self._count is None:
            if self._load_error is not None:  # tried once: a download that failed is not tried at every count
                raise self._load_error
            try:
                self._count = _estimate if self.encoding == ESTIMATE else _load_tiktoken(self.encoding)
            except TokenizerUnavailableError as exc:
                self._load_error = exc
                raise
        return self._count

    def count_text(self, text: str) -> int:
        """Tokens in `text`."""
        return self._loaded()(text) if text else 0

    def count_message(self, message: ModelMessage) -> int:
        """Tokens of one message, including the per-message framing overhead."""
        key = id(message)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is message:
            self._cache.move_to_end(key)
            return hit[1]
        from ._media import attachment_tokens  # here, not at the top: counting text alone never loads pydantic-ai
        from ._messages import message_text

        tokens = self.count_text(message_text(message)) + MESSAGE_OVERHEAD_TOKENS
        tokens += attachment_tokens(message, self.count_text)  # images and files: their placeholders say little
        self._cache[key] = (message, tokens)
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.popitem(last=False)
        return tokens

    def count_messages(self, messages: Sequence[ModelMessage]) -> int:
        """Tokens of a history."""
        return sum(self.count_message(message) for message in messages)
