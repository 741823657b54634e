"""`_redact` -- privacy: the redaction hook applied to every text before it is archived, and `redact_secrets`.

Where it sits in the data flow: a message is redacted once on its way into the store (the session log and every
archived block), and everything else the store receives -- mementos, entities, pages, full-text rows -- is derived
from those redacted messages. So nothing the redactor catches can reach the store through a side door, and an LLM
compressor or judge never sees it either. The live context is not touched: the model keeps working with what it
was given; only the archive (and therefore `recover_block`) holds the redacted version.

`redact_messages` walks the messages' own JSON form, so every text-bearing field of every part type (user prompts,
system prompts, instructions, text, thinking, tool call arguments, tool returns, retry prompts, metadata, URLs and
textual binary attachments) is covered, including part types added to pydantic-ai later; only structural fields
(kinds, tool names, call ids, timestamps, ...) are left as they are.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

__all__ = ('MessageRedactor', 'RedactionError', 'Redactor', 'redact_messages', 'redact_secrets', 'redact_text')

Redactor = Callable[[str], str]
"""Maps a text to its redacted form. It must be deterministic (the same text always redacts the same way: the
session log and the archived blocks are redacted separately and must stay equal) and thread-safe (the log is
written from a background thread)."""


class RedactionError(RuntimeError):
    """The redactor failed (raised or returned a non-string); nothing was archived (fail closed)."""


def _mark(kind: str) -> str:
    return f'[REDACTED:{kind}]'


_KEYWORDS: Final = (
    r'passwd|password|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|'
    r'client[_-]?secret|credentials?'
)
# `name = value`, `name: value`, `"name": "value"` where the name *ends* in a keyword (`max_tokens=5` is not one);
# a quoted value is redacted whole, an unquoted one up to whitespace or a delimiter.
_ASSIGNMENT: Final = re.compile(
    rf'(?P<key>\b[\w.-]*?(?:{_KEYWORDS}))\b(?P<sep>["\']?\s*[:=](?!=)\s*)'
    r'(?!["\']?\[REDACTED)(?P<value>"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|[^\s"\'`,;&)}\]]+)',
    re.IGNORECASE,
)
_FLAG: Final = re.compile(
    rf'(?P<flag>--?(?:{_KEYWORDS}))(?P<sep>\s+)(?!\[REDACTED)(?P<value>[^\s"\'`-][^\s"\'`]*)', re.I
)
_AUTH_HEADER: Final = re.compile(
    r'(?P<key>\b(?:proxy-)?authorization)(?P<sep>["\']?\s*[:=]\s*["\']?)(?!\[REDACTED)(?P<value>[^\s"\'][^\r\n"\']*)',
    re.I,
)

_PRIVATE_KEY: Final = re.compile(
    r'-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?'
    r'(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)',  # a cut-off key goes to the end of the text
    re.S,
)
_URL_PASSWORD: Final = re.compile(
    r'(?P<prefix>\b[a-z][a-z0-9+.-]*://[^\s:/@"\'<>]*:)(?!\[REDACTED)[^\s@/"\'<>]+(?=@)', re.I
)
# Token shapes, applied after the structures above, each with the literals one of which it cannot match without.
_TOKENS: Final[tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...]] = (
    ('aws-access-key', re.compile(r'\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b'), ('AKIA', 'ASIA', 'ABIA', 'ACCA')),
    (
        'github-token',
        re.compile(r'\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b'),
        ('ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_', 'github_pat_'),
    ),
    ('api-key', re.compile(r'\bsk-(?=[A-Za-z0-9_-]*[0-9])(?:[A-Za-z0-9]+-){0,3}[A-Za-z0-9_-]{16,}'), ('sk-',)),
    ('stripe-key', re.compile(r'\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b'), ('_live_', '_test_')),
    ('slack-token', re.compile(r'\bxox[abposr]-[A-Za-z0-9-]{10,}'), ('xox',)),
    ('google-api-key', re.compile(r'\bAIza[0-9A-Za-z_-]{35}\b'), ('AIza',)),
    ('jwt', re.compile(r'\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}'), ('eyJ',)),
    ('bearer-token', re.compile(r'\bbearer\s+(?!\[REDACTED)[A-Za-z0-9._~+/-]{8,}=*', re.I), ('bearer',)),
)


def _keyed(kind_of: Callable[[str], str]) -> Callable[[re.Match[str]], str]:
    """Replacement keeping the name and separator, and the quotes around a quoted value."""

    def replace(match: re.Match[str]) -> str:
        value = match['value']
        kind = kind_of(match.group(1))
        if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
            return f'{match.group(1)}{match["sep"]}{value[0]}{_mark(kind)}{value[0]}'
        return f'{match.group(1)}{match["sep"]}{_mark(kind)}'

    return replace


def _secret_kind(name: str) -> str:
    lowered = name.lower()
    if 'pass' in lowered or 'pwd' in lowered:
        return 'password'
    if 'key' in lowered:
        return 'api-key'
    return 'token' if 'token' in lowered else 'secret'


_REPLACE_ASSIGNMENT: Final = _keyed(_secret_kind)
_REPLACE_AUTH: Final = _keyed(lambda _: 'authorization')


# Case-insensitive patterns may match these non-ASCII letters as ASCII ones (`re.I` folds them); `_fold` maps them
# first so that a needle looked for in the folded text is found wherever the pattern could match.
_IGNORECASE_TWINS: Final = (('\u0130', 'i'), ('\u0131', 'i'), ('\u017f', 's'), ('\u212a', 'k'))


def _fold(text: str) -> str:
    """`text` lowercased the way `re.IGNORECASE` compares ASCII letters, for the needle checks."""
    if not text.isascii():
        for twin, letter in _IGNORECASE_TWINS:
            if twin in text:
                text = text.replace(twin, letter)
    return text.lower()


@dataclass(frozen=True)
class _Step:
    """One pattern of `redact_secrets` with the cheap checks that must pass for it to match at all.

    The patterns cost milliseconds per 20 KB each (most positions start a partial match), while a substring check
    costs microseconds, and most text holds no secret: a pattern runs only where every group of `needles` has a
    member in the text (in its folded form for a case-insensitive pattern) and `prefilter` (a necessary
    sub-pattern) is found. The checks are necessary conditions only, so what gets redacted is the same as without them.
    """

    pattern: re.Pattern[str]
    replace: str | Callable[[re.Match[str]], str]
    needles: tuple[tuple[str, ...], ...]
    prefilter: re.Pattern[str] | None = None

    def possible(self, text: str, folded: str) -> bool:
        haystack = folded if self.pattern.flags & re.IGNORECASE else text
        if not all(any(needle in haystack for needle in group) for group in self.needles):
            return False
        return self.prefilter is None or self.prefilter.search(text) is not None


# Every spelling of every keyword of `_KEYWORDS`, lowercase.
_KEYWORD_NEEDLES: Final = (
    'passwd',
    'password',
    'pwd',
    'passphrase',
    'secret',
    'token',
    'apikey',
    'api_key',
    'api-key',
    'accesskey',
    'access_key',
    'access-key',
    'privatekey',
    'private_key',
    'private-key',
    'credential',
)
_SEPARATORS: Final = (':', '=')
_STEPS: Final = (
    _Step(_PRIVATE_KEY, _mark('private-key'), (('-----BEGIN ',),)),
    _Step(_AUTH_HEADER, _REPLACE_AUTH, (('authorization',), _SEPARATORS)),
    _Step(_URL_PASSWORD, lambda m: f'{m["prefix"]}{_mark("url-password")}', (('://',), ('@',))),
    _Step(
        _ASSIGNMENT,
        _REPLACE_ASSIGNMENT,
        (_KEYWORD_NEEDLES, _SEPARATORS),
        # the keyword and separator of `_ASSIGNMENT` alone: far cheaper than its lazy key prefix at every position
        prefilter=re.compile(rf'(?:{_KEYWORDS})\b["\']?\s*[:=](?!=)', re.IGNORECASE),
    ),
    _Step(_FLAG, lambda m: f'{m["flag"]}{m["sep"]}{_mark(_secret_kind(m["flag"]))}', (('-',), _KEYWORD_NEEDLES)),
    *(_Step(pattern, _mark(kind), (needles,)) for kind, pattern, needles in _TOKENS),
)


def redact_secrets(text: str) -> str:
    """Replace common secrets in `text` with `[REDACTED:kind]`: private key blocks, `Authorization` headers and
    bearer tokens, passwords in URLs (`scheme://user:pass@host`), `password=`/`token=`/`api_key:`/... assignments
    and `--password x` flags, AWS access key ids, `sk-...` API keys, GitHub, Stripe, Slack and Google API tokens,
    and JWTs.

    Pass it as `MementoCompaction(redact=redact_secrets)`. The patterns lean towards redacting too much (any value
    assigned to a name ending in `password`, `token`, `secret`, `key`, ...), since what is not caught is archived
    for good; wrap it for project-specific patterns:

    ```python
    def redact(text: str) -> str:
        return redact_secrets(re.sub(r'ACME-[0-9]{8}', '[REDACTED:acme-id]', text))
    ```

    Idempotent: redacting redacted text changes nothing.
    """
    if not text:
        return text
    folded = _fold(text)
    for step in _STEPS:
        if step.possible(text, folded):
            text, count = step.pattern.subn(step.replace, text)
            if count:  # a mark may hold a needle of a later step ('private-key', ...): look again
                folded = _fold(text)
    return text


def redact_text(text: str, redact: Redactor) -> str:
    """`redact(text)`, its failures turned into `RedactionError`."""
    try:
        result = redact(text)
    except Exception as exc:
        raise RedactionError(f'the redact hook failed: {type(exc).__name__}: {exc}') from exc
    if not isinstance(result, str):
        raise RedactionError(f'the redact hook returned {type(result).__name__}, not str')
    return result


# Fields of messages, parts and content items that name or order things rather than say them.
_STRUCTURAL: Final = frozenset(
    {
        'part_kind',
        'kind',
        'tool_name',
        'tool_call_id',
        'tool_kind',
        'timestamp',
        'run_id',
        'conversation_id',
        'model_name',
        'provider_name',
        'provider_url',
        'provider_response_id',
        'finish_reason',
        'id',
        'signature',
        'media_type',
        'identifier',
        'usage',
        'state',
        'outcome',
        'scope',
        'dynamic_ref',
        'history_digest',
        'force_download',
        'ttl',
        'file_id',
    }
)
_CONTENT_KINDS: Final = frozenset(
    {
        'text-content',
        'structured-content',
        'binary',
        'image-url',
        'audio-url',
        'document-url',
        'video-url',
        'uploaded-file',
        'cache-point',
    }
)
_TEXT_MEDIA: Final = ('text/', 'application/json', 'application/xml', 'application/yaml', 'application/x-yaml')


class _Walker:
    """Redacts every string of a message's JSON form except structural fields."""

    def __init__(self, redact: Redactor) -> None:
        self._redact = redact

    def text(self, value: str) -> str:
        return redact_text(value, self._redact)

    def message(self, data: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key == 'parts' and isinstance(value, list):
                out[key] = [self.obj(part) if isinstance(part, dict) else self.data(part) for part in value]
            elif key in _STRUCTURAL:
                out[key] = value
            else:
                out[key] = self.data(value)
        return out

    def obj(self, data: dict[str, Any]) -> dict[str, Any]:
        """A part or a content item: structural fields kept, the rest walked."""
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key in _STRUCTURAL:
                out[key] = value
            elif key == 'args' and isinstance(value, str):
                out[key] = self.json_text(value)
            elif key == 'data' and data.get('kind') == 'binary' and isinstance(value, str):
                out[key] = self.binary(value, str(data.get('media_type') or ''))
            else:
                out[key] = self.data(value)
        if data.get('kind') in _CONTENT_KINDS and out != data:
            out.pop('identifier', None)  # derived from the original data or URL: let it be derived again
        return out

    def data(self, value: Any) -> Any:
        """Free-form data (tool arguments and returns, metadata): every string value."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.data(item) for item in value]
        if isinstance(value, dict):
            if value.get('kind') in _CONTENT_KINDS:
                return self.obj(value)
            return {
                key: self.keyed(key, item) if isinstance(item, str) else self.data(item) for key, item in value.items()
            }
        return value

    def keyed(self, key: str, value: str) -> str:
        """A string value in the context of its key: `{"password": "correct horse"}` holds a secret that neither
        `password` nor `correct horse` shows alone. The pair is redacted as a JSON member and the value read back;
        a pair that changed but cannot be read back loses its whole value (fail closed)."""
        plain = self.text(value)
        member = f'{json.dumps(str(key), ensure_ascii=False)}: {json.dumps(plain, ensure_ascii=False)}'
        redacted = self.text(member)
        if redacted == member:
            return plain
        try:
            parsed = json.loads('{' + redacted + '}')
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and len(parsed) == 1 and isinstance(found := parsed.get(str(key)), str):
            return found
        return '[REDACTED]'

    def json_text(self, value: str) -> str:
        """Tool call arguments as a JSON string: redact the values, not the syntax (a pattern never eats a quote)."""
        try:
            parsed = json.loads(value)
        except ValueError:
            return self.text(value)
        walked = self.data(parsed)
        return value if walked == parsed else json.dumps(walked, ensure_ascii=False)

    def binary(self, encoded: str, media_type: str) -> str:
        """A textual attachment is redacted like text; other binary data is archived as it is."""
        if not media_type.startswith(_TEXT_MEDIA):
            return encoded
        try:
            text = base64.b64decode(encoded, validate=True).decode('utf-8')
        except (binascii.Error, UnicodeDecodeError):
            return encoded
        redacted = self.text(text)
        return encoded if redacted == text else base64.b64encode(redacted.encode('utf-8')).decode('ascii')


def _redact_message(message: ModelMessage, walker: _Walker) -> ModelMessage:
    data = ModelMessagesTypeAdapter.dump_python([message], mode='json')[0]
    walked = walker.message(data)
    if walked == data:
        return message
    try:
        [redacted] = ModelMessagesTypeAdapter.validate_python([walked])
    except ValueError as exc:
        raise RedactionError(f'the redacted message is no longer a valid pydantic-ai message: {exc}') from exc
    return redacted


def redact_messages(messages: Sequence[ModelMessage], redact: Redactor) -> list[ModelMessage]:
    """Copies of `messages` with every text redacted; a message with nothing to redact is returned as it is (the
    same object), so its archived bytes are exactly its own.

    Raises:
        RedactionError: the redactor failed, or its output no longer forms valid messages.
    """
    walker = _Walker(redact)
    return [_redact_message(message, walker) for message in messages]


_MEMO_LIMIT: Final = 4_096


class MessageRedactor:
    """`redact_messages` with one hook, remembering each message's redacted form by identity.

    A session's messages are redacted on their way into the log and again when their block is archived (or a large
    tool result stubbed); the hook is deterministic and the messages are immutable, so the second time is the first
    one's result. Entries keep their message alive (an equal id is then the same object, as in
    `TokenCounter`), and the oldest are dropped past `limit`: a dropped message is simply redacted again. Thread-safe
    (the log writer redacts on its own thread); a failing hook is not remembered, so it fails again.
    """

    def __init__(self, redact: Redactor, *, limit: int = _MEMO_LIMIT) -> None:
        self.redact = redact
        self._walker = _Walker(redact)
        self._limit = limit
        self._memo: OrderedDict[int, tuple[ModelMessage, ModelMessage]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """`redact_messages(messages, self.redact)`, each message redacted once.

        Raises:
            RedactionError: the redactor failed, or its output no longer forms valid messages.
        """
        return [self._one(message) for message in messages]

    def known(self, redacted: ModelMessage) -> ModelMessage:
        """Remember `redacted` as its own redacted form (a message read back from the archive, redacted when it was
        archived), so it is not redacted a second time; returns it."""
        with self._lock:
            self._memo[id(redacted)] = (redacted, redacted)
            self._memo.move_to_end(id(redacted))
            while len(self._memo) > self._limit:
                self._memo.popitem(last=False)
        return redacted

    def _one(self, message: ModelMessage) -> ModelMessage:
        key = id(message)
        with self._lock:
            hit = self._memo.get(key)
            if hit is not None and hit[0] is message:
                self._memo.move_to_end(key)
                return hit[1]
        redacted = _redact_message(message, self._walker)  # outside the lock: the hook may be slow
        with self._lock:
            self._memo[key] = (message, redacted)
            self._memo.move_to_end(key)
            while len(self._memo) > self._limit:
                self._memo.popitem(last=False)
        return redacted
