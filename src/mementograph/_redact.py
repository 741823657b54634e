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
from collections.abc import Callable, Sequence
from typing import Any, Final

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

__all__ = ('RedactionError', 'Redactor', 'redact_messages', 'redact_secrets', 'redact_text')

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
# Token shapes, applied after the structures above.
_TOKENS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ('aws-access-key', re.compile(r'\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b')),
    ('github-token', re.compile(r'\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b')),
    ('api-key', re.compile(r'\bsk-(?=[A-Za-z0-9_-]*[0-9])(?:[A-Za-z0-9]+-){0,3}[A-Za-z0-9_-]{16,}')),
    ('stripe-key', re.compile(r'\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b')),
    ('slack-token', re.compile(r'\bxox[abposr]-[A-Za-z0-9-]{10,}')),
    ('google-api-key', re.compile(r'\bAIza[0-9A-Za-z_-]{35}\b')),
    ('jwt', re.compile(r'\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}')),
    ('bearer-token', re.compile(r'\bbearer\s+(?!\[REDACTED)[A-Za-z0-9._~+/-]{8,}=*', re.I)),
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
    text = _PRIVATE_KEY.sub(_mark('private-key'), text)
    text = _AUTH_HEADER.sub(_REPLACE_AUTH, text)
    text = _URL_PASSWORD.sub(lambda m: f'{m["prefix"]}{_mark("url-password")}', text)
    text = _ASSIGNMENT.sub(_REPLACE_ASSIGNMENT, text)
    text = _FLAG.sub(lambda m: f'{m["flag"]}{m["sep"]}{_mark(_secret_kind(m["flag"]))}', text)
    for kind, pattern in _TOKENS:
        text = pattern.sub(_mark(kind), text)
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


def redact_messages(messages: Sequence[ModelMessage], redact: Redactor) -> list[ModelMessage]:
    """Copies of `messages` with every text redacted; a message with nothing to redact is returned as it is (the
    same object), so its archived bytes are exactly its own.

    Raises:
        RedactionError: the redactor failed, or its output no longer forms valid messages.
    """
    walker = _Walker(redact)
    out: list[ModelMessage] = []
    for message in messages:
        data = ModelMessagesTypeAdapter.dump_python([message], mode='json')[0]
        walked = walker.message(data)
        if walked == data:
            out.append(message)
            continue
        try:
            out.extend(ModelMessagesTypeAdapter.validate_python([walked]))
        except ValueError as exc:
            raise RedactionError(f'the redacted message is no longer a valid pydantic-ai message: {exc}') from exc
    return out
