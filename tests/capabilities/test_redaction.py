"""Redaction: secrets planted in a user prompt, instructions, tool call arguments and tool returns never reach the
store -- not in the raw bytes of the SQLite file and its WAL, not in any property of the session's Neo4j nodes --
while the live run completes with its full context. A failing hook means no eviction and nothing archived."""

from __future__ import annotations

import base64
import json
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from mementograph import MementoCompaction, MementoWarning, open_store, redact_secrets
from mementograph._messages import deserialize_messages, serialize_messages
from mementograph._redact import RedactionError, redact_messages
from mementograph.knowledge_graph.store import GraphStore
from mementograph.knowledge_graph.store._neo4j import Neo4jStore
from tests.capabilities.probe import ProbeModel, module_body, own_pointer, probe_agent, tool_returns

GITHUB_TOKEN = 'ghp_' + 'Zq9XwT4kLmN7vB2cR8sY1dF6gH3jK5pQ0aE4'
DB_PASSWORD = 'Sup3rS3cretDbPw'
BEARER = 'eyVq8Lm2Nx7Rt4Ws9Kp3'
AWS_KEY = 'AKIAZ7QX4MPL2RT9WVYB'
ARG_PASSWORD = 'Tr0ub4dor horse staple'
OPENAI_KEY = 'sk-proj-' + 'Hk83JdLq02MxVb7NwPz5Rt'
KEY_BODY = 'MIIEpAIBAAKCAQEA7hSgqR3vXzK0Yw'
# What must never be found: each secret, and the part of it a partial redaction could leave behind.
NEEDLES = (GITHUB_TOKEN, GITHUB_TOKEN[4:], DB_PASSWORD, BEARER, AWS_KEY, 'Tr0ub4dor', 'horse staple', OPENAI_KEY[8:])
NEEDLES += (KEY_BODY,)

PROMPT = (
    f'Deploy the app. The GitHub token is {GITHUB_TOKEN}; the database is '
    f'postgres://deploy:{DB_PASSWORD}@db.internal:5432/app.'
)
INSTRUCTIONS = f'Call the release API with the header Authorization: Bearer {BEARER}.'


def env_file() -> str:
    """A large tool return (micro-compacted once old) with secrets at its head."""
    head = f'OPENAI_API_KEY={OPENAI_KEY}\n-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----\n'
    return head + module_body('ENVFILE', 99)


def secret_agent(model: ProbeModel, capability: MementoCompaction[None]) -> Agent[None, str]:
    agent = probe_agent(model, [capability], instructions=INSTRUCTIONS)

    @agent.tool_plain
    def deploy(aws_access_key_id: str, password: str) -> str:
        """Deploy."""
        return f'deployed with key {aws_access_key_id[:4]}...'

    @agent.tool_plain
    def read_env() -> str:
        """Read the .env file."""
        return env_file()

    return agent


def secret_model(*, recover: bool = True) -> ProbeModel:
    return ProbeModel(
        'SECRETRUN',
        lead=[('deploy', {'aws_access_key_id': AWS_KEY, 'password': ARG_PASSWORD}), ('read_env', {})],
        probes=[('recover_block', own_pointer)] if recover else [],
    )


def _capability(store: GraphStore | str, redact: Callable[[str], str] | None, **kwargs: Any) -> MementoCompaction[None]:
    # old large tool results are stubbed (micro-compaction) as well as whole blocks evicted
    return MementoCompaction(
        store, max_tokens=2_500, micro_min_tokens=500, keep_recent_messages=2, redact=redact, **kwargs
    )


def _raw_bytes(db: Path) -> bytes:
    return b''.join(p.read_bytes() for p in db.parent.glob(db.name + '*'))


def _found(needles: tuple[str, ...], data: bytes) -> list[str]:
    return [needle for needle in needles if needle.encode() in data]


async def test_secrets_never_reach_the_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / 'redacted.db'
    store = open_store(f'sqlite://{db}')
    model = secret_model()
    result = await secret_agent(model, _capability(store, redact_secrets, session_id='s')).run(PROMPT)

    # the live run had everything and completed
    assert result.output == 'SECRETRUN: all 8 modules read.'
    assert GITHUB_TOKEN in str(model.seen[0]) and BEARER in str(model.seen[0])
    # the archive worked: micro-compacted parts and blocks, recoverable byte for byte as archived (redacted)
    blocks = store.list_blocks(session_id='s', kind=None)
    assert {b.kind for b in blocks} == {'block', 'part'}
    log = [m for e in store.read_events('s') if e.kind == 'message' for m in deserialize_messages(e.payload)]
    assert log
    archived = b''
    for block in store.list_blocks(session_id='s'):
        recovered = store.recover_block(block.id, session_id='s')
        assert list(recovered.messages) == log[block.first_message : block.last_message + 1]
        archived += block.messages_json
    assert b'[REDACTED:aws-access-key]' in archived and b'[REDACTED:password]' in archived
    assert b'[REDACTED:private-key]' in b''.join(b.messages_json for b in blocks)
    [recovered_text] = tool_returns(model, 'recover_block')
    assert 'sha256 verified' in recovered_text and '[REDACTED:' in recovered_text
    store.close()

    raw = _raw_bytes(db)
    assert len(raw) > 100_000
    assert _found(NEEDLES, raw) == []

    # control: the same run without the hook does write them, so the search above can find them
    plain_db = tmp_path / 'plain.db'
    plain = open_store(f'sqlite://{plain_db}')
    await secret_agent(secret_model(), _capability(plain, None, session_id='s')).run(PROMPT)
    plain.close()
    assert set(_found(NEEDLES, _raw_bytes(plain_db))) == set(NEEDLES)


@pytest.mark.neo4j
async def test_secrets_never_reach_neo4j(neo4j_store: Neo4jStore, unique_namespace: str) -> None:
    store = neo4j_store
    try:
        model = secret_model()
        capability = _capability(store, redact_secrets, session_id='s', namespace=unique_namespace)
        result = await secret_agent(model, capability).run(PROMPT)
        assert result.output == 'SECRETRUN: all 8 modules read.'
        assert store.list_blocks(namespace=unique_namespace, session_id='s')

        for needle in NEEDLES:  # Cypher CONTAINS over every string property of the namespace's nodes
            records, _, _ = store._driver.execute_query(
                'MATCH (n) WHERE n.namespace = $namespace UNWIND keys(n) AS key WITH n[key] AS value '
                'WHERE value IS :: STRING AND value CONTAINS $needle RETURN count(*) AS hits',
                namespace=unique_namespace,
                needle=needle,
                database_=store._database,
            )
            assert records[0]['hits'] == 0, needle
        # byte-array properties (archived messages, log payloads) and lists, read back whole
        records, _, _ = store._driver.execute_query(
            'MATCH (n) WHERE n.namespace = $namespace RETURN properties(n) AS p',
            namespace=unique_namespace,
            database_=store._database,
        )
        everything = b'\n'.join(_property_bytes(value) for record in records for value in record['p'].values())
        assert b'[REDACTED:aws-access-key]' in everything and b'[REDACTED:github-token]' in everything
        assert _found(NEEDLES, everything) == []
    finally:
        store.delete_session('s', namespace=unique_namespace)


def _property_bytes(value: object) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, list):
        return b'\n'.join(_property_bytes(item) for item in value)
    return str(value).encode()


def _broken(text: str) -> str:
    raise RuntimeError('redactor down')


@pytest.mark.parametrize('redact', [_broken, lambda text: None], ids=['raises', 'returns-none'])
async def test_a_failing_hook_archives_nothing(tmp_path: Path, redact: Callable[[str], str]) -> None:
    db = tmp_path / 'failing.db'
    store = open_store(f'sqlite://{db}')
    model = secret_model(recover=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await secret_agent(model, _capability(store, redact, session_id='s')).run(PROMPT)

    messages = [str(w.message) for w in caught if issubclass(w.category, MementoWarning)]
    assert any('redact hook' in m for m in messages)
    assert result.output == 'SECRETRUN: all 8 modules read.'
    assert 'recover_block("' not in str(result.all_messages())  # no eviction: the model kept its full context
    assert len(model.seen[-1]) == len(result.all_messages()) - 1
    stats = store.stats(session_id='s')
    assert (stats.blocks, stats.parts, stats.mementos, stats.events) == (0, 0, 0, 0)
    store.close()
    assert _found(NEEDLES, _raw_bytes(db)) == []


class CountingRedactor:
    """`redact_secrets`, counting its calls (from the log writer's thread as well)."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        with self._lock:
            self.calls += 1
        return redact_secrets(text)


async def test_each_message_is_redacted_once(tmp_path: Path) -> None:
    """The log writer's redaction of a message is reused when its block is archived or its tool result stubbed."""
    store = open_store(f'sqlite://{tmp_path / "once.db"}')
    redact = CountingRedactor()
    result = await secret_agent(secret_model(), _capability(store, redact, session_id='s')).run(PROMPT)
    assert result.output == 'SECRETRUN: all 8 modules read.'
    # both archiving paths ran on logged messages: whole blocks and micro-compacted tool results
    assert {b.kind for b in store.list_blocks(session_id='s', kind=None)} == {'block', 'part'}
    log = [m for e in store.read_events('s') if e.kind == 'message' for m in deserialize_messages(e.payload)]
    store.close()
    # redacting the logged messages once makes as many calls (the same strings, redacted or not) as the whole run
    once = CountingRedactor()
    assert redact_messages(log, once) == log  # idempotent: the log holds the redacted form
    assert once.calls > 0 and redact.calls == once.calls


# -- redact_secrets and redact_messages -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        ('export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE', 'export AWS_ACCESS_KEY_ID=[REDACTED:aws-access-key]'),
        ('aws_secret_access_key = wJalrXUtnFEMI/K7MDENG', 'aws_secret_access_key = [REDACTED:api-key]'),
        ('-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\nok', '[REDACTED:private-key]\nok'),
        ('-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl (cut off', '[REDACTED:private-key]'),
        ('Authorization: Basic dXNlcjpwYXNz', 'Authorization: [REDACTED:authorization]'),
        ('curl -H "Authorization: token abc123"', 'curl -H "Authorization: [REDACTED:authorization]"'),
        ('use bearer abcdefgh12345678 now', 'use [REDACTED:bearer-token] now'),
        (f'key {OPENAI_KEY}.', 'key [REDACTED:api-key].'),
        ('sk-ant-api03-abcdefghijklmnop1234567890', '[REDACTED:api-key]'),
        (f'token {GITHUB_TOKEN} ok', 'token [REDACTED:github-token] ok'),
        ('github_pat_11ABCDEFG0123456789_abcdefghijkl', '[REDACTED:github-token]'),
        ('redis://:hunter2@cache:6379', 'redis://:[REDACTED:url-password]@cache:6379'),
        ('https://bob:hunter2@example.com/x', 'https://bob:[REDACTED:url-password]@example.com/x'),
        ('password=hunter2&user=bob', 'password=[REDACTED:password]&user=bob'),
        ('{"password": "correct horse", "user": "bob"}', '{"password": "[REDACTED:password]", "user": "bob"}'),
        ("{'api_key': 'xyz', 'max_tokens': 5}", "{'api_key': '[REDACTED:api-key]', 'max_tokens': 5}"),
        ('GITHUB_TOKEN: abc', 'GITHUB_TOKEN: [REDACTED:token]'),
        ('mysql --password s3cret -u root', 'mysql --password [REDACTED:password] -u root'),
        ('xoxb-1234567890-abcdefghij', '[REDACTED:slack-token]'),
        ('eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.dozjgNryP4J3jVmN', '[REDACTED:jwt]'),
    ],
)
def test_redact_secrets_patterns(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected
    assert redact_secrets(expected) == expected  # idempotent


@pytest.mark.parametrize(
    'text',
    [
        'max_tokens=60000 low_water=0.5 token_count=12',
        'if password == expected: return',
        'the bearer of bad news; sk-learn; disk-usage-report-generator',
        'http://host:8080/path@x and git@github.com:org/repo.git',
        'def handler_3_7(x):  # src/app/module_3.py line 7',
    ],
)
def test_redact_secrets_leaves_ordinary_text(text: str) -> None:
    assert redact_secrets(text) == text


def test_redact_messages_covers_every_text_field() -> None:
    secret = GITHUB_TOKEN
    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[
                SystemPromptPart(f'system {secret}'),
                UserPromptPart(
                    [
                        f'prompt {secret}',
                        TextContent(f'text {secret}', metadata={'note': secret}),
                        BinaryContent(f'file {secret}'.encode(), media_type='text/plain'),
                        ImageUrl(f'https://bob:{DB_PASSWORD}@img.example.com/a.png'),
                    ]
                ),
                ToolReturnPart('env', {'value': secret, 'session_token': 'two words', 'n': 3}, tool_call_id='c1'),
                ToolReturnPart('env', f'bad input {secret}', tool_call_id='c2', outcome='retried'),
            ],
            instructions=f'instructions {secret}',
        ),
        ModelResponse(
            parts=[
                ThinkingPart(f'thinking {secret}', signature='opaque-signature'),
                TextPart(f'text {secret}'),
                ToolCallPart('login', json.dumps({'user': 'bob', 'password': 'two words'}), tool_call_id='c1'),
                ToolCallPart('login', {'token': secret, 'note': 'plain'}, tool_call_id='c2'),
            ],
            provider_details={'raw': secret},
        ),
        ModelRequest(parts=[UserPromptPart('nothing to hide')]),
    ]
    redacted = redact_messages(messages, redact_secrets)
    data = serialize_messages(redacted)
    assert secret.encode() not in data and DB_PASSWORD.encode() not in data and b'two words' not in data
    binary = redacted[0].parts[1].content[2]  # type: ignore[index,union-attr]
    assert isinstance(binary, BinaryContent) and secret.encode() not in binary.data
    assert secret not in base64.b64decode(json.loads(data)[0]['parts'][1]['content'][2]['data']).decode()
    call = redacted[1].parts[2]
    assert isinstance(call, ToolCallPart) and json.loads(call.args) == {
        'user': 'bob',
        'password': '[REDACTED:password]',
    }  # type: ignore[arg-type]
    # structure is kept: ids, names, kinds, signatures; a clean message is the very same object
    assert [type(p) for m in redacted for p in m.parts] == [type(p) for m in messages for p in m.parts]
    assert redacted[1].parts[0].signature == 'opaque-signature'  # type: ignore[union-attr]
    assert redacted[2] is messages[2]
    assert deserialize_messages(data) == redacted


def test_redact_messages_fails_closed() -> None:
    message = ModelRequest(parts=[UserPromptPart('hello')])
    with pytest.raises(RedactionError, match='redactor down'):
        redact_messages([message], _broken)
    with pytest.raises(RedactionError, match='returned int'):
        redact_messages([message], lambda text: 3)  # type: ignore[arg-type,return-value]
