"""Small slices of the shared benchmark files (tests stay fast; skipped when the data is absent)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import shared_data


@pytest.fixture(scope='session')
def locomo_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first LoCoMo conversation cut to its first three sessions, with the questions they answer."""
    source = shared_data('locomo', 'locomo_dev7.json')
    sample = json.loads(source.read_text(encoding='utf-8'))[0]
    conversation = {
        key: value
        for key, value in sample['conversation'].items()
        if not (m := re.match(r'session_(\d+)', key)) or int(m.group(1)) <= 3
    }
    questions = [
        qa
        for qa in sample['qa']
        if (ids := re.findall(r'D(\d+):\d+', ' '.join(qa.get('evidence', [])))) and all(int(i) <= 3 for i in ids)
    ]
    summaries = {k: v for k, v in sample['session_summary'].items() if int(k.split('_')[1]) <= 3}
    observations = {k: v for k, v in sample['observation'].items() if int(k.split('_')[1]) <= 3}
    path = tmp_path_factory.mktemp('locomo') / 'slice.json'
    item = {**sample, 'conversation': conversation, 'qa': questions, 'session_summary': summaries}
    item['observation'] = observations
    path.write_text(json.dumps([item]), encoding='utf-8')
    return path


@pytest.fixture(scope='session')
def longmemeval_oracle() -> Path:
    return shared_data('longmemeval', 'longmemeval_oracle_dev.json')
